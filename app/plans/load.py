"""The actual load a replay runs against when only the stored hours are known."""

from __future__ import annotations

import numpy as np
import pandas as pd

from app.errors import InputError


def hourly_load(history: pd.DataFrame, tokens_per_req: float | None) -> pd.Series:
    """Tokens/s from stored hours on a 1-minute grid: each hour at its mean, except that when
    ``peak_rps`` is stored its busiest minute (taken as the hour's middle minute) runs at the
    peak (converted with that hour's own tokens per request) and the other 59 carry the rest
    of the hour's tokens. Missing hours are interpolated (at most 3 in a row, else the replay
    says so)."""
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
    tokens_h = tokens_h.interpolate(limit_direction="both")
    mean = tokens_h.to_numpy() / 3600.0
    requests = pd.to_numeric(frame["requests"], errors="coerce").to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        own = np.where(requests > 0, tokens_h.to_numpy() / requests, np.nan)
    per_req = np.where(np.isfinite(own), own, tokens_per_req or 0.0)
    peak = pd.to_numeric(frame["peak_rps"], errors="coerce").to_numpy(dtype=float) * per_req
    has_peak = np.isfinite(peak) & (peak > mean)
    rest = np.where(has_peak, np.clip((mean * 60 - peak) / 59, 0.0, None), mean)
    minutes = np.repeat(rest, 60)
    middle = np.arange(len(hours)) * 60 + 30
    minutes[middle] = np.where(has_peak, peak, mean)
    index = pd.date_range(hours[0], periods=len(minutes), freq="min")
    return pd.Series(minutes, index=index, name="tokens_per_s")
