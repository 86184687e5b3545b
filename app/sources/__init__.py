"""Series sources: the Prometheus server and PromQL each series' hourly import reads."""

from app.sources.importer import SourceOutcome, import_source, import_sources
from app.sources.serving_import import ServingOutcome, import_serving_sources
from app.sources.serving_spec import ServingSpec
from app.sources.serving_store import (
    delete_serving_source,
    describe_serving,
    get_serving_source,
    set_serving_source,
)
from app.sources.spec import SourceSpec, redact, redact_url
from app.sources.store import delete_source, describe, get_source, list_sources, set_source

__all__ = [
    "ServingOutcome",
    "ServingSpec",
    "SourceOutcome",
    "SourceSpec",
    "delete_serving_source",
    "delete_source",
    "describe_serving",
    "describe",
    "get_serving_source",
    "get_source",
    "import_serving_sources",
    "import_source",
    "import_sources",
    "list_sources",
    "redact",
    "redact_url",
    "set_serving_source",
    "set_source",
]
