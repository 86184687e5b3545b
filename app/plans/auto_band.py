"""``band=auto`` on the service side: the calibrated headroom of one series x GPU profile x
plan parameters, computed once per nightly run and stored (table ``plan_calibrations``).

The replay behind the choice (:mod:`app.plans.calibration`) covers the last
``CALIBRATION_DAYS`` days of stored hours: at every past hour, the forecast refreshed from
the hours before it with the fitted state in force then (the newest nightly run trained
before that hour; for hours before the oldest stored one, the oldest), sized exactly as the
live plan is, against the stored load (each hour's busiest minute at its ``peak_rps``).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
from sqlalchemy import Engine, func, select
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from sqlalchemy.orm import Session

import capacity
from app.db import Database, repository
from app.db.engine import READ_ONLY, transaction_began
from app.db.models import (
    ForecastRun,
    GpuProfile,
    GpuProfileLoadTest,
    Observation,
    PlanCalibration,
    Series,
    SeriesDeployment,
)
from app.errors import TooManyRequestsError
from app.forecasts.work import METRIC_COLUMNS
from app.plans.band_fleet import AUTO, FREE_KEYS, band_key, replayed_band, sized_band
from app.plans.calibration import CALIBRATION_DAYS, HOUR, BandChoice, HeadroomReplay
from app.plans.calibration_gate import ReadBudget, SingleFlight
from app.plans.load import hourly_load
from app.plans.params import PlanParams
from app.plans.past_plans import (
    REFRESH_LAG,
    FittedState,
    Sizing,
    backstop,
    band_decisions,
    hourly_forecasts,
    sized_at_known_mix,
)
from app.plans.retention import prune
from app.plans.sizing import ProfileFigures, peak_factors_from_history, tokens_per_request
from app.plans.slo_sizing import SloSizing, slo_capacity_by_stored_hour, slo_sizing
from app.profiles.deployments import Slo, find_deployment

logger = logging.getLogger(__name__)

# History read: the calibration window, the 28 days a refresh filters on, and a margin.
HISTORY_DAYS = CALIBRATION_DAYS + 30
MIN_HISTORY = pd.Timedelta(days=2)

#: Who stored a choice (``result["stored_by"]``): a read is bounded (calibration_gate), the
#: nightly job and ``gpucast plan`` are not. STORED: a reader that never calibrates (the
#: overview, a ``/metrics`` scrape) and reads an explicit band's fleet only when stored.
READ, NIGHTLY, OPERATOR, STORED = "read", "nightly", "operator", "stored"
_READ_BUDGET = ReadBudget()
_FLIGHTS: SingleFlight[BandChoice] = SingleFlight()


def band_choice(
    session: Session,
    *,
    series_id: int,
    series_name: str,
    run: ForecastRun,
    uses_tokens: bool,
    profile: ProfileFigures,
    params: PlanParams,
    slo: SloSizing | None = None,
    stored_by: str = READ,
) -> BandChoice:
    """The stored choice for the nightly run behind ``run`` (its parent, or itself), or a new
    one computed and stored now. With ``slo`` (a plan at a latency SLO) the choice calibrates
    time over the SLO at each past hour's measured mix instead of time over capacity. A read
    (``stored_by`` "read") computes the default parameters and at most
    READ_CALIBRATIONS_PER_NIGHT other sets (an SLO makes a set of its own) per series x
    profile x nightly run, else raises TooManyRequestsError before any replay; concurrent
    identical calibrations join one computation. The replay runs in the caller's transaction
    (a read one: no write lock on SQLite) and the choice is stored in a short write of its
    own."""
    stored = stored_choice(
        session, series_id=series_id, profile_name=profile.name, params=params, run=run, slo=slo
    )
    if stored is not None:
        return stored
    nightly_id = run.parent_id or run.id
    key = _key(params, slo)
    night = _night(session, series_id=series_id, nightly_id=nightly_id, profile=profile.name)
    if stored_by == READ and key not in FREE_KEYS:
        read_keys = _read_keys(session, series_id, profile.name, nightly_id)
        if not _READ_BUDGET.admit(night, key, read_keys):
            raise TooManyRequestsError(
                f"plans have been replayed for {_READ_BUDGET.per_scope} parameter sets "
                f"of series {series_name!r} on profile {profile.name!r} since its last nightly "
                "run, the most reads may add (each replays a week of plans). Ask with the "
                "default parameters (of any band) or ones already replayed, "
                "or replay these with 'gpucast plan "
                f"{series_name} --profile {profile.name} ...' (the nightly run then keeps them)"
            )

    def compute_and_store() -> BandChoice:
        choice = calibrate(
            session,
            series_id=series_id,
            series_name=series_name,
            metric=run.metric,
            uses_tokens=uses_tokens,
            profile=profile,
            params=params,
            slo=slo,
        )
        row = PlanCalibration(
            series_id=series_id,
            profile=profile.name,
            params_key=key,
            run_id=nightly_id,
            result=choice.as_dict()
            | {"params": params.as_dict(), "slo": _slo_dict(slo), "stored_by": stored_by},
        )
        _store(session, row, series_name)
        return choice

    # stored inside the flight; a caller whose transaction began before the row was
    # stored is served the flight's result instead of computing it again
    choice, _ = _FLIGHTS.run((*night, key), compute_and_store, began_at=transaction_began(session))
    # a copy: the plan adds notes to its choice
    return BandChoice.from_dict(choice.as_dict())


def _night(session: Session, *, series_id: int, nightly_id: int, profile: str) -> tuple[Any, ...]:
    """What one calibration scope is (the database, the series, the profile and the nightly
    run, with its creation time: ids alone may be reused by a database emptied since)."""
    created = session.scalar(select(ForecastRun.created_at).where(ForecastRun.id == nightly_id))
    url = session.get_bind().engine.url.render_as_string(hide_password=True)
    return (url, series_id, profile, nightly_id, str(created))


def _read_keys(session: Session, series_id: int, profile: str, nightly_id: int) -> set[str]:
    """The non-default parameter sets reads stored for this series x profile x night (rows
    from before ``stored_by`` existed count as reads)."""
    rows = session.execute(
        select(PlanCalibration.params_key, PlanCalibration.result).where(
            PlanCalibration.series_id == series_id,
            PlanCalibration.profile == profile,
            PlanCalibration.run_id == nightly_id,
        )
    ).all()
    return {
        key
        for key, result in rows
        if key not in FREE_KEYS and (result or {}).get("stored_by", READ) == READ
    }


def _store(session: Session, row: PlanCalibration, series_name: str) -> None:
    """Store a choice. From a read transaction: in a short write transaction of its own (on
    SQLite the write lock is taken for the insert only, never during the replay, and a read
    transaction could not write once another writer committed since it began). Otherwise in
    the caller's transaction, under a savepoint. A choice that cannot be stored is still
    served (the next read computes it again)."""
    bind = session.get_bind()
    try:
        if isinstance(bind, Engine) and bind.get_execution_options().get(READ_ONLY):
            with Session(bind=bind.execution_options(**{READ_ONLY: False})) as writer:
                writer.add(row)
                prune(writer, PlanCalibration, series_id=row.series_id, profile=row.profile)
                writer.commit()
        else:
            with session.begin_nested():
                session.add(row)
                prune(session, PlanCalibration, series_id=row.series_id, profile=row.profile)
    except (OperationalError, IntegrityError, PoolTimeoutError):
        # busy, the series deleted meanwhile, no free connection
        logger.info("band auto choice for %s not stored", series_name, exc_info=True)


def recalibrate(database: Database, *, days: int = 7) -> int:
    """After a nightly run: make every deployment's band=auto choice (its profile and SLO
    under the default parameters) and every choice a read or ``gpucast plan`` stored in the
    last ``days`` days again for the new nightly runs (same series, profile and parameters),
    so the first plan read after the night does not pay for it and the expected fleet of
    every deployed series is measured. Choices the
    nightly job stored itself are not carried on: a parameter set nobody asked for again
    leaves the job after ``days`` days. Each replay runs in a read transaction (no write
    lock on SQLite). Returns how many were computed; a failure is logged and skips that
    choice."""
    since = datetime.now(UTC) - timedelta(days=days)
    with database.read_transaction() as session:
        keys = session.execute(
            select(Series.name, PlanCalibration.profile, PlanCalibration.result)
            .join(Series, Series.id == PlanCalibration.series_id)
            .where(PlanCalibration.created_at >= since)
            .order_by(PlanCalibration.id.desc())
        ).all()
        deployed = _deployment_keys(session)
    seen, computed = set(), 0
    for series_name, profile_name, result in [*deployed, *keys]:
        stored = (result or {}).get("params")
        if not stored or (result or {}).get("stored_by") == NIGHTLY:
            continue
        key = (
            series_name,
            profile_name,
            tuple(sorted(stored.items())),
            tuple(sorted((result.get("slo") or {}).items())),
        )
        if key in seen:
            continue
        seen.add(key)
        try:
            with database.read_transaction() as session:
                computed += _recalibrate_one(
                    session, series_name, profile_name, PlanParams(**stored), result.get("slo")
                )
        except Exception:  # noqa: BLE001 - the next read computes it instead
            logger.warning("recalibrating %s %s failed", series_name, profile_name, exc_info=True)
    return computed


def _deployment_keys(session: Session) -> list[tuple[str, str, dict[str, Any]]]:
    """Every deployment's own key — its profile and SLO under the default parameters, what
    ``/metrics``, ``/desired-replicas`` and the overview plan it with — whether or not a read
    asked for it since the last night (in the shape of a stored choice's result)."""
    rows = session.execute(
        select(
            Series.name,
            GpuProfile.name,
            SeriesDeployment.ttft_p95_s,
            SeriesDeployment.tpot_p95_s,
        )
        .join(SeriesDeployment, SeriesDeployment.series_id == Series.id)
        .join(GpuProfile, GpuProfile.id == SeriesDeployment.gpu_profile_id)
        .order_by(Series.name)
    ).all()
    defaults = PlanParams().as_dict()
    keys = []
    for series_name, profile_name, ttft, tpot in rows:
        slo = None if ttft is None or tpot is None else {"ttft_p95_s": ttft, "tpot_p95_s": tpot}
        keys.append((series_name, profile_name, {"params": defaults, "slo": slo}))
    return keys


def _recalibrate_one(
    session: Session,
    series_name: str,
    profile_name: str,
    params: PlanParams,
    slo: dict[str, float] | None = None,
) -> int:
    from app.forecasts import store as forecast_store

    series = session.scalar(select(Series).where(Series.name == series_name))
    profile = session.scalar(select(GpuProfile).where(GpuProfile.name == profile_name))
    if series is None or profile is None:
        return 0
    run = forecast_store.latest_run(session, series_id=series.id, metric="tokens")
    uses_tokens = run is not None
    run = run or forecast_store.latest_run(session, series_id=series.id, metric="requests")
    if run is None:
        return 0
    sizing = None if not slo else slo_sizing(session, profile=profile, slo=Slo(**slo))
    if stored_choice(
        session,
        series_id=series.id,
        profile_name=profile_name,
        params=params,
        run=run,
        slo=sizing,
    ):
        return 0
    band_choice(
        session,
        series_id=series.id,
        series_name=series_name,
        run=run,
        uses_tokens=uses_tokens,
        profile=ProfileFigures.of(profile),
        params=params,
        slo=sizing,
        stored_by=NIGHTLY,
    )
    return 1


def _slo_dict(slo: SloSizing | None) -> dict[str, float] | None:
    if slo is None:
        return None
    return {"ttft_p95_s": slo.slo.ttft_p95_s, "tpot_p95_s": slo.slo.tpot_p95_s}


def _key(params: PlanParams, slo: SloSizing | None) -> str:
    """What a stored choice is found by: the parameters, and the SLO it calibrated to."""
    return _limits_key(params, _slo_dict(slo))


def _limits_key(params: PlanParams, limits: dict[str, float] | None) -> str:
    key = band_key(params)
    if limits is None:
        return key
    return f"{key},slo={limits['ttft_p95_s']}/{limits['tpot_p95_s']}"


def reader_choice(
    session: Session,
    *,
    series_id: int,
    series_name: str,
    profile_name: str,
    params: PlanParams,
    run: ForecastRun,
) -> BandChoice | None:
    """The stored choice a plan of ``series_name`` on ``profile_name`` reads, for readers
    that never calibrate (the overview, ``/metrics``): found by the key :func:`band_choice`
    stores it under — the deployment's SLO when the profile can apply it (it has a load-test
    table), none otherwise. None when not stored yet."""
    deployment = find_deployment(session, series_name=series_name)
    slo = deployment.slo if deployment is not None else None
    measured = slo is not None and (
        session.scalar(
            select(GpuProfileLoadTest.id)
            .join(GpuProfile, GpuProfile.id == GpuProfileLoadTest.gpu_profile_id)
            .where(GpuProfile.name == profile_name)
        )
        is not None
    )
    key = plan_key(params, slo, applies_slo=measured)
    return _stored(session, series_id, profile_name, key, run)


def plan_key(params: PlanParams, slo: Slo | None, *, applies_slo: bool) -> str:
    """The key a plan at ``slo`` stores its choice under: with the SLO only when the profile
    applies it (``applies_slo``: it has a load-test table), as :func:`band_choice` does."""
    return _limits_key(params, slo.as_dict() if slo is not None and applies_slo else None)


def stored_choice(
    session: Session,
    *,
    series_id: int,
    profile_name: str,
    params: PlanParams,
    run: ForecastRun,
    slo: SloSizing | None = None,
) -> BandChoice | None:
    """The choice stored for the nightly run behind ``run`` (its parent, or itself), or None."""
    return _stored(session, series_id, profile_name, _key(params, slo), run)


def _stored(
    session: Session, series_id: int, profile_name: str, key: str, run: ForecastRun
) -> BandChoice | None:
    stored = session.scalar(
        select(PlanCalibration.result)
        .where(
            PlanCalibration.series_id == series_id,
            PlanCalibration.profile == profile_name,
            PlanCalibration.params_key == key,
            PlanCalibration.run_id == (run.parent_id or run.id),
        )
        .order_by(PlanCalibration.id.desc())
        .limit(1)
    )
    return None if stored is None else BandChoice.from_dict(stored)


def calibrate(
    session: Session,
    *,
    series_id: int,
    series_name: str,
    metric: str,
    uses_tokens: bool,
    profile: ProfileFigures,
    params: PlanParams,
    slo: SloSizing | None = None,
) -> BandChoice:
    """Replay the last CALIBRATION_DAYS days of hourly plans at candidate headrooms over the
    point forecast and choose the cheapest meeting the target (HeadroomReplay)."""
    target = params.max_over_capacity
    newest = session.scalar(
        select(func.max(Observation.hour)).where(Observation.series_id == series_id)
    )
    if newest is None:
        return BandChoice.uncalibrated(target, "no stored hours")
    newest = pd.Timestamp(newest)
    since = (newest - timedelta(days=HISTORY_DAYS)).to_pydatetime()
    history = repository.observations_frame(session, series_id=series_id, start=since)
    fits = _fitted_states(session, series_id=series_id, metric=metric)
    if not fits:
        return BandChoice.uncalibrated(target, "the nightly run has no refresh state")
    end = newest + HOUR
    first = max(end - pd.Timedelta(days=CALIBRATION_DAYS), history["hour"].min() + MIN_HISTORY)
    moments = pd.date_range(first.ceil("h"), end - HOUR, freq="h")
    if len(moments) < 24:
        return BandChoice.uncalibrated(target, f"{len(moments)} h of history to replay")
    column = history[METRIC_COLUMNS[metric]]
    present = column.notna().to_numpy()
    y = pd.Series(column.to_numpy(dtype=float)[present], index=history["hour"][present])
    try:
        per_request = None if uses_tokens else tokens_per_request(history, series_name=series_name)
        has_tokens = history["total_tokens"].notna().any()
        load_per_request = None
        if history["requests"].notna().any() and has_tokens:
            load_per_request = tokens_per_request(history, series_name=series_name, days=None)
        load = hourly_load(history, load_per_request)
        forecasts = hourly_forecasts(fits, y.set_axis(pd.DatetimeIndex(y.index)), moments)
        sizing = Sizing(
            profile=profile,
            params=params,
            tokens_per_request=per_request,
            peak_factors=peak_factors_from_history(history),
        )
        sizings: Sizing | list[Sizing] = sizing
        if slo is not None:  # past plans at the SLO capacity of the mix known when made
            sizings, _ = sized_at_known_mix(
                [sizing] * len(moments), moments, slo, history, of_requests=not uses_tokens
            )
        fleet = params.fleet(
            tokens_per_s_per_gpu=profile.tokens_per_s_per_gpu,
            gpus_per_replica=profile.gpus_per_replica,
        )
        replay = HeadroomReplay(
            lambda headroom: band_decisions(
                forecasts, moments, sized_band(params), sizings, headroom=headroom
            ),
            load,
            fleet=fleet,
            start=moments[0] + REFRESH_LAG,
            end=end,
            backstop=backstop(params),
            slo_tokens_per_s_per_replica=_slo_capacity(slo, history, profile, moments[0]),
        )
        return replay.choose(target) if params.band == AUTO else replayed_band(replay, params)
    except Exception as exc:  # noqa: BLE001 - a plan is still served, on the fallback band
        # what the inputs cannot replay (a CapacityError) is said in a line; anything else
        # is a defect, logged with its traceback
        logger.warning(
            "band %s calibration of %s failed: %s",
            params.band,
            series_name,
            exc,
            exc_info=not isinstance(exc, capacity.CapacityError),
        )
        return BandChoice.uncalibrated(target, f"calibration failed: {type(exc).__name__}")


def _fitted_states(session: Session, *, series_id: int, metric: str) -> list[FittedState]:
    rows = session.execute(
        select(ForecastRun.trained_until, ForecastRun.state)
        .where(
            ForecastRun.series_id == series_id,
            ForecastRun.metric == metric,
            ForecastRun.status == "complete",
            ForecastRun.kind == "nightly",
            ForecastRun.state.is_not(None),
        )
        .order_by(ForecastRun.id.desc())
        .limit(CALIBRATION_DAYS + 2)
    ).all()
    return [
        FittedState(available_at=pd.Timestamp(trained) + HOUR, state=state)
        for trained, state in rows
        if trained is not None and isinstance(state, dict)
    ]


def _slo_capacity(
    slo: SloSizing | None, history: pd.DataFrame, profile: ProfileFigures, start: pd.Timestamp
) -> pd.Series | None:
    """The SLO capacity per replica at each stored hour's measured mix (the first measured
    one before it), or None without an SLO or a measured mix (then time over capacity)."""
    if slo is None:
        return None
    by_hour = slo_capacity_by_stored_hour(slo, history, gpus_per_replica=profile.gpus_per_replica)
    if by_hour is None:
        return None
    if by_hour.index[0] > start:
        by_hour = pd.concat([pd.Series([by_hour.iloc[0]], index=[start]), by_hour])
    return by_hour
