"""Import the closed hours of every deployment's serving source into its profile's production
hours (what ``POST /v1/gpu-profiles/{name}/observations`` stores).

Per deployed series with a serving source: the hours of the last ``lookback_hours`` before the
last complete hour that its profile has not stored yet are measured with the source's PromQL
(:meth:`ServingSpec.queries`, outside any transaction), each hour checked by the same rules as
a posted one, and the good hours stored in one transaction — an hour stored is never imported
again. An hour without traffic, without a p95 (NaN: no request finished in it) or without
replicas is skipped and counted, never stored; one that breaks a rule is skipped with the rule.
A source that fails (unreachable, rejected query, several series where one is needed) stores
nothing, is recorded with its error (credentials redacted) and is retried by the next cycle;
it never stops the others.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import httpx
from sqlalchemy import select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from app.common.urls import scrub
from app.common.words import count
from app.db import Database, repository
from app.db.models import ProfileObservation
from app.db.serving_models import ServingSource
from app.errors import AppError, InputError
from app.ingest.prometheus import RangeQuery, fetch_samples
from app.profiles.deployments import find_deployment
from app.profiles.observations import HourObserved, store_observations, validated_rows
from app.profiles.slo_capacity import lab_expectations
from app.sources.importer import SourceError, last_complete_hour_end
from app.sources.serving_spec import ServingSpec
from app.sources.serving_store import list_serving_sources, record_attempt, serving_spec_of
from app.sources.spec import plain_url

logger = logging.getLogger(__name__)

HOUR = timedelta(hours=1)
Measured = dict[str, dict[datetime, float]]


@dataclass
class ServingOutcome:
    """What one deployment's serving import did: ``imported``, ``up to date`` or ``failed``;
    ``rows`` hours stored, ``skipped`` hours left out (``notes`` say why)."""

    series: str
    status: str
    profile: str | None = None
    rows: int = 0
    skipped: int = 0
    error: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    def line(self) -> str:
        where = f"serving {self.series}" + (f" -> {self.profile}" if self.profile else "")
        if self.failed:
            return f"{where}: FAILED: {self.error}"
        if self.status == "up to date":
            return f"{where}: up to date (every closed hour is stored)"
        notes = "".join(f"; {note}" for note in self.notes)
        return f"{where}: {count(self.rows, 'production hour')} stored{notes}"


def import_serving_sources(
    database: Database, *, now: datetime | None = None
) -> list[ServingOutcome]:
    """Import every serving source, one outcome each by series name. A database that cannot be
    reached raises; anything a source does wrong is caught, recorded and reported."""
    end = last_complete_hour_end(now)
    with database.read_transaction() as session:
        sources = [
            (name, source.series_id, serving_spec_of(source))
            for name, source in list_serving_sources(session)
        ]
    return [
        import_serving_source(database, name, sid, spec, end=end) for name, sid, spec in sources
    ]


def import_serving_source(
    database: Database, name: str, series_id: int, spec: ServingSpec, *, end: datetime
) -> ServingOutcome:
    """Import the closed hours before ``end`` that the deployment's profile has not stored."""
    attempted = datetime.now(UTC)
    profile_name: str | None = None
    try:
        with database.read_transaction() as session:
            deployment = find_deployment(session, series_name=name)
            if deployment is None:
                raise SourceError(f"series {name!r} is no longer deployed on a profile")
            profile_name = deployment.profile
            missing = _missing(session, profile_name, end=end, lookback=spec.lookback_hours)
            measured_up_to = _measured_up_to(session, series_id)
        if not missing:
            with database.transaction() as session:
                record_attempt(session, series_id=series_id, at=attempted, error=None)
            return ServingOutcome(name, "up to date", profile=profile_name)
        measured, notes = _measure(spec, start=missing[0], end=end)
        hours, skipped = _checked_hours(measured, missing, notes)
        # an hour skipped again (it stays missing) is counted in the total only once
        new = sum(measured_up_to is None or hour >= measured_up_to for hour in skipped)
        with database.read_transaction() as session:
            profile = repository.get_gpu_profile(session, name=profile_name)
            expected = lab_expectations(session, profile=profile, hours=hours) if hours else None
        with database.transaction() as session:
            written = _store(session, profile_name, hours, expected)
            record_attempt(session, series_id=series_id, at=attempted, error=None, skipped=new)
    except OperationalError:
        raise
    except Exception as exc:  # a failing source skips only its own deployment
        error = scrub(f"{exc}" or type(exc).__name__, spec.url, [spec.bearer_token or ""])
        logger.warning("serving source of series %r failed: %s", name, error)
        with database.transaction() as session:
            record_attempt(session, series_id=series_id, at=attempted, error=error)
        return ServingOutcome(name, "failed", profile=profile_name, error=error)
    return ServingOutcome(
        name, "imported", profile=profile_name, rows=written, skipped=len(skipped), notes=notes
    )


def _measured_up_to(session: Session, series_id: int) -> datetime | None:
    """The end of the window the last successful import measured (its hour, floored)."""
    source = session.get(ServingSource, series_id)
    last = source.last_success_at if source is not None else None
    if last is None:
        return None
    return last_complete_hour_end(last if last.tzinfo else last.replace(tzinfo=UTC))


def _missing(
    session: Session, profile_name: str, *, end: datetime, lookback: int
) -> list[datetime]:
    """The closed hours of the window the profile has not stored, oldest first."""
    profile = repository.get_gpu_profile(session, name=profile_name)
    start = end - lookback * HOUR
    stored = set(_stored_hours(session, profile.id, start=start, end=end))
    window = [start + i * HOUR for i in range(lookback)]
    return [hour for hour in window if hour not in stored]


def _stored_hours(
    session: Session, profile_id: int, *, start: datetime, end: datetime
) -> list[datetime]:
    hours = session.scalars(
        select(ProfileObservation.hour).where(
            ProfileObservation.gpu_profile_id == profile_id,
            ProfileObservation.hour >= start,
            ProfileObservation.hour < end,
        )
    ).all()
    return [hour if hour.tzinfo else hour.replace(tzinfo=UTC) for hour in hours]


def _measure(spec: ServingSpec, *, start: datetime, end: datetime) -> tuple[Measured, list[str]]:
    """Each field's value per hour start (NaN kept); credentials on the client, not the URL."""
    parsed = httpx.URL(spec.url)
    auth = httpx.BasicAuth(parsed.username, parsed.password) if parsed.userinfo else None
    headers = {"Authorization": f"Bearer {spec.bearer_token}"} if spec.bearer_token else None
    measured: Measured = {}
    notes: list[str] = []
    for name, promql in spec.queries():
        query = RangeQuery(
            url=plain_url(spec.url), query=promql, start=start, end=end, timeout_s=spec.timeout_s
        )
        try:
            series, warnings = fetch_samples(query, auth=auth, headers=headers)
        except AppError as exc:
            raise SourceError(f"{name} query: {exc}") from exc
        if len(series) > 1:
            raise SourceError(
                f"{name} query returned {len(series)} series ({', '.join(sorted(series)[:3])}); "
                "one is needed: narrow the selector or the replicas query"
            )
        samples = next(iter(series.values()), None)
        measured[name] = (
            {}
            if samples is None
            else {
                datetime.fromtimestamp(stamp - 3600, tz=UTC): value
                for stamp, value in zip(samples.stamps, samples.values, strict=True)
            }
        )
        notes += warnings
    if not measured["requests"]:
        notes.append("no requests data in the window (check the names and the selector)")
    return measured, list(dict.fromkeys(notes))


def _checked_hours(
    measured: Measured, hours: list[datetime], notes: list[str]
) -> tuple[list[HourObserved], list[datetime]]:
    """The hours that can be stored, each checked like a posted one, and those that cannot."""
    kept: list[HourObserved] = []
    skipped: list[datetime] = []
    reasons: dict[str, int] = {}
    for hour in hours:
        row = {name: values.get(hour, math.nan) for name, values in measured.items()}
        why = _unusable(row)
        if why is None:
            try:
                kept += validated_rows([_posted(hour, row)])
            except InputError as exc:
                why = str(exc).removeprefix("row 1, ")
        if why is not None:
            reasons[why] = reasons.get(why, 0) + 1
            skipped.append(hour)
    for why, hours_skipped in reasons.items():
        notes.append(f"{count(hours_skipped, 'hour')} skipped: {why}")
    return kept, skipped


def _unusable(row: dict[str, float]) -> str | None:
    if not row["requests"] > 0:  # NaN too
        return "no traffic"
    for name in ("ttft_p95_s", "tpot_p95_s"):
        if not math.isfinite(row[name]):
            return f"no {name} (the histogram has no finished request)"
    if not row["replicas"] >= 0.5:
        return "no replicas"
    for name in ("prompt_tokens", "completion_tokens"):
        if not math.isfinite(row[name]):
            return f"no {name}"
    return None


def _posted(hour: datetime, row: dict[str, float]) -> dict[str, object]:
    """The hour as ``POST …/observations`` takes it; replicas the hour's average, rounded."""
    return {
        "hour": hour.isoformat(),
        "replicas": math.floor(row["replicas"] + 0.5),
        **{name: row[name] for name in ("requests", "prompt_tokens", "completion_tokens")},
        **{name: row[name] for name in ("ttft_p95_s", "tpot_p95_s")},
    }


def _store(
    session: Session,
    profile_name: str,
    hours: list[HourObserved],
    expected: list[tuple[float, float] | None] | None,
) -> int:
    """Upsert the hours the profile still lacks (one may have been posted meanwhile)."""
    if not hours:
        return 0
    profile = repository.get_gpu_profile(session, name=profile_name)
    stored = set(_stored_hours(session, profile.id, start=hours[0].hour, end=hours[-1].hour + HOUR))
    pairs = [
        (hour, lab)
        for hour, lab in zip(hours, expected or [None] * len(hours), strict=True)
        if hour.hour not in stored
    ]
    if not pairs:
        return 0
    return store_observations(
        session,
        profile=profile,
        hours=[hour for hour, _ in pairs],
        expected=[lab for _, lab in pairs],
    )
