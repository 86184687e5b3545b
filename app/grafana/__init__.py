"""The Grafana JSON datasource (simpod-json-datasource protocol) over gpucast's stored data."""

from app.grafana.catalog import (
    TARGETS,
    VARIABLES,
    Target,
    get_target,
    metric_definitions,
    payload_options,
    variable_values,
)
from app.grafana.filters import SeriesFilter
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
from app.grafana.ranges import compact, cut, window

__all__ = [
    "TARGETS",
    "VARIABLES",
    "GrafanaInputError",
    "MetricsRequest",
    "PayloadOptionsRequest",
    "QueryContext",
    "QueryRequest",
    "SeriesFilter",
    "TagValuesRequest",
    "Target",
    "VariableRequest",
    "compact",
    "cut",
    "get_target",
    "metric_definitions",
    "payload_options",
    "resolve_range",
    "series_filters",
    "variable_values",
    "window",
]
