"""Backtest racing: every candidate on the two most recent folds, the losers stop there.

Successive halving with one cut: after the first round only the better half of the
candidates (by mean score over those folds; with four candidates or more) goes on, and never
one more than ``RACE_MARGIN`` times the best score. The candidates named in ``keep`` (the
anchor of the combination, :mod:`forecasting.nested`) always go on: two folds are too few to
drop it — on M4 Hourly the series where ARIMA was raced out by the margin forecast worse
without it (MASE 0.841 → 0.800 on 104 series with the anchor kept and refitted). The others
are *raced out* (reported as skipped, with their first-round score).
Expensive candidates (``expensive = True``: Prophet) run after the cheap ones, on the most
recent fold first, and go on to the second only within ``RACE_MARGIN`` of the best cheap
score on that fold: a clear loser costs one fit instead of five. Every fold trains on its own
causally cleaned history (:func:`forecasting.backtest.fold_histories`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .backtest import backtest
from .errors import InsufficientHistoryError
from .metrics import fold_codes, mase_scale, summarize
from .models.base import Forecaster

__all__ = ["RACE_FOLDS", "RACE_MARGIN", "Entry", "fold_scores", "race"]

logger = logging.getLogger(__name__)

RACE_FOLDS = 2
DAY = 24
#: A candidate more than this many times the best first-round score stops after round one.
RACE_MARGIN = 1.3
#: With fewer candidates than this, only the margin races out (halving two or three would
#: decide on two folds what the race leaves to five).
HALVE_FROM = 4


@dataclass
class Entry:
    """One candidate's backtest: ``frame`` (long, all folds run), ``scores`` (metric per fold,
    indexed by cutoff), ``status`` ok / skipped / failed, ``reason``, ``cpu_seconds``."""

    name: str
    status: str = "ok"
    reason: str | None = None
    frame: pd.DataFrame = field(default_factory=pd.DataFrame)
    scores: pd.Series = field(default_factory=lambda: pd.Series(dtype=float))
    cpu_seconds: float = 0.0
    fitted: Forecaster | None = None  # the model of the oldest fold run (warm starts)
    fitted_end: int = 0
    last: Forecaster | None = None  # the model of the most recent fold (the final refit)
    last_end: int = 0


def fold_scores(frame: pd.DataFrame, observed: pd.Series, metric: str) -> pd.Series:
    """``metric`` of every fold of a backtest frame, indexed by cutoff (oldest first)."""
    if metric == "mase":
        return _fold_mase(frame, observed)
    values = {
        cutoff: summarize(group, observed)[metric]
        for cutoff, group in frame.groupby("cutoff", sort=True)
    }
    return pd.Series(values, dtype=float)


def _fold_mase(frame: pd.DataFrame, observed: pd.Series) -> pd.Series:
    """Per-fold MASE as :func:`forecasting.metrics.summarize` computes it (each fold scaled
    by the history up to its cutoff), from cumulative sums: no pass over the history per fold."""
    x = observed.to_numpy(dtype=float)
    diffs = np.abs(x[DAY:] - x[:-DAY])
    finite = np.isfinite(diffs)
    total = np.concatenate([[0.0], np.cumsum(np.where(finite, diffs, 0.0))])
    count = np.concatenate([[0], np.cumsum(finite)])
    # the folds' rows by factorised cutoff (as groupby would group them, without its frames)
    codes, cutoffs = fold_codes(frame)
    ends = observed.index.searchsorted(cutoffs, side="right")  # hours <= each cutoff
    actual = frame["y"].to_numpy(dtype=float)
    predicted = frame["yhat"].to_numpy(dtype=float)
    values = []
    for k in range(len(cutoffs)):
        end = int(ends[k])
        pairs = max(0, end - DAY)
        if pairs and count[pairs] and total[pairs] > 0:
            scale = total[pairs] / count[pairs]
        else:
            scale = mase_scale(x[:end])
        rows = codes == k
        y, yhat = actual[rows], predicted[rows]
        ok = np.isfinite(y) & np.isfinite(yhat)
        values.append(float(np.mean(np.abs(y[ok] - yhat[ok])) / scale) if ok.any() else np.nan)
    if not values:
        return pd.Series({}, dtype=float)
    return pd.Series(values, index=cutoffs, dtype=float)


def race(
    factories: Mapping[str, Callable[[], Forecaster]],
    y: pd.Series,
    observed: pd.Series,
    histories: Mapping[int, pd.Series],
    ends: list[int],
    *,
    horizon: int,
    events: pd.DataFrame | None,
    metric: str,
    keep: Collection[str] = (),
) -> list[Entry]:
    """Race the candidates over the folds of training lengths ``ends`` (oldest first).

    A candidate runs on the folds long enough for its minimum history, and is skipped when
    that leaves it fewer than half of them.
    """
    needed = -(-len(ends) // 2)
    entries: list[Entry] = []
    own: dict[str, list[int]] = {}
    expensive: list[tuple[Entry, list[int]]] = []
    run_args = (y, observed, histories, horizon, events, metric)
    for name, factory in factories.items():
        entry = Entry(name)
        entries.append(entry)
        least = factory().min_history()
        own[name] = [end for end in ends if end >= least]
        if len(own[name]) < needed:
            entry.status = "skipped"
            entry.reason = (
                f"{name} needs {least} h of training history; {len(y)} h leave it "
                f"{len(own[name])} of {len(ends)} backtest windows of {horizon} h"
            )
            continue
        first = own[name][-RACE_FOLDS:]
        if getattr(factory(), "refilter", False) and own[name][0] not in first:
            # refits are cheap after one fit: start from the oldest fold, so that every later
            # fold (the race's and, if it survives, the rest) filters with its parameters
            first = [own[name][0], *first]
        if getattr(factory, "expensive", False) or getattr(factory(), "expensive", False):
            expensive.append((entry, first))
            continue
        _run(entry, factories[name], y, observed, histories, first, horizon, events, metric)
    for entry, first in expensive:
        _run_expensive(entry, factories[entry.name], entries, first, keep, run_args)
    _cut(entries, keep)
    for entry in entries:
        done = set(entry.scores.index) if entry.status == "ok" else set()
        rest = [end for end in own[entry.name] if y.index[end - 1] not in done]
        if entry.status == "ok" and rest:
            _run(
                entry, factories[entry.name], y, observed, histories, rest, horizon, events, metric
            )
    return entries


def _run_expensive(
    entry: Entry,
    factory: Callable[[], Forecaster],
    entries: list[Entry],
    first: list[int],
    keep: Collection[str],
    run_args: tuple,
) -> None:
    """The first round of an expensive candidate (Prophet), after the cheap ones: the most
    recent fold, then the others only if that fold's score is within ``RACE_MARGIN`` of the
    best cheap candidate's on the same fold — a clear loser costs one fit, not two."""
    y, observed, histories, horizon, events, metric = run_args
    latest = first[-1:]
    _run(entry, factory, y, observed, histories, latest, horizon, events, metric)
    if entry.status != "ok" or entry.scores.empty:
        return
    cutoff = entry.scores.index[-1]
    rivals = [
        float(e.scores[cutoff])
        for e in entries
        if e is not entry and e.status == "ok" and cutoff in e.scores.index
    ]
    finite = [v for v in rivals if np.isfinite(v)]
    value = float(entry.scores[cutoff])
    if entry.name not in keep and finite and not value <= RACE_MARGIN * min(finite) + 1e-12:
        entry.status = "skipped"
        entry.reason = (
            f"raced out after 1 fold: {value:.4g} against the best {min(finite):.4g} "
            f"(more than ×{RACE_MARGIN:g}; an expensive candidate runs its second fold only "
            "within the margin)"
        )
        return
    if first[:-1]:
        _run(entry, factory, y, observed, histories, first[:-1], horizon, events, metric)


def _run(
    entry: Entry,
    factory: Callable[[], Forecaster],
    y: pd.Series,
    observed: pd.Series,
    histories: Mapping[int, pd.Series],
    ends: list[int],
    horizon: int,
    events: pd.DataFrame | None,
    metric: str,
) -> None:
    """Backtest ``entry`` on the folds ``ends``; merge into its frame and scores. The first
    fold warm-starts from the entry's oldest fitted fold (when it is older)."""
    started = time.process_time()
    previous = entry.fitted if entry.fitted is not None and entry.fitted_end < ends[0] else None
    fitted: list[Forecaster] = []
    try:
        frame = backtest(
            factory,
            y,
            horizon,
            windows=len(ends),
            events=events,
            observed=observed,
            histories=histories,
            ends=ends,
            previous=previous,
            fitted=fitted,
        )
    except InsufficientHistoryError as exc:
        entry.status, entry.reason = "skipped", str(exc)
        return
    except Exception as exc:  # noqa: BLE001 - one bad candidate must not sink the batch
        logger.debug("candidate %s failed", entry.name, exc_info=True)
        entry.status, entry.reason = "failed", f"{type(exc).__name__}: {exc}"
        return
    finally:
        entry.cpu_seconds += time.process_time() - started
    if entry.fitted is None or ends[0] < entry.fitted_end:
        entry.fitted, entry.fitted_end = fitted[0], ends[0]
    entry.last = fitted[-1] if entry.last is None or ends[-1] > entry.last_end else entry.last
    entry.last_end = max(entry.last_end, ends[-1])
    frame["model"] = entry.name
    entry.frame = _merged(entry.frame, frame)
    entry.scores = fold_scores(entry.frame, observed, metric)


def _merged(old: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """Two backtest frames of different folds as one sorted by cutoff and step — as
    concatenating and sorting them would, without the sort when the folds of one all precede
    the other's (how the race adds folds)."""
    if new.empty:
        old, new = new, old
    if old.empty:
        return new if _in_order(new) else new.sort_values(["cutoff", "step"], ignore_index=True)
    if _in_order(old) and _in_order(new):
        if _cutoffs(new)[0] > _cutoffs(old)[-1]:
            return pd.concat([old, new], ignore_index=True)
        if _cutoffs(new)[-1] < _cutoffs(old)[0]:
            return pd.concat([new, old], ignore_index=True)
    merged = pd.concat([old, new], ignore_index=True)
    return merged.sort_values(["cutoff", "step"], ignore_index=True)


def _cutoffs(frame: pd.DataFrame) -> np.ndarray:
    return frame["cutoff"].to_numpy(dtype="datetime64[ns]")


def _in_order(frame: pd.DataFrame) -> bool:
    """Whether the rows are sorted by (cutoff, step), each pair once, on a RangeIndex."""
    cutoff, step = _cutoffs(frame), frame["step"].to_numpy()
    later = cutoff[1:] > cutoff[:-1]
    same = cutoff[1:] == cutoff[:-1]
    return (
        isinstance(frame.index, pd.RangeIndex)
        and frame.index.start == 0
        and frame.index.step == 1
        and bool((later | (same & (step[1:] > step[:-1]))).all())
    )


def _on(scores: pd.Series, cutoffs: set) -> pd.Series:
    """``scores[sorted(cutoffs)]``: a mask when the index is sorted and unique (the same
    values in the same order, without looking the labels up one by one)."""
    index = scores.index
    if index.is_monotonic_increasing and index.is_unique:
        return scores[index.isin(list(cutoffs))]
    return scores[sorted(cutoffs)]


def _cut(entries: list[Entry], keep: Collection[str]) -> None:
    """Race out the worse half, and every candidate far behind the best first-round score
    (never one named in ``keep`` that scored)."""
    ok = [e for e in entries if e.status == "ok" and np.isfinite(e.scores).any()]
    if len(ok) < 2:
        return
    common = set.intersection(*(set(e.scores.index) for e in ok))
    if not common:
        return
    means = {e.name: float(_on(e.scores, common).mean()) for e in ok}
    best = min(means.values())
    if not np.isfinite(best):
        return
    ranked = sorted(means, key=lambda name: means[name])
    halve = len(ranked) >= HALVE_FROM
    half = set(ranked[: -(-len(ranked) // 2)] if halve else ranked) | set(keep)
    for entry in ok:
        value = means[entry.name]
        if entry.name in keep and np.isfinite(value):
            continue
        if not np.isfinite(value) or value > RACE_MARGIN * best + 1e-12:
            entry.status = "skipped"
            entry.reason = (
                f"raced out after {len(common)} fold(s): {value:.4g} against the best "
                f"{best:.4g} (more than ×{RACE_MARGIN:g})"
            )
        elif entry.name not in half:
            entry.status = "skipped"
            entry.reason = (
                f"raced out after {len(common)} fold(s): {value:.4g}, not in the better half "
                f"(rank {ranked.index(entry.name) + 1} of {len(ranked)})"
            )
