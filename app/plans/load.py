"""The actual load a replay runs against when only the stored hours are known."""

from __future__ import annotations

import numpy as np
import pandas as pd

from app.errors import InputError
from app.plans.sizing import known_tokens_per_request, token_hours


def hourly_load(history: pd.DataFrame, tokens_per_req: float | None) -> pd.Series:
    """Tokens/s from stored hours on a 1-minute grid: each hour at its mean, except that when
    ``peak_rps`` is stored its busiest minute (taken as the hour's middle minute) runs at the
    peak (converted with that hour's own tokens per request) and the other 59 carry the rest
    of the hour's tokens. Missing hours take the hour before (at most 3 in a row, else the
    replay says so), and an hour without its own tokens per request the one known before it
    (:func:`known_tokens_per_request`; ``tokens_per_req`` when the series has no token
    counts): a minute's load never depends on a later hour."""
    frame = history.set_index("hour").sort_index()
    hours = pd.date_range(frame.index[0], frame.index[-1], freq="h")
    frame = frame.reindex(hours)
    if frame["total_tokens"].notna().any():
        tokens_h = frame["total_tokens"].astype(float)
    elif tokens_per_req is not None:
        tokens_h = frame["requests"].astype(float) * tokens_per_req
    else:
        raise InputError("the series has neither token counts nor tokens per request to replay")
    gaps = tokens_h.isna()
    if gaps.rolling(4).sum().max() >= 4:
        raise InputError("the stored history has gaps of 4 hours or more; give --load instead")
    tokens_h = tokens_h.ffill().bfill()
    mean = tokens_h.to_numpy() / 3600.0
    requests = pd.to_numeric(frame["requests"], errors="coerce").to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        own = np.where(requests > 0, tokens_h.to_numpy() / requests, np.nan)
    fallback: float | np.ndarray = tokens_per_req or 0.0
    if not token_hours(history).empty:
        fallback = known_tokens_per_request(history, hours, series_name="the replayed series")
    per_req = np.where(np.isfinite(own), own, fallback)
    peak = pd.to_numeric(frame["peak_rps"], errors="coerce").to_numpy(dtype=float) * per_req
    has_peak = np.isfinite(peak) & (peak > mean)
    rest = np.where(has_peak, np.clip((mean * 60 - peak) / 59, 0.0, None), mean)
    minutes = np.repeat(rest, 60)
    middle = np.arange(len(hours)) * 60 + 30
    minutes[middle] = np.where(has_peak, peak, mean)
    index = pd.date_range(hours[0], periods=len(minutes), freq="min")
    return pd.Series(minutes, index=index, name="tokens_per_s")
