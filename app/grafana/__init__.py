"""The Grafana JSON datasource (simpod-json-datasource protocol) over gpucast's stored data."""

from app.grafana.catalog import (
    TARGETS,
    VARIABLES,
    get_target,
    metric_definitions,
    payload_options,
    variable_values,
)
from app.grafana.protocol import (
    GrafanaInputError,
    MetricsRequest,
    PayloadOptionsRequest,
    QueryContext,
    QueryRequest,
    TagValuesRequest,
    VariableRequest,
    resolve_range,
    series_filters,
)

__all__ = [
    "TARGETS",
    "VARIABLES",
    "GrafanaInputError",
    "MetricsRequest",
    "PayloadOptionsRequest",
    "QueryContext",
    "QueryRequest",
    "TagValuesRequest",
    "VariableRequest",
    "get_target",
    "metric_definitions",
    "payload_options",
    "resolve_range",
    "series_filters",
    "variable_values",
]
