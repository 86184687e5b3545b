"""Request shapes of the simpod-json-datasource plugin and the helpers every target shares.

The plugin posts JSON; pydantic turns a malformed body into a 422 before a handler runs. Payload
values arrive as strings from the query editor's inputs, or as lists from multi-value template
variables, so the readers here accept both and answer a clear 400 for anything else.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import pandas as pd
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    model_validator,
)
from sqlalchemy.orm import Session

from app.common import names, timebounds
from app.common.numbers import bounded_number
from app.db import Database, repository
from app.grafana.errors import GrafanaInputError
from app.grafana.filters import SeriesFilter, series_filter
from app.grafana.interpolation import ALL, plugin_payload, unescape
from app.plans import PlanCache

DEFAULT_LOOKBACK = timedelta(days=7)
DEFAULT_LOOKAHEAD = timedelta(days=2)


class _Lenient(BaseModel):
    # The plugin adds fields between versions (scopedVars, datasource, hide…); ignore them.
    model_config = ConfigDict(extra="ignore", strict=True)


def _payload_object(value: Any) -> dict[str, Any]:
    """A JSON string (how older dashboards store the payload) as an object; {} if not one.
    Its JSON passes the same depth and text rules as a request body (app.common.names)."""
    names.check_json_depth(value, what="payload")
    try:
        parsed = json.loads(value) if value.strip() else {}
    except ValueError:
        return {}
    names.check_json_text(parsed, what="payload")
    return parsed if isinstance(parsed, dict) else {}


def _string_payload(value: Any) -> Any:
    return _payload_object(value) if isinstance(value, str) else value


# The plugin sends an object; a string is parsed as JSON. Anything else is a 422. Values are
# read as the plugin formats them (Grafana's regex format: app/grafana/interpolation.py).
PayloadObject = Annotated[
    dict[str, Any],
    BeforeValidator(_string_payload),
    AfterValidator(plugin_payload),
    WithJsonSchema({"anyOf": [{"type": "object"}, {"type": "string"}]}),
]


class TimeRange(_Lenient):
    from_: str | None = Field(default=None, alias="from")
    to: str | None = None


class AdhocFilter(_Lenient):
    key: str
    operator: str = "="
    value: str = ""
    values: list[str] | None = Field(default=None, max_length=1000)  # "=|" and "!=|"


class QueryTarget(_Lenient):
    refId: str = "A"  # noqa: N815 (the plugin's field name)
    target: str | None = None
    payload: PayloadObject = Field(default_factory=dict)
    hide: bool = False


MAX_TARGETS = 100
MAX_FILTERS = 100
# Series one target may cover: a target over every series of a large fleet is refused (400)
# instead of running for minutes. Series x hours of history one target reads: beyond it the
# history target shows the most recent hours that fit and says so in its notices.
MAX_SERIES_PER_TARGET = 200
MAX_SERIES_HOURS = 200 * 24 * 92
# Plan replays one query may ask for (visible plan_backtest targets of distinct payloads):
# each may replay days of plans when its stored replay is not current (seconds of CPU).
MAX_REPLAYS_PER_QUERY = 4
REPLAYING_TARGETS = frozenset({"plan_backtest"})


class QueryRequest(_Lenient):
    range: TimeRange | None = None
    maxDataPoints: int | None = Field(default=None, ge=1)  # noqa: N815
    # Budgets of one query (a dashboard sends a few targets and filters): beyond them a 422.
    targets: list[QueryTarget] = Field(default_factory=list, max_length=MAX_TARGETS)
    filters: list[AdhocFilter] = Field(default_factory=list, max_length=MAX_FILTERS)
    adhocFilters: list[AdhocFilter] = Field(  # noqa: N815 (plugin < 0.6)
        default_factory=list, max_length=MAX_FILTERS
    )

    @model_validator(mode="after")
    def _replays_within_budget(self) -> QueryRequest:
        replays = {
            json.dumps(t.payload, sort_keys=True, default=str)
            for t in self.targets
            if not t.hide and t.target in REPLAYING_TARGETS
        }
        if len(replays) > MAX_REPLAYS_PER_QUERY:
            raise ValueError(
                f"the query asks for {len(replays)} plan replays (plan_backtest targets of "
                f"distinct payloads); one query may ask for at most {MAX_REPLAYS_PER_QUERY}: "
                "spread them over several panels"
            )
        return self


class MetricsRequest(_Lenient):
    metric: str | None = None
    payload: PayloadObject = Field(default_factory=dict)


class PayloadOptionsRequest(_Lenient):
    metric: str
    name: str
    payload: PayloadObject = Field(default_factory=dict)


class VariableRequest(_Lenient):
    payload: dict[str, Any] | str | None = None
    target: str | None = None  # the pre-0.6 shape sent the query at the top level
    range: TimeRange | None = None

    def query(self) -> str:
        if isinstance(self.payload, dict):
            value = self.payload.get("target", self.target)
        elif isinstance(self.payload, str):
            value = _payload_object(self.payload).get("target", self.payload)
        else:
            value = self.target
        return unescape(str(value).strip()) if value is not None else ""


class TagValuesRequest(_Lenient):
    key: str


def parse_time(value: str, *, field: str) -> datetime:
    try:  # what Grafana sends (2026-11-30T00:00:00.000Z), without pandas: once per query
        moment = datetime.fromisoformat(value)
    except ValueError:
        pass
    else:
        if not timebounds.in_range(moment):
            raise GrafanaInputError(
                f"range.{field} {value[:40]!r} is outside the supported range: "
                f"{timebounds.RANGE_TEXT}"
            )
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    try:
        stamp = pd.Timestamp(value)
    except (ValueError, TypeError, OverflowError) as exc:
        raise GrafanaInputError(
            f"range.{field} {names.echo(value)} is not an ISO-8601 time such as "
            "2026-11-30T00:00:00.000Z"
        ) from exc
    if pd.isna(stamp):
        raise GrafanaInputError(f"range.{field} must be a time, got {names.echo(value)}")
    if not timebounds.in_range(stamp):
        raise GrafanaInputError(
            f"range.{field} {value[:40]!r} is outside the supported range: {timebounds.RANGE_TEXT}"
        )
    stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    return stamp.to_pydatetime()


def resolve_range(
    time_range: TimeRange | None, *, now: datetime | None = None
) -> tuple[datetime, datetime]:
    """[from, to] of the request; without one, the last week plus the next two days.

    Any length is answered ("Last 5 years" is one of Grafana's quick ranges): the work of a
    target does not grow with the range beyond the data that exists, and the one target that
    reads in proportion to it (``history``) bounds what it reads (:data:`MAX_SERIES_HOURS`)."""
    now = now or datetime.now(UTC)
    start = now - DEFAULT_LOOKBACK
    end = now + DEFAULT_LOOKAHEAD
    if time_range is not None and time_range.from_:
        start = parse_time(time_range.from_, field="from")
    if time_range is not None and time_range.to:
        end = parse_time(time_range.to, field="to")
    if end <= start:
        raise GrafanaInputError(
            f"range.to ({end.isoformat()}) must be after range.from ({start.isoformat()})"
        )
    return start, end


@dataclass
class QueryContext:
    """Everything a target handler needs besides its payload."""

    session: Session
    start: datetime
    end: datetime
    series_filter: SeriesFilter = SeriesFilter()
    plan_cache: PlanCache | None = None
    # For targets that run work in transactions of their own (the plan replay stores its result).
    database: Database | None = None

    def end_read_transaction(self) -> None:
        """Commit the request session's transaction (handlers only read through it), so work
        that opens its own transactions can run: on SQLite every transaction holds the write
        lock, so a second one would wait for this one until it timed out."""
        self.session.commit()


def series_filters(filters: Iterable[AdhocFilter]) -> SeriesFilter:
    """The ad-hoc filters on the key ``series`` (:mod:`app.grafana.filters`); another key,
    an unknown operator or a pattern RE2 cannot compile is a 400."""
    return series_filter([(f.key, f.operator, f.value, f.values or ()) for f in filters])


def _texts(payload: dict[str, Any], key: str) -> list[str]:
    value = payload.get(key)
    if value is None:
        return []
    values = value if isinstance(value, list) else [value]
    if not all(isinstance(v, str | int | float) for v in values):
        raise GrafanaInputError(f"payload.{key} must be a string or a list of strings")
    return [str(v).strip() for v in values if str(v).strip()]


def text_list(payload: dict[str, Any], key: str) -> list[str]:
    """A payload value as a list of non-empty strings (a multi-value variable sends a list),
    without a variable's "All" (:func:`wants_all` tells whether it was chosen)."""
    return [v for v in dict.fromkeys(_texts(payload, key)) if v != ALL]


def wants_all(payload: dict[str, Any], key: str) -> bool:
    """True when the payload value is a variable's "All" (``$__all``, ``.*``, ``*``)."""
    return ALL in _texts(payload, key)


def choice(payload: dict[str, Any], key: str, allowed: Sequence[str], default: str) -> str:
    values = text_list(payload, key)
    if len(values) > 1:
        raise GrafanaInputError(f"payload.{key} takes one value, got {values}")
    value = values[0] if values else default
    if value not in allowed:
        raise GrafanaInputError(
            f"payload.{key} {names.echo(value)} is unknown; valid: {', '.join(allowed)}"
        )
    return value


def number(payload: dict[str, Any], key: str, default: float, *, low: float, high: float) -> float:
    value = payload.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        return default
    what = f"payload.{key}"
    return float(bounded_number(value, what=what, low=low, high=high, error=GrafanaInputError))


def integer(payload: dict[str, Any], key: str, default: int, *, low: int, high: int) -> int:
    """A whole number in [low, high]; ``2.5`` is an error, not silently 2."""
    value = payload.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        return default
    what = f"payload.{key}"
    return int(
        bounded_number(value, what=what, low=low, high=high, whole=True, error=GrafanaInputError)
    )


def optional_integer(payload: dict[str, Any], key: str, *, low: int, high: int) -> int | None:
    """Like :func:`integer`, but a missing or empty value is None (no limit)."""
    value = payload.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return integer(payload, key, low, low=low, high=high)


def boolean(payload: dict[str, Any], key: str, default: bool) -> bool:
    """A strict yes/no: a JSON boolean, or the strings ``true``/``false`` (any case; a
    multi-value variable's one-element list too); missing or empty is ``default``. Anything
    else is a 400, so a typo never silently flips a plan parameter."""
    value = payload.get(key)
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if value is None or (isinstance(value, str) and not value.strip()):
        return default
    if isinstance(value, bool):
        return value
    text = value.strip().lower() if isinstance(value, str) else None
    if text in ("true", "false"):
        return text == "true"
    raise GrafanaInputError(f"payload.{key} must be true or false, got {names.echo(value)}")


def flag(payload: dict[str, Any], key: str) -> bool:
    value = payload.get(key)
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in {"true", "1", "yes", "on"} if value is not None else False


def target_series(ctx: QueryContext, payload: dict[str, Any]) -> list[str]:
    """Series a target covers: its payload's, else those the ad-hoc filters select, else every
    series; less those the filters exclude. A variable's "All" is every series.

    A name that does not exist is a 404 (NotFoundError) naming it, so a typo is never a blank
    panel; a valid series without data answers an empty result.
    """
    given = text_list(payload, "series")
    chosen = ctx.series_filter
    if given:
        names = chosen.kept(given)
    elif chosen.selects:
        names = chosen.selected(_every_series(ctx) if chosen.patterns else ())
    else:
        names = chosen.kept(_every_series(ctx))
    if len(names) > MAX_SERIES_PER_TARGET:
        raise GrafanaInputError(
            f"this target covers {len(names)} series; one target may cover at most "
            f"{MAX_SERIES_PER_TARGET}: choose series in the payload or with an ad-hoc filter"
        )
    if given or chosen.equal:
        for name in names:
            repository.get_series(ctx.session, name=name)
    return names


def _every_series(ctx: QueryContext) -> list[str]:
    return [s.name for s in repository.list_series(ctx.session)]


def epoch_ms(stamp: Any) -> int:
    return int(pd.Timestamp(stamp).value // 1_000_000)


def clean(value: Any) -> float | None:
    if value is None:
        return None
    number_ = float(value)
    return number_ if math.isfinite(number_) else None


def timeseries(name: str, frame: pd.DataFrame, time_col: str, value_col: str) -> dict[str, Any]:
    """``{"target", "datapoints": [[value, epoch_ms], …]}`` sorted by time; NaN → null."""
    ordered = frame.sort_values(time_col)
    return {
        "target": name,
        "datapoints": [
            [clean(v), epoch_ms(t)]
            for t, v in zip(ordered[time_col], ordered[value_col], strict=True)
        ],
    }


def in_range(frame: pd.DataFrame, column: str, ctx: QueryContext) -> pd.DataFrame:
    start, end = pd.Timestamp(ctx.start), pd.Timestamp(ctx.end)
    return frame[(frame[column] >= start) & (frame[column] <= end)]


def table(columns: Sequence[tuple[str, str]], rows: list[list[Any]]) -> dict[str, Any]:
    return {
        "type": "table",
        "columns": [{"text": text, "type": kind} for text, kind in columns],
        "rows": rows,
    }
