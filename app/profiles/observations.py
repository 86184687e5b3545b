"""A GPU profile's observations: production hours of the fleet it serves, posted by the user
(``POST /v1/gpu-profiles/{name}/observations``, ``gpucast profile observe``).

One row per profile and hour: ``replicas`` serving replicas; ``requests``, ``prompt_tokens``
and ``completion_tokens`` the totals of the hour across them; ``ttft_p95_s`` and
``tpot_p95_s`` the p95 latencies as served. A list is checked whole before anything is written
(:func:`validated_rows`: every error names the row and the field), then upserted: an hour posted
again replaces the stored one.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import Select, select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from app.common.numbers import bounded_number
from app.common.timebounds import parse_datetime
from app.db.models import GpuProfile, ProfileObservation
from app.errors import InputError
from capacity import MAX_PLAUSIBLE_TPOT_S, MAX_PLAUSIBLE_TTFT_S, MIN_LATENCY_S

FIELDS = (
    "hour",
    "replicas",
    "requests",
    "prompt_tokens",
    "completion_tokens",
    "ttft_p95_s",
    "tpot_p95_s",
)
EXPECTED = ("expected_ttft_p95_s", "expected_tpot_p95_s")
MAX_ROWS_PER_REQUEST = 10_000
MAX_REPLICAS = 100_000
# an hour is posted once it has ended; clocks of the sender and gpucast may differ this much
CLOCK_SKEW = timedelta(minutes=5)
# a p95 beyond the load-test rules' limits is milliseconds given as seconds
MAX_TTFT_P95_S = MAX_PLAUSIBLE_TTFT_S
MAX_TPOT_P95_S = MAX_PLAUSIBLE_TPOT_S
MAX_TOKENS_PER_REQUEST = 10_000_000
OBSERVATIONS_URL = "/v1/gpu-profiles/{name}/observations"


class HourObserved(NamedTuple):
    """One checked production hour (``hour`` aware UTC, on the hour)."""

    hour: datetime
    replicas: int
    requests: float
    prompt_tokens: float
    completion_tokens: float
    ttft_p95_s: float
    tpot_p95_s: float

    def as_dict(self) -> dict[str, Any]:
        return self._asdict()


def validated_rows(
    rows: Any, *, now: datetime | None = None, text_values: bool = False
) -> list[HourObserved]:
    """Every row of ``rows`` (a list of objects with :data:`FIELDS`) checked, or an
    :class:`InputError` naming the first bad row (1-based) and field. ``text_values``: numbers
    may be given as text (a CSV file's cells); JSON must give numbers."""
    if not isinstance(rows, list):
        raise InputError("observations must be a JSON list of objects, one per hour")
    if not rows:
        raise InputError("no observations given; send a list of at least one hour")
    if len(rows) > MAX_ROWS_PER_REQUEST:
        raise InputError(
            f"{len(rows):,} observations in one request; the limit is "
            f"{MAX_ROWS_PER_REQUEST:,} (about a year of hours): split the list"
        )
    latest = (now or datetime.now(UTC)) + CLOCK_SKEW - timedelta(hours=1)
    checked: list[HourObserved] = []
    seen: dict[datetime, int] = {}
    for number, row in enumerate(rows, start=1):
        hour = _row(row, number, latest=latest, text_values=text_values)
        if hour.hour in seen:
            raise InputError(
                f"row {number}, field hour: {hour.hour.isoformat()} is also row "
                f"{seen[hour.hour]}; give each hour once"
            )
        seen[hour.hour] = number
        checked.append(hour)
    return checked


def _row(row: Any, number: int, *, latest: datetime, text_values: bool) -> HourObserved:
    where = f"row {number}"
    if not isinstance(row, dict):
        raise InputError(f"{where}: an object with fields {', '.join(FIELDS)} is needed")
    unknown = sorted(set(row) - set(FIELDS))
    if unknown:
        raise InputError(
            f"{where}, field {str(unknown[0])[:60]!r}: unknown; the fields are " + ", ".join(FIELDS)
        )
    missing = [name for name in FIELDS if row.get(name) is None or row.get(name) == ""]
    if missing:
        raise InputError(f"{where}, field {missing[0]}: missing")
    hour = _hour(row["hour"], where, latest=latest)

    def value(name: str, *, low: float = 0.0, high: float = 1e15, whole: bool = False) -> Any:
        given = row[name]
        if isinstance(given, str) and not text_values:
            raise InputError(f"{where}, field {name}: must be a number, got text {given[:40]!r}")
        return bounded_number(given, what=f"{where}, field {name}", low=low, high=high, whole=whole)

    replicas = int(value("replicas", low=1, high=MAX_REPLICAS, whole=True))
    requests = float(value("requests"))
    prompt = float(value("prompt_tokens"))
    completion = float(value("completion_tokens"))
    ttft = float(value("ttft_p95_s", high=MAX_TTFT_P95_S))
    tpot = float(value("tpot_p95_s", high=MAX_TPOT_P95_S))
    _check_tokens(where, requests, prompt, completion)
    for name, latency in (("ttft_p95_s", ttft), ("tpot_p95_s", tpot)):
        if not latency > 0:
            raise InputError(f"{where}, field {name}: a p95 latency must be > 0 s, got {latency:g}")
        if latency < MIN_LATENCY_S:  # as a load test's rows: faster than any model step
            raise InputError(
                f"{where}, field {name}: {latency!r} s is below {MIN_LATENCY_S:g} s, faster than "
                "any model step on a GPU"
            )
    return HourObserved(hour, replicas, requests, prompt, completion, ttft, tpot)


def _hour(given: Any, where: str, *, latest: datetime) -> datetime:
    if not isinstance(given, str):
        raise InputError(f"{where}, field hour: an ISO 8601 date-time text is needed")
    hour = parse_datetime(given, what=f"{where}, field hour:")
    if (hour.minute, hour.second, hour.microsecond) != (0, 0, 0):
        raise InputError(
            f"{where}, field hour: {hour.isoformat()} is not on the hour; give the hour's start "
            "(minutes and seconds zero)"
        )
    if hour > latest:
        raise InputError(
            f"{where}, field hour: {hour.isoformat()} has not ended yet; post an hour once it "
            "is over"
        )
    return hour


def _check_tokens(where: str, requests: float, prompt: float, completion: float) -> None:
    if requests == 0:
        for name, tokens in (("prompt_tokens", prompt), ("completion_tokens", completion)):
            if tokens > 0:
                raise InputError(
                    f"{where}, field {name}: {tokens:g} tokens in an hour of 0 requests"
                )
        return
    for name, tokens in (("prompt_tokens", prompt), ("completion_tokens", completion)):
        if tokens < requests:
            raise InputError(
                f"{where}, field {name}: {tokens:g} tokens for {requests:g} requests; every "
                "request has at least one (are these per-request means, not totals?)"
            )
        if tokens > MAX_TOKENS_PER_REQUEST * requests:
            raise InputError(
                f"{where}, field {name}: {tokens / requests:,.0f} tokens per request is "
                f"beyond {MAX_TOKENS_PER_REQUEST:,}"
            )
    if not math.isfinite(prompt + completion):
        raise InputError(f"{where}: token totals are not finite")


def store_observations(
    session: Session,
    *,
    profile: GpuProfile,
    hours: list[HourObserved],
    expected: list[tuple[float, float] | None] | None = None,
) -> int:
    """Upsert checked hours of the profile (an hour stored before is replaced); the count.
    ``expected``: per hour, the load-test model's (p95 TTFT, p95 TPOT) at its load and mix."""
    now = datetime.now(UTC)
    values = []
    for hour, lab in zip(hours, expected or [None] * len(hours), strict=True):
        ttft, tpot = lab if lab is not None else (None, None)
        values.append(
            hour.as_dict()
            | {"gpu_profile_id": profile.id, "created_at": now}
            | {"expected_ttft_p95_s": ttft, "expected_tpot_p95_s": tpot}
        )
    values.sort(key=lambda row: row["hour"])
    dialect = session.get_bind().dialect.name
    insert = postgresql_insert if dialect == "postgresql" else sqlite_insert
    statement = insert(ProfileObservation)
    replaced = {name: statement.excluded[name] for name in (*FIELDS[1:], *EXPECTED, "created_at")}
    statement = statement.on_conflict_do_update(
        index_elements=["gpu_profile_id", "hour"], set_=replaced
    )
    session.execute(statement, values)
    session.flush()
    return len(values)


def stored_observations(
    session: Session,
    *,
    profile_id: int,
    start: datetime | None = None,
    end: datetime | None = None,
    limit: int | None = None,
) -> list[HourObserved]:
    """The profile's hours in [start, end), oldest first."""
    rows = session.scalars(_hours(profile_id, start, end, limit))
    return [HourObserved(*(getattr(row, name) for name in FIELDS)) for row in rows]


def stored_rows(
    session: Session, *, profile_id: int, start: datetime | None, end: datetime | None, limit: int
) -> list[dict[str, Any]]:
    """The profile's hours in [start, end), oldest first, with the model's expected p95s."""
    rows = session.scalars(_hours(profile_id, start, end, limit))
    return [{name: getattr(row, name) for name in (*FIELDS, *EXPECTED)} for row in rows]


def _hours(
    profile_id: int, start: datetime | None, end: datetime | None, limit: int | None
) -> Select[tuple[ProfileObservation]]:
    query = select(ProfileObservation).where(ProfileObservation.gpu_profile_id == profile_id)
    if start is not None:
        query = query.where(ProfileObservation.hour >= start)
    if end is not None:
        query = query.where(ProfileObservation.hour < end)
    return query.order_by(ProfileObservation.hour).limit(limit)
