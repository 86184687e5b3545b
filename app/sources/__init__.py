"""Series sources: the Prometheus server and PromQL each series' hourly import reads."""

from app.sources.importer import SourceOutcome, import_source, import_sources
from app.sources.spec import SourceSpec, redact, redact_url
from app.sources.store import delete_source, describe, get_source, list_sources, set_source

__all__ = [
    "SourceOutcome",
    "SourceSpec",
    "delete_source",
    "describe",
    "get_source",
    "import_source",
    "import_sources",
    "list_sources",
    "redact",
    "redact_url",
    "set_source",
]
