"""Strict reading of a Prometheus ``query_range`` answer: anything but a well-formed matrix of
whole-hour samples inside the asked range is a :class:`PrometheusQueryError` naming what is
wrong, never a traceback and never a stored row.

The shape (https://prometheus.io/docs/prometheus/latest/querying/api/)::

    {"status": "success", "warnings": ["…"],
     "data": {"resultType": "matrix",
              "result": [{"metric": {"label": "value"}, "values": [[1759276800, "42"], …]}]}}

Timestamps are Unix seconds (JSON numbers), values are strings (``"NaN"``, ``"+Inf"`` too).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from app.common.urls import scrub
from app.errors import AppError, InputError
from app.ingest.limits import LIMIT_TEXT, too_large

__all__ = [
    "Answer",
    "PrometheusQueryError",
    "PrometheusUnavailableError",
    "SeriesSamples",
    "read_answer",
]

STEP_S = 3600


class PrometheusQueryError(InputError):
    """The query was rejected or its result cannot be stored; nothing was written."""


class PrometheusUnavailableError(AppError):
    """Prometheus could not be reached or failed on its side."""

    status_code = 503


@dataclass
class SeriesSamples:
    """One series of the answer: sample times (Unix seconds, whole hours) and values."""

    stamps: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)


@dataclass
class Answer:
    """A validated answer: samples per series (keyed by labels) and Prometheus' warnings."""

    series: dict[str, SeriesSamples]
    warnings: list[str]


def read_answer(
    status: int, body: bytes, *, url: str, endpoint: str, first: int, last: int
) -> Answer:
    """Validate one HTTP answer to ``query_range`` from ``first`` to ``last`` (Unix seconds).

    ``url`` is what the user gave (scrubbed from messages), ``endpoint`` what was requested.
    """
    document = _document(status, body, url=url, endpoint=endpoint)
    warnings = document.get("warnings", [])
    if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
        raise _malformed("'warnings' is not a list of strings")
    series: dict[str, SeriesSamples] = {}
    for position, item in enumerate(_result(document["data"])):
        key, samples = _series(item, position, first=first, last=last)
        if samples.stamps:
            series.setdefault(key, SeriesSamples()).stamps.extend(samples.stamps)
            series[key].values.extend(samples.values)
    return Answer(series=series, warnings=[w[:300] for w in warnings])


def _document(status: int, body: bytes, *, url: str, endpoint: str) -> dict[str, Any]:
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested beyond reason
        document = None
    if isinstance(document, dict) and document.get("status") == "error":
        kind = document.get("errorType") or "error"
        detail = str(document.get("error") or "no detail")[:500]
        message = f"Prometheus rejected the query ({str(kind)[:40]}): {detail}"
        if status >= 500:
            raise PrometheusUnavailableError(scrub(message, url))
        raise PrometheusQueryError(scrub(message, url))
    if status >= 500:
        raise PrometheusUnavailableError(scrub(f"Prometheus at {url} answered HTTP {status}", url))
    if status >= 400 or not isinstance(document, dict) or "data" not in document:
        raise PrometheusQueryError(
            scrub(
                f"{url} did not answer like a Prometheus API (HTTP {status} from {endpoint}); "
                "check --url",
                url,
            )
        )
    if document.get("status") != "success":
        raise _malformed(f"'status' is {str(document.get('status'))[:40]!r}, not 'success'")
    return document


def _result(data: Any) -> list[Any]:
    if not isinstance(data, dict) or data.get("resultType") != "matrix":
        kind = data.get("resultType") if isinstance(data, dict) else type(data).__name__
        raise PrometheusQueryError(
            f"expected a range vector (matrix) result, got {str(kind)[:40]!r}"
        )
    result = data.get("result")
    if not isinstance(result, list):
        raise _malformed(f"'result' is {type(result).__name__}, not a list of series")
    return result


def _series(item: Any, position: int, *, first: int, last: int) -> tuple[str, SeriesSamples]:
    which = f"series {position + 1} of the result"
    if not isinstance(item, dict):
        raise _malformed(f"{which} is {type(item).__name__}, not an object")
    metric = item.get("metric", {})
    if not isinstance(metric, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metric.items()
    ):
        raise _malformed(f"{which} has no 'metric' object of string labels")
    values = item.get("values")
    if not isinstance(values, list):
        hint = " (histogram samples are not supported)" if "histograms" in item else ""
        raise _malformed(f"{which} has no 'values' list{hint}")
    samples = SeriesSamples()
    for sample in values:
        stamp, value = _sample(sample, which)
        samples.stamps.append(stamp)
        samples.values.append(value)
    _check_stamps(np.array(samples.stamps, dtype="float64"), first=first, last=last)
    return _labels(metric), samples


def _sample(sample: Any, which: str) -> tuple[int, float]:
    if not isinstance(sample, list) or len(sample) != 2:
        raise _malformed(f"{which}: {_short(sample)} is not a [timestamp, value] pair")
    stamp, raw = sample
    if isinstance(stamp, bool) or not isinstance(stamp, int | float) or not math.isfinite(stamp):
        raise _malformed(f"{which}: timestamp {_short(stamp)} is not a number of seconds")
    if not isinstance(raw, str):
        raise _malformed(f"{which}: value {_short(raw)} at {stamp_text(stamp)} is not a string")
    try:
        value = float(raw)
    except ValueError as exc:
        raise PrometheusQueryError(
            f"value {raw[:40]!r} at {stamp_text(stamp)} is not a number"
        ) from exc
    if stamp != int(stamp):
        raise PrometheusQueryError(
            f"sample at {stamp_text(stamp)} is not on a whole second, let alone an hour"
        )
    return int(stamp), value


def _check_stamps(stamps: np.ndarray, *, first: int, last: int) -> None:
    problems = (
        (
            (stamps < first) | (stamps > last),
            f"is outside the range asked for ({stamp_text(first)} .. {stamp_text(last)})",
        ),
        (stamps % STEP_S != 0, "is not on the hour; gpucast stores whole hours only"),
    )
    for mask, what in problems:
        if mask.any():
            pos = int(np.flatnonzero(mask)[0])
            raise PrometheusQueryError(
                f"sample at {stamp_text(stamps[pos])} {what}; {int(mask.sum())} such samples "
                "in the result, nothing was stored"
            )


def check_samples(samples: SeriesSamples) -> tuple[np.ndarray, np.ndarray]:
    """The stamps (int64 seconds, sorted) and values of one series, every one storable."""
    stamps = np.array(samples.stamps, dtype="int64")
    values = np.array(samples.values, dtype="float64")
    unique, counts = np.unique(stamps, return_counts=True)
    if (counts > 1).any():
        twice = unique[counts > 1]
        raise PrometheusQueryError(
            f"the result has {len(twice)} timestamps more than once (first: "
            f"{stamp_text(twice[0])}); each hour must come once"
        )
    with np.errstate(invalid="ignore"):
        problems = (
            (~np.isfinite(values), "is not a finite number"),
            (values < 0, "is negative; counts must be >= 0 (use increase(), not a raw delta)"),
            (too_large(values), LIMIT_TEXT),
        )
    for mask, what in problems:
        if mask.any():
            pos = int(np.flatnonzero(mask)[0])
            raise PrometheusQueryError(
                f"sample at {stamp_text(stamps[pos])} {values[pos]:g} {what}; "
                f"{int(mask.sum())} such samples in the result"
            )
    order = np.argsort(stamps, kind="stable")
    return stamps[order], values[order]


def _labels(metric: dict[str, str]) -> str:
    name = metric.get("__name__", "")
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(metric.items()) if k != "__name__")
    return f"{name}{{{inner}}}"


def stamp_text(ts: float) -> str:
    """Unix seconds as ISO 8601 UTC, or as the number when no date can show it."""
    try:
        return datetime.fromtimestamp(float(ts), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return f"{float(ts):g}"


def _short(value: Any) -> str:
    text = json.dumps(value) if isinstance(value, list | dict | str | None) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _malformed(what: str) -> PrometheusQueryError:
    return PrometheusQueryError(f"malformed Prometheus answer: {what}")
