"""A series' deployment: the GPU profile (and optional p95 latency SLO) that serves it, and
:func:`bind_profile`, the one rule by which every surface that plans a series picks its profile.

The rule, in order: an explicit ``profile`` (a query parameter, a flag, a payload field); the
series' deployment; otherwise what the surface did before deployments existed — the capacity
routes and ``gpucast plan``/``backtest`` answer an :class:`~app.errors.InputError` that names
the profiles and how to deploy the series, Grafana takes the only profile, the overview and
the chart the first by name, accuracy none. The SLO
comes from the deployment (an explicit profile overrides the profile, not the latency the
service's users were promised) unless the caller gives one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.common.names import echo
from app.db import repository
from app.db.models import GpuProfile, Series, SeriesDeployment
from app.db.serving_models import ServingSource
from app.errors import InputError, NotFoundError

# A p95 latency limit beyond an hour is a typo (ms given as s), not an SLO.
MAX_SLO_S = 3600.0

Fallback = Literal["only", "first", "none"]


@dataclass(frozen=True)
class Slo:
    """A p95 latency SLO: time to first token and time per output token, in seconds."""

    ttft_p95_s: float
    tpot_p95_s: float

    def as_dict(self) -> dict[str, float]:
        return {"ttft_p95_s": self.ttft_p95_s, "tpot_p95_s": self.tpot_p95_s}


def slo_of(ttft_p95_s: float | None, tpot_p95_s: float | None, *, what: str = "") -> Slo | None:
    """The SLO of the two limits (both or neither), or an InputError saying what is wrong.
    ``what`` prefixes the flag or parameter names (``--`` on the command line)."""
    if ttft_p95_s is None and tpot_p95_s is None:
        return None
    names = (f"{what}ttft_p95_s", f"{what}tpot_p95_s")
    if what == "--":
        names = ("--ttft-p95-s", "--tpot-p95-s")
    if ttft_p95_s is None or tpot_p95_s is None:
        missing = names[0] if ttft_p95_s is None else names[1]
        raise InputError(
            f"a latency SLO needs both {names[0]} and {names[1]}; {missing} is missing"
        )
    for name, value in zip(names, (ttft_p95_s, tpot_p95_s), strict=True):
        if isinstance(value, bool) or not math.isfinite(value) or not 0 < value <= MAX_SLO_S:
            raise InputError(f"{name} must be seconds in (0, {MAX_SLO_S:g}], got {echo(value)}")
    return Slo(ttft_p95_s=float(ttft_p95_s), tpot_p95_s=float(tpot_p95_s))


@dataclass(frozen=True)
class Deployment:
    series: str
    profile: str
    slo: Slo | None
    created_at: datetime
    updated_at: datetime

    def as_dict(self) -> dict[str, Any]:
        return {
            "series": self.series,
            "profile": self.profile,
            "ttft_p95_s": self.slo.ttft_p95_s if self.slo else None,
            "tpot_p95_s": self.slo.tpot_p95_s if self.slo else None,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


def _deployment(series: Series, row: SeriesDeployment, profile_name: str) -> Deployment:
    slo = None
    if row.ttft_p95_s is not None and row.tpot_p95_s is not None:
        slo = Slo(ttft_p95_s=row.ttft_p95_s, tpot_p95_s=row.tpot_p95_s)
    return Deployment(
        series=series.name,
        profile=profile_name,
        slo=slo,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def set_deployment(
    session: Session, *, series_name: str, profile_name: str, slo: Slo | None = None
) -> Deployment:
    """Serve ``series_name`` with ``profile_name`` (and ``slo``), replacing what served it."""
    series = repository.get_series(session, name=series_name)
    profile = repository.get_gpu_profile(session, name=profile_name)
    row = session.get(SeriesDeployment, series.id)
    now = datetime.now(UTC)
    if row is None:
        row = SeriesDeployment(series_id=series.id, created_at=now)
        session.add(row)
    row.gpu_profile_id = profile.id
    row.ttft_p95_s = slo.ttft_p95_s if slo else None
    row.tpot_p95_s = slo.tpot_p95_s if slo else None
    row.updated_at = now
    session.flush()
    return _deployment(series, row, profile.name)


def find_deployment(session: Session, *, series_name: str) -> Deployment | None:
    """The series' deployment, None when it has none (404 for an unknown series)."""
    series = repository.get_series(session, name=series_name)
    found = session.execute(
        select(SeriesDeployment, GpuProfile.name)
        .join(GpuProfile, GpuProfile.id == SeriesDeployment.gpu_profile_id)
        .where(SeriesDeployment.series_id == series.id)
    ).first()
    return None if found is None else _deployment(series, found[0], found[1])


def get_deployment(session: Session, *, series_name: str) -> Deployment:
    """The series' deployment, or a 404 that says how to set one."""
    found = find_deployment(session, series_name=series_name)
    if found is None:
        raise NotFoundError(
            f"series {echo(series_name)} has no deployment; set one with "
            f"'gpucast series deploy SERIES --profile P' or PUT /v1/series/{{name}}/deployment"
        )
    return found


def clear_deployment(session: Session, *, series_name: str) -> None:
    """Remove the series' deployment (404 when it has none) and its serving source, which
    measured the deployment's profile (the production hours stored stay)."""
    get_deployment(session, series_name=series_name)
    series = repository.get_series(session, name=series_name)
    for row in (
        session.get(ServingSource, series.id),
        session.get(SeriesDeployment, series.id),
    ):
        if row is not None:
            session.delete(row)
    session.flush()


@dataclass(frozen=True)
class Binding:
    """The profile a surface plans a series with, the SLO it sizes to, and where they came
    from (``given``, ``deployment``, ``only profile``, ``first profile``)."""

    profile: str
    slo: Slo | None
    source: str


def bind_profile(
    session: Session,
    *,
    series_name: str,
    profile_name: str | None = None,
    slo: Slo | None = None,
) -> Binding:
    """The profile and SLO that plan ``series_name``: the given profile, else the series'
    deployment; without either an InputError that names the profiles and says how to deploy
    the series. An unknown series or profile is a 404."""
    binding = optional_binding(
        session, series_name=series_name, profile_name=profile_name, slo=slo, fallback="none"
    )
    if binding is None:
        names = [p.name for p in repository.list_gpu_profiles(session)]
        raise InputError(profile_needed(series_name, names))
    return binding


def optional_binding(
    session: Session,
    *,
    series_name: str,
    profile_name: str | None = None,
    slo: Slo | None = None,
    fallback: Fallback = "only",
) -> Binding | None:
    """As :func:`bind_profile`, with what happens when there is neither a given profile nor a
    deployment: ``only`` — the only profile; ``first`` — the first profile by name (the
    overview's and the chart's default); ``none`` — no profile. None when nothing fits."""
    deployment = find_deployment(session, series_name=series_name)
    chosen_slo = slo or (deployment.slo if deployment else None)
    if profile_name is not None:
        repository.get_gpu_profile(session, name=profile_name)
        return Binding(profile=profile_name, slo=chosen_slo, source="given")
    if deployment is not None:
        return Binding(profile=deployment.profile, slo=chosen_slo, source="deployment")
    if fallback == "none":
        return None
    names = [p.name for p in repository.list_gpu_profiles(session)]
    if len(names) == 1:
        return Binding(profile=names[0], slo=chosen_slo, source="only profile")
    if fallback == "first" and names:
        return Binding(profile=names[0], slo=chosen_slo, source="first profile")
    return None


def profile_needed(series_name: str, names: list[str]) -> str:
    """Why no profile could be chosen for a series, and what to do."""
    if not names:
        return (
            "no GPU profile is defined yet; create one with 'gpucast profile create' or "
            "POST /v1/gpu-profiles"
        )
    shown = ", ".join(names[:10]) + (", …" if len(names) > 10 else "")
    exist = "GPU profile exists" if len(names) == 1 else "GPU profiles exist"
    return (
        f"series {echo(series_name)} has no deployment and {len(names)} {exist} "
        f"({shown}): give a profile, or deploy the series once with 'gpucast series deploy "
        "SERIES --profile P' (PUT /v1/series/{name}/deployment)"
    )
