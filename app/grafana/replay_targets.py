"""The ``plan_backtest`` table: the plan replay's KPIs, one row per policy, with each
policy's GPU-hours as a multiple of the instant bound's and of the reactive HPA's at equal risk.

A replay fits one forecast per replayed night, so it is computed only when the stored one is
not current: the stored replay of the series x profile x parameters is served when it covers
the same days and ends where a replay run now would end (the newest observed hour + 1 h).
Otherwise the replay runs (once per key at a time in this process) and is stored, so the
next panel refresh, the overview page and the REST API find it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pandas as pd
from sqlalchemy import select

from app import plans
from app.db import repository
from app.db.models import PlanReplay
from app.errors import InputError
from app.grafana.plan_targets import plan_params, resolve_profiles
from app.grafana.protocol import (
    GrafanaInputError,
    QueryContext,
    clean,
    integer,
    table,
    target_series,
)
from app.plans.backtest import latest_replay, run_backtest
from app.plans.replay import ReplayOptions

COLUMNS = (
    ("policy", "string"),
    ("recommended", "boolean"),
    ("bound", "boolean"),
    ("gpu_hours", "number"),
    ("cost_usd", "number"),
    ("time_over_capacity_share", "number"),
    ("requests_over_capacity_share", "number"),
    ("time_over_85_share", "number"),
    ("scale_events", "number"),
    ("peak_gpus", "number"),
    ("gpu_hours_vs_instant_bound", "number"),
    ("gpu_hours_vs_reactive_at_equal_risk", "number"),
)
#: The last column when the series is replayed at a latency SLO (a load-test profile + SLO).
SLO_COLUMN = ("time_over_slo_share", "number")
DEFAULT_DAYS = 7
MAX_DAYS = 90
# A query waiting for another one's replay of the same key gives up after this long and
# replays itself (the other one may have failed).
WAIT_FOR_OTHER_S = 300.0

_inflight: dict[tuple[Any, ...], threading.Event] = {}
_inflight_guard = threading.Lock()


def plan_backtest(ctx: QueryContext, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """KPIs of every replayed policy for one series over the last ``days`` days: one table
    per profile (several from a multi-value variable, each named ``"{series} on {profile}"``;
    without one, the series' deployment)."""
    names = target_series(ctx, payload)
    if not names:  # every series filtered out (an ad-hoc filter): nothing to replay
        return []
    name = _one_series(names)
    params = plan_params(payload)
    days = integer(payload, "days", DEFAULT_DAYS, low=1, high=MAX_DAYS)
    profiles = resolve_profiles(ctx, payload, name)
    out = []
    for profile in profiles:
        result = current_replay(
            ctx,
            series_name=name,
            profile_name=profile.name,
            params=params,
            options=ReplayOptions(days=days),
        )
        answer = _kpi_table(result)
        if len(profiles) > 1:
            answer["name"] = f"{name} on {profile.name}"
        out.append(answer)
    return out


def _kpi_table(result: dict[str, Any]) -> dict[str, Any]:
    at_slo = all(SLO_COLUMN[0] in row for row in result["policies"])
    columns = (*COLUMNS, SLO_COLUMN) if at_slo else COLUMNS
    kinds = tuple(kind for _, kind in columns)
    rows = [
        [
            _cell(value, kind)
            for value, kind in zip(
                _values(row, result) + ([row[SLO_COLUMN[0]]] if at_slo else []), kinds, strict=True
            )
        ]
        for row in result["policies"]
    ]
    return table(columns, rows)


KINDS = tuple(kind for _, kind in COLUMNS)


def _values(row: dict[str, Any], result: dict[str, Any]) -> list[Any]:
    """A policy's cells: its KPIs, then its GPU-hours as a multiple of the instant bound's
    and of the reactive HPA's at gpucast's risk (None where the replay has no such row)."""
    by_name = {r["policy"]: r for r in result["policies"]}
    ratios = [
        row["gpu_hours"] / by_name[name]["gpu_hours"]
        if name in by_name and by_name[name]["gpu_hours"]
        else None
        for name in ("instant-bound", "reactive-at-equal-risk")
    ]
    return [row[column] for column, _ in COLUMNS[: -len(ratios)]] + ratios


def _cell(value: Any, kind: str) -> Any:
    if kind != "number" or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return clean(value)  # NaN and infinities are not JSON


def _one_series(names: list[str]) -> str:
    if len(names) != 1:
        raise GrafanaInputError(
            "plan_backtest replays one series; choose it in payload.series or the ad-hoc "
            f"filter (this query covers {len(names)})"
        )
    return names[0]


def replay_end(ctx: QueryContext, *, series_name: str) -> pd.Timestamp:
    """Where a replay run now would end: the newest observed hour + 1 h, on the hour."""
    series = repository.get_series(ctx.session, name=series_name)
    last_hour = repository.series_stats(ctx.session, series_id=series.id)["last_hour"]
    if last_hour is None:
        raise GrafanaInputError(f"series {series_name!r} has no observations to replay")
    return (_utc(last_hour) + pd.Timedelta(hours=1)).floor("h")


def stored_replay(
    ctx: QueryContext,
    *,
    series_name: str,
    profile_name: str,
    params: plans.PlanParams,
    options: ReplayOptions,
    end: pd.Timestamp,
) -> dict[str, Any] | None:
    """The stored replay result when it is current (it ends at ``end`` and covers the same
    days of stored hours with these parameters), else None."""
    series = repository.get_series(ctx.session, name=series_name)
    replay = latest_replay(ctx.session, series_id=series.id, profile=profile_name, params=params)
    if replay is not None and not _same_window(replay.result, options):
        # The newest is of another window (days, nightly hour or a --load file); without
        # looking further, two panels with different days would replay on every refresh.
        replay = _newest_of_window(ctx, series.id, profile_name, params, options)
    if replay is None or _utc(replay.result["end"]) != end:
        return None
    return replay.result


def _same_window(result: dict[str, Any], options: ReplayOptions) -> bool:
    return (
        result.get("days") == options.days
        and result.get("nightly_hour_utc") == options.nightly_hour_utc
        and result.get("load_source") != "file"  # a --load file is not what this query replays
    )


def _newest_of_window(
    ctx: QueryContext,
    series_id: int,
    profile_name: str,
    params: plans.PlanParams,
    options: ReplayOptions,
) -> PlanReplay | None:
    replays = ctx.session.scalars(
        select(PlanReplay)
        .where(PlanReplay.series_id == series_id, PlanReplay.profile == profile_name)
        .order_by(PlanReplay.id.desc())
    )
    for replay in replays:
        same_params = plans.PlanParams(**replay.result["params"]) == params
        if same_params and _same_window(replay.result, options):
            return replay
    return None


def current_replay(
    ctx: QueryContext,
    *,
    series_name: str,
    profile_name: str,
    params: plans.PlanParams,
    options: ReplayOptions,
) -> dict[str, Any]:
    """The stored replay when current, else a fresh one (which is stored)."""
    end = replay_end(ctx, series_name=series_name)

    def stored() -> dict[str, Any] | None:
        return stored_replay(
            ctx,
            series_name=series_name,
            profile_name=profile_name,
            params=params,
            options=options,
            end=end,
        )

    if (result := stored()) is not None:
        return result
    if ctx.database is None:
        raise RuntimeError("plan_backtest needs QueryContext.database to run a replay")
    database = ctx.database

    def compute() -> dict[str, Any]:
        try:
            return run_backtest(
                database,
                series_name=series_name,
                profile_name=profile_name,
                params=params,
                options=options,
            )
        except InputError as exc:
            raise GrafanaInputError(f"plan_backtest of {series_name!r}: {exc}") from exc

    key = (series_name, profile_name, params, options)
    return _single_flight(ctx, key, stored, compute)


def _single_flight(
    ctx: QueryContext,
    key: tuple[Any, ...],
    stored: Callable[[], dict[str, Any] | None],
    compute: Callable[[], dict[str, Any]],
) -> dict[str, Any]:
    """Compute once per key at a time; queries that arrive meanwhile wait and read the
    stored result. The request's transaction ends before waiting: on SQLite it holds the
    write lock the computing query needs to store its result."""
    ctx.end_read_transaction()
    with _inflight_guard:
        running = _inflight.get(key)
        if running is None:
            _inflight[key] = threading.Event()
    if running is not None:
        running.wait(WAIT_FOR_OTHER_S)
        result = stored()
        if result is not None:
            return result
        ctx.end_read_transaction()
        return compute()
    try:
        return compute()
    finally:
        with _inflight_guard:
            _inflight.pop(key).set()


def _utc(value: Any) -> pd.Timestamp:
    stamp = pd.Timestamp(value)
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
