"""A guard where a simple model wins: the anchored combination gives way to a baseline that
beats it by more than the folds' own noise.

The fixed combination (:mod:`forecasting.nested`) wins on average, but on a series where
tomorrow simply repeats the past — seasonal naive, or the operators' 7-day same-hour mean — it
can lose. The guard backtests both baselines on the combination's own folds (cheap: no fit to
speak of) and compares each fold's error with the combination's *nested* error on that fold.
A baseline is served only when the mean of the paired per-fold differences exceeds
the one-sided paired t critical value at ``GUARD_SIGNIFICANCE`` times their standard error
(a paired t-test: 2.13 standard errors on five folds), on ``MIN_FOLDS`` folds or more: one
lucky fold cannot overrule the combination, a consistent loss does. One standard error was
too lax: on the real-traffic bench it served seasonal naive on two Christmas-week days of the
bike-sharing series and cost that series 14 % WAPE.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache

import numpy as np
import pandas as pd

from .backtest import backtest
from .models.base import Forecaster
from .models.seasonal_ma import SeasonalMA
from .models.seasonal_naive import SeasonalNaive
from .race import fold_scores

__all__ = ["BASELINES", "GUARD_SIGNIFICANCE", "Guarded", "simple_guard"]

#: One-sided level of the paired t-test a baseline must pass to replace the combination.
GUARD_SIGNIFICANCE = 0.05
MIN_FOLDS = 3


def _mean_7d_same_hour() -> Forecaster:
    return SeasonalMA(days=7, trend=False)


#: The simple baselines, by what a reason calls them: (served model name, factory).
BASELINES: Mapping[str, tuple[str, Callable[[], Forecaster]]] = {
    "seasonal naive": ("seasonal_naive", SeasonalNaive),
    "7-day same-hour mean": ("seasonal_ma", _mean_7d_same_hour),
}


@cache
def _critical_t(degrees: int) -> float:
    """The one-sided ``GUARD_SIGNIFICANCE`` critical value of Student's t (computed once per
    number of folds)."""
    from scipy.stats import t as student_t  # heavy: imported when a series is guarded

    return float(student_t.ppf(1 - GUARD_SIGNIFICANCE, degrees))


@dataclass(frozen=True)
class Guarded:
    """The baseline to serve: its model name and factory, its backtest frame on the
    combination's folds (what the bands are calibrated on), and why."""

    name: str
    factory: Callable[[], Forecaster]
    frame: pd.DataFrame
    reason: str


def simple_guard(
    combination: pd.DataFrame,
    y: pd.Series,
    observed: pd.Series,
    histories: Mapping[int, pd.Series],
    ends: list[int],
    *,
    horizon: int,
    events: pd.DataFrame | None,
    metric: str,
) -> Guarded | None:
    """The baseline that beats the combination's nested backtest ``combination`` (long frame)
    beyond noise, the one with the lowest mean score when both do; None otherwise.

    ``histories`` and ``ends`` are the folds the candidates were raced on; the baselines run
    on those of them the combination was scored on."""
    combo = fold_scores(combination, observed, metric)
    cutoffs = set(combo.index)
    used = [end for end in ends if y.index[end - 1] in cutoffs]
    if len(used) < MIN_FOLDS:
        return None
    best: tuple[float, Guarded] | None = None
    for label, (name, factory) in BASELINES.items():
        try:
            frame = backtest(
                factory,
                y,
                horizon,
                events=events,
                observed=observed,
                histories=histories,
                ends=used,
            )
        except Exception:  # noqa: BLE001 - a baseline that cannot run guards nothing
            continue
        base = fold_scores(frame, observed, metric).reindex(combo.index)
        diff = (combo - base).to_numpy(dtype=float)
        diff = diff[np.isfinite(diff)]
        if len(diff) < MIN_FOLDS:
            continue
        mean, se = float(diff.mean()), float(diff.std(ddof=1) / math.sqrt(len(diff)))
        critical = _critical_t(len(diff) - 1)
        if mean <= 0 or mean <= critical * se:
            continue
        score = float(base.mean())
        reason = (
            f"{label} ({name}) served instead of the anchored combination: nested backtest "
            f"{metric} {score:.4g} against {float(combo.mean()):.4g} over {len(diff)} folds, "
            f"better by {mean:.3g} ± {se:.2g} per fold (paired t = {mean / max(se, 1e-12):.1f}, "
            f"above {critical:.2f}, the one-sided {GUARD_SIGNIFICANCE:.0%} level)"
        )
        if best is None or score < best[0]:
            best = (score, Guarded(name, factory, frame.assign(model=name), reason))
    return None if best is None else best[1]
