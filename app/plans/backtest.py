"""The backtest surface: read a series' inputs, parse a ``--load`` file, run the replay
outside any database transaction and keep the latest result per series x profile x params."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.common import timebounds
from app.common.numbers import MAX_MAGNITUDE
from app.common.options import FALLBACK_BEHAVIOR
from app.db import Database, repository
from app.db.models import PlanReplay
from app.errors import InputError
from app.jobs.nightly import event_records
from app.plans.params import PlanParams
from app.plans.replay import ReplayOptions, SeriesInputs, replay_series
from app.plans.retention import prune
from app.plans.sizing import ProfileFigures, known_tokens_per_request
from app.plans.slo_sizing import slo_sizing
from app.profiles.deployments import bind_profile

LOAD_COLUMNS = ("requests_per_s", "tokens_per_s")
MAX_LOAD_ROWS = 5_000_000
MAX_LOAD_STEP_S = 3600


def read_inputs(session: Session, *, series_name: str, profile_name: str | None) -> SeriesInputs:
    """The series' history and events, and the profile given or deployed (bind_profile)."""
    series = repository.get_series(session, name=series_name)
    binding = bind_profile(session, series_name=series_name, profile_name=profile_name)
    profile = repository.get_gpu_profile(session, name=binding.profile)
    history = repository.observations_frame(session, series_id=series.id)
    events = event_records(session, series_name=series.name)
    return SeriesInputs(
        series=series.name,
        history=history,
        events=events,
        profile=ProfileFigures.of(profile),
        slo=slo_sizing(session, profile=profile, slo=binding.slo),
    )


def read_load_csv(data: bytes, *, name: str = "load file") -> pd.DataFrame:
    """A load file: a ``timestamp`` column (ISO 8601; naive means UTC) and ``requests_per_s``
    or ``tokens_per_s`` (0 to 1e15), at one regular step of 1 s to an hour; an empty load
    cell is a step whose load was not observed (NaN). Returns a frame indexed by UTC time with
    that one column; every problem is an InputError naming the row."""
    try:
        frame = pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InputError(f"{name}: not a readable CSV ({exc})") from exc
    frame.columns = [str(c).strip() for c in frame.columns]
    first_line = data.split(b"\n", 1)[0].decode("utf-8-sig", "replace")
    header = [c.strip() for c in next(csv.reader([first_line]), [])]
    repeated = sorted({c for c in header if header.count(c) > 1})
    if repeated:  # pandas would read the first copy and rename the others
        raise InputError(f"{name}: column {repeated[0]!r} appears more than once")
    if "timestamp" not in frame.columns:
        raise InputError(f"{name}: needs a 'timestamp' column, got {list(frame.columns)}")
    present = [c for c in LOAD_COLUMNS if c in frame.columns]
    if len(present) != 1:
        raise InputError(f"{name}: needs exactly one of {', '.join(LOAD_COLUMNS)}")
    unknown = set(frame.columns) - {"timestamp", *LOAD_COLUMNS}
    if unknown:
        raise InputError(f"{name}: unknown column(s) {sorted(unknown)}")
    if len(frame) < 2:
        raise InputError(f"{name}: needs at least two rows")
    if len(frame) > MAX_LOAD_ROWS:
        raise InputError(f"{name}: more than {MAX_LOAD_ROWS:,} rows")
    column = present[0]
    times = pd.to_datetime(frame["timestamp"], utc=True, errors="coerce", format="ISO8601")
    bad = times.isna()
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"{name}: row {row + 2}: timestamp {frame['timestamp'].iloc[row]!r} is not ISO 8601"
        )
    early_or_late = timebounds.outside_utc(times)
    if early_or_late.any():
        row = int(np.flatnonzero(early_or_late)[0])
        raise InputError(
            f"{name}: row {row + 2}: timestamp {frame['timestamp'].iloc[row]!r} is outside the "
            f"supported range: {timebounds.RANGE_TEXT}"
        )
    # an empty cell is a step whose load was not observed (telemetry lost): the replay's
    # reactive trigger fails there, as the ScaledObject's does, and leaves it unscored
    unobserved = frame[column].str.strip() == ""
    if unobserved.all():
        raise InputError(f"{name}: every {column} cell is empty: no load was observed")
    values = pd.to_numeric(frame[column].mask(unobserved, "nan"), errors="coerce")
    invalid = ~unobserved & (
        values.isna() | ~np.isfinite(values) | (values < 0) | (values > MAX_MAGNITUDE)
    )
    if invalid.any():
        row = int(np.flatnonzero(invalid)[0])
        raise InputError(
            f"{name}: row {row + 2}: {column} {frame[column].iloc[row]!r} must be a finite "
            f"number >= 0 and <= {MAX_MAGNITUDE:g}"
        )
    steps = np.diff(times.astype("int64").to_numpy()) / 1e9
    if steps[0] < 1 or steps[0] != int(steps[0]) or not (steps == steps[0]).all():
        row = int(np.flatnonzero(steps != steps[0])[0]) + 3 if (steps != steps[0]).any() else 3
        raise InputError(
            f"{name}: timestamps must be increasing at one regular step of whole seconds >= 1 "
            f"(first step {steps[0]:g} s; row {row} breaks it)"
        )
    if steps[0] > MAX_LOAD_STEP_S:
        raise InputError(
            f"{name}: a step of {steps[0]:g} s; the load replays what the stored hours cannot "
            f"show, so give it at one step of at most {MAX_LOAD_STEP_S} s (an hour)"
        )
    return pd.DataFrame({column: values.to_numpy(dtype=float)}, index=pd.DatetimeIndex(times))


def load_tokens_per_s(load: pd.DataFrame, inputs: SeriesInputs) -> pd.Series:
    """The load in tokens/s; requests are converted with the tokens per request known at
    each time (the stored hours before it: no future mix leaks into a past decision)."""
    if "tokens_per_s" in load.columns:
        return load["tokens_per_s"]
    per_request = known_tokens_per_request(
        inputs.history, pd.DatetimeIndex(load.index), series_name=inputs.series
    )
    return load["requests_per_s"] * per_request


def params_key(params: PlanParams, options: ReplayOptions, load_source: str) -> str:
    return json.dumps(
        {
            **params.as_dict(),
            "days": options.days,
            "nightly": options.nightly_hour_utc,
            "models": options.models,
            "windows": options.windows,
            "load": load_source,
            # keys kept before the setting existed stay valid for the default
            **(
                {}
                if options.fallback_behavior == FALLBACK_BEHAVIOR
                else {"fallback_behavior": options.fallback_behavior}
            ),
        },
        sort_keys=True,
    )


def run_backtest(
    database: Database,
    *,
    series_name: str,
    profile_name: str | None,
    params: PlanParams,
    options: ReplayOptions = ReplayOptions(),
    load: pd.DataFrame | None = None,
    store: bool = True,
) -> dict[str, Any]:
    """Replay a series; the fits run with no database connection held. The result is kept
    (replacing the previous one for the same series, profile and parameters) unless not store."""
    with database.transaction() as session:
        inputs = read_inputs(session, series_name=series_name, profile_name=profile_name)
    tokens = load_tokens_per_s(load, inputs) if load is not None else None
    result = replay_series(inputs, params=params, options=options, load=tokens)
    if store:
        with database.transaction() as session:
            save_replay(session, series_name=series_name, result=result, options=options)
    return result


STORED_LOAD_SOURCES = ("stored hours with peak_rps", "stored hours")


def current_replay(
    session: Session,
    *,
    series_name: str,
    profile_name: str | None,
    params: PlanParams,
    options: ReplayOptions,
) -> dict[str, Any] | None:
    """The kept replay of the stored hours with these parameters and window when it is
    current — it ends where a replay run now would (the newest observed hour + 1 h) and holds
    the trade-off when asked — else None. Reading it costs one query, not a replay."""
    series = repository.get_series(session, name=series_name)
    binding = bind_profile(session, series_name=series_name, profile_name=profile_name)
    newest = repository.series_stats(session, series_id=series.id)["last_hour"]
    if newest is None:
        return None
    keys = [params_key(params, options, source) for source in STORED_LOAD_SOURCES]
    kept = session.scalar(
        select(PlanReplay)
        .where(
            PlanReplay.series_id == series.id,
            PlanReplay.profile == binding.profile,
            PlanReplay.params_key.in_(keys),
        )
        .order_by(PlanReplay.id.desc())
        .limit(1)
    )
    if kept is None or _utc(kept.result["end"]) != (_utc(newest) + pd.Timedelta(hours=1)).floor(
        "h"
    ):
        return None
    if options.tradeoff and params.band == "auto" and not kept.result.get("tradeoff"):
        return None
    return dict(kept.result)


def _utc(value: Any) -> pd.Timestamp:
    stamp = pd.Timestamp(value)
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")


def save_replay(
    session: Session, *, series_name: str, result: dict[str, Any], options: ReplayOptions
) -> None:
    series = repository.get_series(session, name=series_name)
    params = PlanParams(**result["params"])
    key = params_key(params, options, result["load_source"])
    session.execute(
        delete(PlanReplay).where(
            PlanReplay.series_id == series.id,
            PlanReplay.profile == result["profile"],
            PlanReplay.params_key == key,
        )
    )
    session.add(
        PlanReplay(
            series_id=series.id,
            profile=result["profile"],
            params_key=key,
            window_end=result["end"],
            result=json.loads(json.dumps(result, default=_json_default, allow_nan=False)),
            created_at=datetime.now(UTC),
        )
    )
    session.flush()
    prune(session, PlanReplay, series_id=series.id, profile=result["profile"])


def latest_replay(
    session: Session, *, series_id: int, profile: str, params: PlanParams | None = None
) -> PlanReplay | None:
    """The newest stored replay of a series on a profile (with these parameters, if given)."""
    query = select(PlanReplay).where(
        PlanReplay.series_id == series_id, PlanReplay.profile == profile
    )
    replays = list(session.scalars(query.order_by(PlanReplay.id.desc())))
    for replay in replays:
        if params is None or PlanParams(**replay.result["params"]) == params:
            return replay
    return None


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime | pd.Timestamp):
        return value.isoformat()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
