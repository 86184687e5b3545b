"""Import hourly load from Prometheus ``/api/v1/query_range`` at a 1 h step.

The PromQL must yield the per-hour quantity of one metric as a single series, for example
``sum(increase(vllm:request_success_total[1h]))``. Prometheus evaluates such a query at time
``t`` over ``(t - 1h, t]``, so by default the sample at ``t`` is stored as the hour that starts
at ``t - 1h`` (``shift=True``).

Errors::

    AppError
    ├── PrometheusQueryError (InputError)   bad query or unusable result  -> CLI exit 2
    └── PrometheusUnavailableError          unreachable, timeout, 5xx     -> CLI exit 3

:func:`fetch_hourly` does the HTTP work (outside any database transaction);
:func:`merge_metric` turns its values into a canonical hourly frame inside the caller's
transaction, keeping the other columns of hours already stored.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np
import pandas as pd
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import Observation
from app.errors import AppError, InputError
from app.ingest.columns import CANONICAL
from app.ingest.writer import VALUE_COLUMNS, resolve_series_ids
from app.names import validate_series_name
from app.urls import redact_url, scrub

__all__ = [
    "METRICS",
    "PrometheusQueryError",
    "PrometheusUnavailableError",
    "RangeQuery",
    "fetch_hourly",
    "merge_metric",
    "parse_time",
]

METRICS = ("requests", "prompt_tokens", "completion_tokens")
STEP_S = 3600
# Prometheus refuses a query_range of more than 11,000 points; stay well under it.
MAX_POINTS_PER_QUERY = 10_000
_RELATIVE = re.compile(r"^(\d+)([hdw])$")
_UNIT_HOURS = {"h": 1, "d": 24, "w": 168}


class PrometheusQueryError(InputError):
    """The query was rejected or its result cannot be stored; nothing was written."""


class PrometheusUnavailableError(AppError):
    """Prometheus could not be reached or failed on its side."""

    status_code = 503


@dataclass(frozen=True)
class RangeQuery:
    """Hours ``[start, end)`` (UTC, on the hour) of one PromQL expression."""

    url: str
    query: str
    start: datetime
    end: datetime
    shift: bool = True
    timeout_s: float = 30.0


def parse_time(text: str, *, now: datetime | None = None) -> datetime:
    """ISO 8601 (naive is UTC), ``now`` or ``30d``/``12h``/``2w`` ago; floored to the hour."""
    current = (now or datetime.now(UTC)).astimezone(UTC)
    relative = _RELATIVE.match(text.strip())
    if text.strip() == "now":
        moment = current
    elif relative:
        moment = current - timedelta(hours=int(relative[1]) * _UNIT_HOURS[relative[2]])
    else:
        try:
            moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        except ValueError as exc:
            raise InputError(
                f"{text!r} is not a time: use ISO 8601 (2026-11-01T00:00Z), 'now' or 30d/12h/2w"
            ) from exc
        moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return moment.replace(minute=0, second=0, microsecond=0)


def fetch_hourly(
    query: RangeQuery, *, client: httpx.Client | None = None
) -> tuple[pd.Series, list[str]]:
    """Values per UTC hour (float Series indexed by hour start) and notes (warnings).

    Long ranges are split into queries of at most ``MAX_POINTS_PER_QUERY`` points. ``client``
    is the I/O seam: tests pass one built on ``httpx.MockTransport``.
    """
    if query.end <= query.start:
        raise InputError(f"--end {query.end:%Y-%m-%dT%H:%MZ} must be after --start")
    if not query.url.startswith(("http://", "https://")):
        raise InputError(f"--url {redact_url(query.url)!r} must start with http:// or https://")
    endpoint = query.url.rstrip("/") + "/api/v1/query_range"
    offset = STEP_S if query.shift else 0
    first = int(query.start.timestamp()) + offset
    last = int(query.end.timestamp()) - STEP_S + offset
    owned = client is None
    http = client or httpx.Client(timeout=query.timeout_s)
    series: dict[str, list[list[Any]]] = {}
    notes: list[str] = []
    try:
        for chunk_start in range(first, last + 1, MAX_POINTS_PER_QUERY * STEP_S):
            chunk_end = min(last, chunk_start + (MAX_POINTS_PER_QUERY - 1) * STEP_S)
            data = _get(http, endpoint, query, chunk_start, chunk_end)
            notes.extend(f"Prometheus: {w}" for w in data.get("warnings") or [])
            for item in _matrix(data):
                key = _labels(item.get("metric") or {})
                series.setdefault(key, []).extend(item.get("values") or [])
    finally:
        if owned:
            http.close()
    return _single_series(series, query, offset), list(dict.fromkeys(notes))


def _get(
    http: httpx.Client, endpoint: str, query: RangeQuery, start: int, end: int
) -> dict[str, Any]:
    params = {"query": query.query, "start": start, "end": end, "step": STEP_S}
    try:
        response = http.get(endpoint, params=params, timeout=query.timeout_s)
    except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
        raise InputError(
            scrub(f"--url {query.url!r} is not a usable URL: {exc}", query.url)
        ) from exc
    except httpx.TimeoutException as exc:
        raise PrometheusUnavailableError(
            f"Prometheus at {redact_url(query.url)} did not answer within {query.timeout_s:g} s "
            "(raise --timeout or shorten the range)"
        ) from exc
    except httpx.HTTPError as exc:
        raise PrometheusUnavailableError(
            scrub(f"cannot reach Prometheus at {query.url}: {exc or type(exc).__name__}", query.url)
        ) from exc
    return _payload(response, query.url)


def _payload(response: httpx.Response, url: str) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("status") == "error":
        kind = body.get("errorType") or "error"
        message = f"Prometheus rejected the query ({kind}): {body.get('error') or 'no detail'}"
        if response.status_code >= 500:
            raise PrometheusUnavailableError(message)
        raise PrometheusQueryError(message)
    if response.status_code >= 500:
        raise PrometheusUnavailableError(
            f"Prometheus at {redact_url(url)} answered HTTP {response.status_code}"
        )
    if response.status_code >= 400 or not isinstance(body, dict) or "data" not in body:
        endpoint = str(response.request.url.copy_with(query=None, username=None, password=None))
        raise PrometheusQueryError(
            scrub(
                f"{url} did not answer like a Prometheus API (HTTP {response.status_code} from "
                f"{endpoint}); check --url",
                url,
            )
        )
    return body["data"]


def _matrix(data: Any) -> list[dict[str, Any]]:
    if not isinstance(data, dict) or data.get("resultType") != "matrix":
        kind = data.get("resultType") if isinstance(data, dict) else type(data).__name__
        raise PrometheusQueryError(f"expected a range vector (matrix) result, got {kind!r}")
    return list(data.get("result") or [])


def _labels(metric: dict[str, str]) -> str:
    name = metric.get("__name__", "")
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(metric.items()) if k != "__name__")
    return f"{name}{{{inner}}}"


def _single_series(series: dict[str, list[list[Any]]], query: RangeQuery, offset: int) -> pd.Series:
    if not series:
        raise PrometheusQueryError(
            f"the query returned no data for {query.start:%Y-%m-%dT%H:%MZ} .. "
            f"{query.end:%Y-%m-%dT%H:%MZ}; check it in the Prometheus UI (metric name, labels, "
            "time range)"
        )
    if len(series) > 1:
        shown = ", ".join(sorted(series)[:3])
        raise PrometheusQueryError(
            f"the query returned {len(series)} series ({shown}{', …' if len(series) > 3 else ''}); "
            "gpucast imports exactly one: aggregate it, e.g. sum(increase(metric[1h])) or "
            "sum by () (...), or narrow it with label matchers"
        )
    samples = next(iter(series.values()))
    stamps = np.array([float(ts) for ts, _ in samples])
    values = np.array([_number(raw, ts) for ts, raw in samples])
    _check(values, stamps)
    hours = pd.to_datetime(np.round(stamps).astype("int64") - offset, unit="s", utc=True)
    result = pd.Series(values, index=hours, name="value")
    return result[~result.index.duplicated(keep="last")].sort_index()


def _number(raw: Any, ts: float) -> float:
    try:
        return float(raw)
    except (TypeError, ValueError) as exc:
        raise PrometheusQueryError(f"value {raw!r} at {_stamp(ts)} is not a number") from exc


def _check(values: np.ndarray, stamps: np.ndarray) -> None:
    for mask, what in (
        (~np.isfinite(values), "is not a finite number"),
        (values < 0, "is negative; counts must be >= 0 (use increase(), not a raw delta)"),
    ):
        if mask.any():
            pos = int(np.flatnonzero(mask)[0])
            raise PrometheusQueryError(
                f"sample at {_stamp(stamps[pos])} {values[pos]:g} {what}; "
                f"{int(mask.sum())} such samples in the result"
            )


def _stamp(ts: float) -> str:
    if not math.isfinite(float(ts)):
        return repr(ts)
    return datetime.fromtimestamp(float(ts), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def merge_metric(
    session: Session, *, series: str, metric: str, values: pd.Series
) -> tuple[pd.DataFrame, list[str]]:
    """Canonical frame for ``values`` of ``metric``, merged with the stored hours.

    Other columns of stored hours keep their values and ``total_tokens`` is recomputed as
    prompt + completion, so importing tokens never wipes requests (and the reverse). Hours
    need ``requests``: token values for hours that have none are rejected. Runs inside the
    caller's transaction; the series row is locked until it ends.
    """
    if metric not in METRICS:
        raise InputError(f"unknown metric {metric!r}; choose one of {', '.join(METRICS)}")
    validate_series_name(series)
    series_id = resolve_series_ids(session, [series], create=True)[series]
    frame = _stored(session, series_id, values.index).reindex(values.index)
    frame[metric] = values.to_numpy(dtype="float64")
    missing = frame["requests"].isna().to_numpy()
    if missing.any():
        first = values.index[int(np.flatnonzero(missing)[0])]
        raise PrometheusQueryError(
            f"{int(missing.sum())} of {len(frame)} hours of series {series!r} have no requests "
            f"(first: {first:%Y-%m-%dT%H:%MZ}); import --metric requests for them first"
        )
    tokens = frame.loc[:, ["prompt_tokens", "completion_tokens"]]
    has_tokens = tokens.notna().any(axis=1)
    frame.loc[has_tokens, "total_tokens"] = tokens[has_tokens].sum(axis=1)
    frame = frame.rename_axis("hour").reset_index().assign(series=series)
    kept = [c for c in VALUE_COLUMNS if c != metric and frame[c].notna().any()]
    notes = [f"kept stored {', '.join(kept)} of the imported hours"] if kept else []
    return frame.loc[:, list(CANONICAL)], notes


def _stored(session: Session, series_id: int, hours: pd.DatetimeIndex) -> pd.DataFrame:
    columns = [getattr(Observation, c) for c in VALUE_COLUMNS]
    rows = session.execute(
        select(Observation.hour, *columns).where(
            Observation.series_id == series_id,
            Observation.hour >= hours.min().to_pydatetime(),
            Observation.hour <= hours.max().to_pydatetime(),
        )
    ).all()
    frame = pd.DataFrame(rows, columns=["hour", *VALUE_COLUMNS])
    frame["hour"] = pd.to_datetime(frame["hour"], utc=True)
    return frame.set_index("hour").astype("float64")
