"""What an imported load-test table says about itself beyond its rows: notes kept with the
table (and shown with the profile) where its statistics are not what the SLO model assumes."""

from __future__ import annotations

import numpy as np
import pandas as pd


def pooled_tpot_notes(frame: pd.DataFrame, load: str) -> list[str]:
    """A note when p95 TPOT lies below the mean TPOT (by more than 1 %) in some rows: the
    mean is then carried by rare long gaps the p95 does not see. That is what a p95 over the
    gaps between streamed tokens of all requests pooled gives (genai-perf computed it so before
    its change #694, June 2024): prefill stalls are missed while under 5 % of the gaps. The SLO
    model fits it as a p95 over requests and carries it into too low a p95 TPOT at
    decode-heavy mixes (bench/RESULTS.md, issue 32, genai-perf's statistic)."""
    p95, mean = frame["tpot_p95_s"].to_numpy(float), frame["tpot_mean_s"].to_numpy(float)
    ratio = np.where(np.isfinite(p95) & np.isfinite(mean) & (mean > 0), p95 / mean, np.nan)
    below = np.flatnonzero(ratio < 0.99)
    if not below.size:
        return []
    worst = int(below[np.argmin(ratio[below])])
    row = frame.iloc[worst]
    return [
        f"p95 TPOT below its mean in {below.size} of {np.isfinite(ratio).sum()} rows (e.g. "
        f"{row['prompt_tokens']:g}/{row['completion_tokens']:g} at {load} {row[load]:g}: p95 "
        f"{row['tpot_p95_s'] * 1000:.3g} ms, mean {row['tpot_mean_s'] * 1000:.3g} ms): rare "
        "long gaps carry the mean and the p95 does not see them, as when the tool takes the "
        "p95 over the gaps between streamed tokens of all requests pooled (genai-perf before "
        "its change #694, June 2024); the SLO model reads it as a p95 over requests, so "
        "capacity at TPOT-bound, decode-heavy mixes may be over-stated — check them with a "
        "load test at the mix"
    ]
