"""Import hourly load from Prometheus ``/api/v1/query_range`` at a 1 h step.

The PromQL must yield the per-hour quantity of one metric as a single series, for example
``sum(increase(vllm:request_success_total[1h]))``. Prometheus evaluates such a query at time
``t`` over ``(t - 1h, t]``, so by default the sample at ``t`` is stored as the hour that starts
at ``t - 1h`` (``shift=True``).

Errors::

    AppError
    ├── PrometheusQueryError (InputError)   bad query or unusable result  -> CLI exit 2
    └── PrometheusUnavailableError          unreachable, timeout, 5xx     -> CLI exit 3

:func:`fetch_hourly` does the HTTP work (outside any database transaction), each exchange
under a total deadline; :mod:`app.ingest.prometheus_response` validates every answer strictly
(a matrix of one series, whole-hour samples inside the asked range, each hour once, finite
values below the ingest bound). :func:`merge_metric` turns the values into a canonical hourly
frame inside the caller's transaction, keeping the other columns of hours already stored.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np
import pandas as pd
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.common import timebounds
from app.common.names import validate_series_name
from app.common.urls import redact_url, scrub
from app.common.words import count
from app.db.models import Observation
from app.errors import InputError
from app.ingest.columns import CANONICAL
from app.ingest.prometheus_response import (
    Answer,
    PrometheusQueryError,
    PrometheusUnavailableError,
    SeriesSamples,
    check_samples,
    read_answer,
)
from app.ingest.writer import VALUE_COLUMNS, resolve_series_ids

__all__ = [
    "METRICS",
    "PrometheusQueryError",
    "PrometheusUnavailableError",
    "RangeQuery",
    "fetch_hourly",
    "fetch_samples",
    "merge_metric",
    "parse_time",
]

METRICS = ("requests", "prompt_tokens", "completion_tokens")
STEP_S = 3600
# Prometheus refuses a query_range of more than 11,000 points; stay well under it.
MAX_POINTS_PER_QUERY = 10_000
MAX_TIMEOUT_S = 3600.0
# 10,000 samples of one series are ~300 KB; far more is not an hourly series of one metric.
MAX_ANSWER_BYTES = 64 * 2**20
_RELATIVE = re.compile(r"^(\d+)([hdw])$")
_UNIT_HOURS = {"h": 1, "d": 24, "w": 168}


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
    out_of_range = InputError(
        f"{text.strip()[:60]!r} is outside the supported range: {timebounds.RANGE_TEXT}"
    )
    if text.strip() == "now":
        moment = current
    elif relative:
        try:
            moment = current - timedelta(hours=int(relative[1]) * _UNIT_HOURS[relative[2]])
        except OverflowError as exc:
            raise out_of_range from exc
    else:
        try:
            moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        except ValueError as exc:
            raise InputError(
                f"{text!r} is not a time: use ISO 8601 (2026-11-01T00:00Z), 'now' or 30d/12h/2w"
            ) from exc
    if not timebounds.in_range(moment):
        raise out_of_range
    moment = timebounds.check_datetime(moment, what="time")
    return moment.replace(minute=0, second=0, microsecond=0)


def fetch_hourly(
    query: RangeQuery,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    auth: httpx.Auth | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[pd.Series, list[str]]:
    """Values per UTC hour (float Series indexed by hour start) and notes (warnings).

    Long ranges are split into queries of at most ``MAX_POINTS_PER_QUERY`` points. Each HTTP
    exchange, from connecting to the last byte of the answer, must finish within
    ``query.timeout_s``: a total deadline, which a server dripping its answer cannot stretch.
    ``transport`` is the I/O seam: tests pass an ``httpx.MockTransport``.
    """
    series, notes = fetch_samples(query, transport=transport, auth=auth, headers=headers)
    return _single_series(series, query, STEP_S if query.shift else 0), notes


def fetch_samples(
    query: RangeQuery,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    auth: httpx.Auth | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[dict[str, SeriesSamples], list[str]]:
    """Every series of the answer as given (NaN values and missing hours included; stamps are
    evaluation times, not shifted) and the notes, fetched as :func:`fetch_hourly` does."""
    _validate(query)
    endpoint = query.url.rstrip("/") + "/api/v1/query_range"
    offset = STEP_S if query.shift else 0
    first = int(query.start.timestamp()) + offset
    last = int(query.end.timestamp()) - STEP_S + offset
    chunks = [
        (chunk_start, min(last, chunk_start + (MAX_POINTS_PER_QUERY - 1) * STEP_S))
        for chunk_start in range(first, last + 1, MAX_POINTS_PER_QUERY * STEP_S)
    ]
    client = httpx.AsyncClient(
        timeout=query.timeout_s, transport=transport, auth=auth, headers=headers
    )
    answers = _run(_fetch_chunks(client, endpoint, query, chunks))
    series: dict[str, SeriesSamples] = {}
    notes: list[str] = []
    for answer in answers:
        notes.extend(f"Prometheus: {w}" for w in answer.warnings)
        for key, samples in answer.series.items():
            series.setdefault(key, SeriesSamples()).stamps.extend(samples.stamps)
            series[key].values.extend(samples.values)
    return series, list(dict.fromkeys(notes))


def _validate(query: RangeQuery) -> None:
    if query.end <= query.start:
        raise InputError(f"--end {query.end:%Y-%m-%dT%H:%MZ} must be after --start")
    for moment in (query.start, query.end):
        timebounds.check_datetime(moment, what="the import range bound")
    if not query.url.startswith(("http://", "https://")):
        raise InputError(f"--url {redact_url(query.url)!r} must start with http:// or https://")
    if not 0 < query.timeout_s <= MAX_TIMEOUT_S:  # also false for NaN
        raise InputError(f"--timeout must be in (0, {MAX_TIMEOUT_S:g}] seconds")


def _run(coroutine: Coroutine[Any, Any, list[Answer]]) -> list[Answer]:
    """Run the exchange on its own event loop (in a worker thread if this one has a loop)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


async def _fetch_chunks(
    client: httpx.AsyncClient, endpoint: str, query: RangeQuery, chunks: list[tuple[int, int]]
) -> list[Answer]:
    async with client:
        return [await _get(client, endpoint, query, start, end) for start, end in chunks]


async def _get(
    http: httpx.AsyncClient, endpoint: str, query: RangeQuery, start: int, end: int
) -> Answer:
    params = {"query": query.query, "start": start, "end": end, "step": STEP_S}
    try:
        async with asyncio.timeout(query.timeout_s):
            status, body = await _exchange(http, endpoint, params)
    except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
        raise InputError(
            scrub(f"--url {query.url!r} is not a usable URL: {exc}", query.url)
        ) from exc
    except (TimeoutError, httpx.TimeoutException) as exc:
        raise PrometheusUnavailableError(
            f"Prometheus at {redact_url(query.url)} did not answer within {query.timeout_s:g} s "
            "(raise --timeout or shorten the range)"
        ) from exc
    except httpx.HTTPError as exc:
        raise PrometheusUnavailableError(
            scrub(f"cannot reach Prometheus at {query.url}: {exc or type(exc).__name__}", query.url)
        ) from exc
    shown = str(httpx.URL(endpoint).copy_with(username=None, password=None))
    return read_answer(status, body, url=query.url, endpoint=shown, first=start, last=end)


async def _exchange(
    http: httpx.AsyncClient, endpoint: str, params: dict[str, Any]
) -> tuple[int, bytes]:
    """Status and body, read in pieces so an answer too large is refused before it is held."""
    async with http.stream("GET", endpoint, params=params) as response:
        body = bytearray()
        async for piece in response.aiter_bytes():
            body += piece
            if len(body) > MAX_ANSWER_BYTES:
                raise PrometheusQueryError(
                    f"Prometheus' answer is larger than {MAX_ANSWER_BYTES // 2**20} MiB; "
                    "shorten the range or narrow the query"
                )
        return response.status_code, bytes(body)


def _single_series(series: dict[str, SeriesSamples], query: RangeQuery, offset: int) -> pd.Series:
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
    stamps, values = check_samples(next(iter(series.values())))
    hours = pd.to_datetime(stamps - offset, unit="s", utc=True)
    return pd.Series(values, index=hours, name="value")


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
            f"{int(missing.sum())} of {count(len(frame), 'hour')} of series {series!r} have no "
            "requests "
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
