"""The plan of a shared pool: every member's own GPU plan (the plan its capacity endpoint
serves, from its freshest forecast) placed on the pool's nodes by :func:`capacity.plan_pool`.

The pool plan covers the hours every planned member's forecast covers (the first ``hours`` of
them). A member without a complete forecast, or whose forecast does not cover those hours,
is listed under ``unplanned`` with the reason — never left out silently. Each member's
requests/s rate limit divides its grant by the hour's own tokens per request
(:mod:`app.pools.per_request`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import pandas as pd
from sqlalchemy.orm import Session

import capacity
from app.common import options
from app.common.names import echo
from app.common.words import count
from app.errors import ConflictError, InputError, NotFoundError
from app.forecasts import store as forecast_store
from app.plans import PlanCache, PlanParams, SeriesPlan, series_plan
from app.plans.auto_band import STORED, reader_choice
from app.plans.calibration import FALLBACK_BAND
from app.pools.per_request import MemberTokensPerRequest, member_tokens_per_request
from app.pools.store import StoredMember, StoredPool, load_pool

MAX_PLAN_HOURS = options.POOL_PLAN_HOURS_MAX
DEFAULT_PLAN_HOURS = options.POOL_PLAN_HOURS


def check_hours(hours: int) -> int:
    if isinstance(hours, bool) or not isinstance(hours, int) or not 1 <= hours <= MAX_PLAN_HOURS:
        raise InputError(f"hours must be a whole number in 1..{MAX_PLAN_HOURS}, got {hours!r}")
    return hours


@dataclass(frozen=True)
class PoolPlanResult:
    """A pool plan with the member plans it was built from."""

    pool: StoredPool
    params: PlanParams
    hours_asked: int
    plan: capacity.PoolPlan
    member_plans: dict[str, SeriesPlan]
    unplanned: tuple[dict[str, str], ...]
    per_request_sources: dict[str, str | None]
    # the hours asked that the plan leaves out, and why (empty when it covers them all)
    missing_hours: tuple[pd.Timestamp, ...] = ()
    coverage_notes: tuple[str, ...] = ()

    def current_hour(self, now: datetime | None = None) -> pd.Series | None:
        """The plan's row for the hour holding ``now`` (None outside the plan)."""
        moment = pd.Timestamp(now or datetime.now(UTC)).floor("h")
        rows = self.plan.hours[self.plan.hours["hour"] == moment]
        return None if rows.empty else rows.iloc[0]

    def as_dict(self, now: datetime | None = None) -> dict[str, Any]:
        out = self.plan.as_dict()
        planned = self.member_plans
        for entry in out["members"]:
            member_plan = planned[entry["member"]]
            entry.update(
                {
                    "profile": member_plan.profile,
                    "source": member_plan.source,
                    "model": member_plan.model,
                    "trained_until": member_plan.trained_until,
                    "stale": member_plan.is_stale(now),
                    "sized_band": member_plan.plan.band,
                    "forecast_run_ids": list(member_plan.run_ids),
                    "tokens_per_request_source": self.per_request_sources[entry["member"]],
                }
            )
        out["notes"] = [*self.coverage_notes, *out.get("notes", [])]
        return {
            **out,
            "hours_asked": self.hours_asked,
            "missing_hours": [hour.to_pydatetime() for hour in self.missing_hours],
            "params": self.params.as_dict(),
            "unplanned": list(self.unplanned),
            "stale_members": [
                name for name, member_plan in planned.items() if member_plan.is_stale(now)
            ],
        }


class StoredBands:
    """``member_params`` for readers that must not calibrate band auto (the overview page, a
    ``/metrics`` scrape): a member keeps band auto when its choice for the nightly run behind
    its freshest forecast is stored (the plan read then finds it), else it is sized on
    :data:`FALLBACK_BAND` until one is stored — as the series cards do. ``pending`` names the
    members sized on the fallback. Any band auto plan read (``gpucast pool plan``, the REST
    pool plan) stores the choices."""

    def __init__(self, session: Session, params: PlanParams) -> None:
        self._session = session
        self._params = params
        self.pending: list[str] = []

    def __call__(self, member: StoredMember) -> PlanParams:
        if self._params.band != "auto":
            return self._params
        runs = (
            forecast_store.latest_run(self._session, series_id=member.series_id, metric=metric)
            for metric in ("tokens", "requests")  # the run the member's plan is built from
        )
        run = next((run for run in runs if run is not None), None)
        if run is None:  # no forecast: the member is unplanned, nothing to calibrate
            return self._params
        stored = reader_choice(
            self._session,
            series_id=member.series_id,
            series_name=member.series,
            profile_name=member.profile,
            params=self._params,
            run=run,
        )
        if stored is not None:
            return self._params
        self.pending.append(member.series)
        return replace(self._params, band=FALLBACK_BAND)


def _member_spec(
    member: StoredMember, plan: SeriesPlan, params: PlanParams, tokens_per_request: float | None
) -> capacity.PoolMember:
    # What one planned GPU is sized to carry: the plan's conversion run backwards, with the
    # member's own sizing (the fallback band's safety factor while auto is not calibrated;
    # band auto's calibrated headroom over the point forecast included).
    headroom = float((plan.band_choice or {}).get("headroom") or 1.0)
    margin = plan.params.sizing_safety_factor * headroom
    carried = plan.plan.per_gpu_tokens_per_s * params.utilization_target / margin
    return capacity.PoolMember(
        name=member.series,
        gpus_per_replica=plan.plan.gpus_per_replica,
        tokens_per_s_per_gpu=carried,
        priority=member.priority,
        tokens_per_request=tokens_per_request,
        spot_ok=member.spot_ok,
    )


def _frames(plans: dict[str, SeriesPlan]) -> tuple[pd.DataFrame, pd.DataFrame]:
    gpus = {}
    tokens = {}
    for name, member_plan in plans.items():
        frame = member_plan.plan.frame.set_index("hour")
        gpus[name] = frame["gpus"].astype(float)
        tokens[name] = frame["sized_tokens_per_s"].astype(float)
    return pd.DataFrame(gpus), pd.DataFrame(tokens)


def pool_plan(
    session: Session,
    *,
    name: str,
    params: PlanParams,
    hours: int = DEFAULT_PLAN_HOURS,
    cache: PlanCache | None = None,
    member_params: Callable[[StoredMember], PlanParams] | None = None,
) -> PoolPlanResult:
    """The plan of pool ``name`` for the next ``hours`` plan hours (see the module text).

    ``member_params`` gives the parameters each member's own plan is read with (default:
    ``params``); readers that must not calibrate band auto size a member on a fixed band until
    its choice is stored. An explicit band's expected fleet is not replayed for a pool
    (its plan does not publish it). 404 for an unknown pool, 409 when no member can be planned (with
    every member's reason).
    """
    check_hours(hours)
    pool = load_pool(session, name=name)
    if not pool.members:
        raise ConflictError(f"pool {echo(pool.name)} has no members; add some with PUT")
    plans: dict[str, SeriesPlan] = {}
    unplanned: list[dict[str, str]] = []
    for member in pool.members:
        try:
            plans[member.series] = series_plan(
                session,
                series_name=member.series,
                profile_name=member.profile,
                params=member_params(member) if member_params is not None else params,
                cache=cache,
                # a pool plan sums floors: an explicit band's fleet is not replayed for it
                calibrated_by=STORED,
            )
        except NotFoundError as exc:
            unplanned.append({"member": member.series, "reason": str(exc)})
    if not plans:
        reasons = "; ".join(f"{item['member']}: {item['reason']}" for item in unplanned)
        raise ConflictError(f"pool {echo(pool.name)}: no member has a plan ({reasons})")
    gpus, tokens = _frames(plans)
    every_hour = gpus
    gpus, tokens = _common_hours(gpus, tokens, plans, unplanned)
    gpus, tokens = gpus.iloc[:hours], tokens.iloc[:hours]
    missing, coverage_notes = _coverage(every_hour[gpus.columns], gpus.index, hours, plans)
    members = {m.series: m for m in pool.members}
    hours_index = pd.DatetimeIndex(gpus.index)
    per_request = {
        series: member_tokens_per_request(
            session, series_id=members[series].series_id, plan=plans[series], hours=hours_index
        )
        for series in gpus.columns
    }
    specs = [
        _member_spec(members[series], plans[series], params, per_request[series].figure)
        for series in gpus.columns
    ]
    spec = capacity.PoolSpec(
        name=pool.name,
        node_prices=pool.node_prices(),
        gpus_per_node=pool.gpus_per_node,
        quota_nodes=pool.quota_nodes,
        spot_interruption=pool.spot_interruption,
        gpu_type=pool.gpu_type,
    )
    try:
        plan = capacity.plan_pool(
            spec, specs, gpus, tokens, tokens_per_request=_per_request_frame(per_request, gpus)
        )
    except capacity.InvalidParameterError as exc:
        raise InputError(f"pool {echo(pool.name)}: {exc}") from exc
    kept = {series: plans[series] for series in gpus.columns}
    return PoolPlanResult(
        pool=pool,
        params=params,
        hours_asked=hours,
        plan=plan,
        member_plans=kept,
        unplanned=tuple(unplanned),
        per_request_sources={series: item.source for series, item in per_request.items()},
        missing_hours=missing,
        coverage_notes=coverage_notes,
    )


def _coverage(
    every_hour: pd.DataFrame, covered: pd.Index, hours: int, plans: dict[str, SeriesPlan]
) -> tuple[tuple[pd.Timestamp, ...], tuple[str, ...]]:
    """The hours asked that no common plan hour covers, and a note naming the members whose
    forecasts leave them out (a pool is planned only on hours every member's plan covers)."""
    if len(covered) >= hours:
        return (), ()
    start = covered[0] if len(covered) else every_hour.index.min()
    asked = pd.date_range(start, periods=hours, freq="h")
    missing = asked.difference(pd.DatetimeIndex(covered))
    reasons = []
    for name in every_hour.columns:
        have = pd.DatetimeIndex(every_hour[name].dropna().index)
        if len(missing.difference(have)) == 0:
            continue
        trained = plans[name].trained_until
        trained_text = f", trained until {pd.Timestamp(trained):%Y-%m-%d %H:%M}" if trained else ""
        reasons.append(
            f"{name}'s forecast covers {have.min():%Y-%m-%d %H:%M} to {have.max():%H:%M} UTC"
            f"{trained_text}"
        )
    note = (
        f"the plan covers {len(covered)} of the {count(hours, 'hour')} asked: "
        f"{count(len(missing), 'hour')} from "
        f"{missing[0]:%Y-%m-%d %H:%M} UTC are missing because "
        + "; ".join(reasons)
        + " (a pool is planned on the hours every member's forecast covers); refresh those "
        "forecasts ('gpucast forecast --refresh SERIES', or the hourly cycle)"
    )
    return tuple(missing), (note,)


def _per_request_frame(
    per_request: dict[str, MemberTokensPerRequest], gpus: pd.DataFrame
) -> pd.DataFrame | None:
    """Each hour's tokens per request of the members that have them (None: no member has)."""
    columns = {
        series: item.by_hour for series, item in per_request.items() if item.by_hour is not None
    }
    return pd.DataFrame(columns, index=gpus.index) if columns else None


def _common_hours(
    gpus: pd.DataFrame,
    tokens: pd.DataFrame,
    plans: dict[str, SeriesPlan],
    unplanned: list[dict[str, str]],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The hours every member plan covers; when there are none, the hours of the freshest
    plans, with the members that do not cover them moved to ``unplanned``."""
    covered = gpus.dropna()
    if covered.empty:
        starts = {name: plan.plan.frame["hour"].min() for name, plan in plans.items()}
        latest = max(starts.values())
        keep = [name for name, start in starts.items() if start == latest]
        for name in gpus.columns:
            if name not in keep:
                frame = plans[name].plan.frame
                unplanned.append(
                    {
                        "member": name,
                        "reason": (
                            f"its forecast covers {frame['hour'].min().isoformat()} to "
                            f"{frame['hour'].max().isoformat()}, not the hours of the freshest "
                            "member plans; refresh its forecast"
                        ),
                    }
                )
        gpus, tokens = gpus[keep], tokens[keep]
        covered = gpus.dropna()
    return covered, tokens.loc[covered.index]
