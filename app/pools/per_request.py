"""Each pool member's tokens per request for every plan hour: what the hour's requests/s rate
limit divides the grant in tokens/s by (the ``tokens_per_request`` frame of
:func:`capacity.plan_pool`).

A requests/s limit admits no more than the grant only while the hour's requests average no
more tokens than the figure it was divided by. Per member and hour the figure is:

1. tokens forecast ÷ requests forecast, where the member's plan is built from a tokens forecast
   and its latest complete requests forecast covers the hour (both above 0);
2. otherwise the hour of day's figure from the recent history: the
   :data:`HISTORY_QUANTILE` quantile, over the last :data:`HISTORY_DAYS` days, of the measured
   tokens per request (tokens ÷ requests) of the hours at that hour of day. A high quantile and
   not the mean: on a day whose hour is heavier than the figure the limit admits more than the
   grant; the mean is exceeded on about half of the days, the 0.9 quantile on about one in ten
   and then by less. (The maximum would let one odd hour hold every limit down for four
   weeks.) An hour of day without a measured hour takes the quantile over the whole window.

Hours still without a figure (no history) take the highest figure found; a member with none at
all gets no requests/s limit. The member's one figure (``PoolMember.tokens_per_request``) is
the one its plan converts a requests forecast with, else the window's measured mean.

One query per member reads both forecasts over the plan hours and the member's last
``HISTORY_DAYS × 24`` observed hours — never its whole history.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from sqlalchemy import Float, Select, String, cast, func, literal, null, select, union_all
from sqlalchemy.orm import Session

from app.db.models import ForecastPoint, ForecastRun, Observation
from app.plans import SeriesPlan

HISTORY_DAYS = 28
HISTORY_QUANTILE = 0.9
HISTORY_SOURCE = (
    f"history: q{round(HISTORY_QUANTILE * 100)} of the hour of day over the last "
    f"{HISTORY_DAYS} days"
)
FORECAST_SOURCE = "tokens forecast ÷ requests forecast"


@dataclass(frozen=True)
class MemberTokensPerRequest:
    """A member's tokens per request: ``by_hour`` per plan hour (None: not known), ``figure``
    (its one figure) and ``source`` (how the hours' figures were found)."""

    by_hour: pd.Series | None
    figure: float | None
    source: str | None


def member_tokens_per_request(
    session: Session, *, series_id: int, plan: SeriesPlan, hours: pd.DatetimeIndex
) -> MemberTokensPerRequest:
    """The figures of one member over the plan ``hours`` (module text), in one query."""
    rows = _read(session, series_id=series_id, plan=plan, hours=hours)
    forecast = _forecast_ratio(rows, hours)
    measured = _measured(rows)
    from_history = _by_hour_of_day(measured, hours)
    by_hour = forecast.where(forecast.notna(), from_history)
    if by_hour.notna().any():
        by_hour = by_hour.fillna(by_hour.max())
    forecast_hours = int(forecast.notna().sum())
    figure = plan.tokens_per_request if plan.tokens_per_request is not None else _mean(measured)
    if by_hour.isna().all():
        return MemberTokensPerRequest(None, _float(figure), None)
    if forecast_hours == len(hours):
        source = FORECAST_SOURCE
    elif forecast_hours:
        source = f"{FORECAST_SOURCE} for {forecast_hours} h, {HISTORY_SOURCE} for the others"
    else:
        source = HISTORY_SOURCE
    return MemberTokensPerRequest(by_hour.astype(float), _float(figure), source)


def _float(value: float | None) -> float | None:
    return None if value is None else float(value)


def _read(
    session: Session, *, series_id: int, plan: SeriesPlan, hours: pd.DatetimeIndex
) -> pd.DataFrame:
    """Rows ``kind, hour, value, tokens``: the forecasts' yhat over the plan hours (kind
    ``tokens`` / ``requests``) and the last HISTORY_DAYS × 24 observed hours (``history``:
    requests and total tokens)."""
    recent = (
        select(Observation.hour, Observation.requests, Observation.total_tokens)
        .where(Observation.series_id == series_id)
        .order_by(Observation.hour.desc())
        .limit(HISTORY_DAYS * 24)
        .subquery()
    )
    observed = select(
        literal("history", String).label("kind"),
        recent.c.hour,
        recent.c.requests.label("value"),
        recent.c.total_tokens.label("tokens"),
    )
    parts = [*_forecast_parts(series_id, plan, hours), observed]
    query = union_all(*parts) if len(parts) > 1 else observed
    frame = pd.DataFrame(session.execute(query).all(), columns=["kind", "hour", "value", "tokens"])
    frame["hour"] = pd.to_datetime(frame["hour"], utc=True)
    frame[["value", "tokens"]] = frame[["value", "tokens"]].astype(float)
    return frame


def _forecast_parts(series_id: int, plan: SeriesPlan, hours: pd.DatetimeIndex) -> list[Select]:
    """The plan's tokens forecast and the latest complete requests forecast over the plan
    hours — none when the plan is built from a requests forecast (it has no tokens one)."""
    if plan.source != "tokens forecast" or not plan.run_ids:
        return []
    requests_run = (
        select(func.max(ForecastRun.id))
        .where(
            ForecastRun.series_id == series_id,
            ForecastRun.metric == "requests",
            ForecastRun.status == "complete",
        )
        .scalar_subquery()
    )
    first, last = hours[0].to_pydatetime(), hours[-1].to_pydatetime()
    return [
        select(
            literal(kind, String).label("kind"),
            ForecastPoint.ds.label("hour"),
            ForecastPoint.yhat.label("value"),
            cast(null(), Float).label("tokens"),
        ).where(ForecastPoint.run_id == run_id, ForecastPoint.ds >= first, ForecastPoint.ds <= last)
        for kind, run_id in (("tokens", literal(plan.run_ids[0])), ("requests", requests_run))
    ]


def _forecast_ratio(rows: pd.DataFrame, hours: pd.DatetimeIndex) -> pd.Series:
    """tokens yhat ÷ requests yhat per plan hour where both are above 0 (NaN elsewhere)."""
    tokens = rows[rows["kind"] == "tokens"].set_index("hour")["value"].reindex(hours)
    requests = rows[rows["kind"] == "requests"].set_index("hour")["value"].reindex(hours)
    valid = (tokens > 0) & (requests > 0)
    return (tokens / requests).where(valid)


def _measured(rows: pd.DataFrame) -> pd.DataFrame:
    """The history's hours with requests and tokens: ``hour, requests, tokens, ratio``."""
    history = rows[rows["kind"] == "history"]
    valid = (history["value"] > 0) & (history["tokens"] > 0)
    kept = history[valid]
    return pd.DataFrame(
        {
            "hour": kept["hour"],
            "requests": kept["value"],
            "tokens": kept["tokens"],
            "ratio": kept["tokens"] / kept["value"],
        }
    )


def _by_hour_of_day(measured: pd.DataFrame, hours: pd.DatetimeIndex) -> pd.Series:
    """Per plan hour: the quantile of its hour of day's measured figures (module text)."""
    if measured.empty:
        return pd.Series(np.nan, index=hours)
    profile = measured.groupby(measured["hour"].dt.hour)["ratio"].quantile(HISTORY_QUANTILE)
    overall = float(measured["ratio"].quantile(HISTORY_QUANTILE))
    values = profile.reindex(hours.hour).fillna(overall).to_numpy(dtype=float)
    return pd.Series(values, index=hours)


def _mean(measured: pd.DataFrame) -> float | None:
    """Total tokens ÷ total requests over the window (busy hours weigh more)."""
    total = float(measured["requests"].sum())
    return float(measured["tokens"].sum()) / total if total > 0 else None
