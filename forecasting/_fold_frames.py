"""Folds of backtest frames picked and combined without a frame per fold (private).

The nested selection (:mod:`forecasting.nested`) takes one fold of a candidate's backtest
frame at a time and combines folds of several candidates. Done with a boolean filter, a
``reset_index`` and a combined frame per fold, the pandas steps cost more than the
arithmetic; here the rows are located on the cutoff stamps once per frame, every fold's
values are combined exactly as :func:`forecasting.models.ensemble.combine` combines them
(same arrays, same shapes, same numpy calls), and one frame is built at the end.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from .models.ensemble import VALUE_COLUMNS, combined_values

#: One fold of one backtest frame: the frame and the positions of that fold's rows.
FoldRows = tuple[pd.DataFrame, np.ndarray]


class FoldIndex:
    """Positions of each fold's rows in one backtest frame."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame
        self._stamps = frame["cutoff"].to_numpy(dtype="datetime64[ns]")

    def rows(self, cutoff: pd.Timestamp) -> FoldRows:
        """What ``frame[frame["cutoff"] == cutoff]`` selects, as positions."""
        return self.frame, np.flatnonzero(self._stamps == cutoff.to_datetime64())


def taken(folds: Sequence[FoldRows]) -> pd.DataFrame:
    """``pd.concat`` of the folds' rows, one after the other, on a fresh RangeIndex."""
    pool: list[pd.DataFrame] = []
    offsets: dict[int, int] = {}
    size = 0
    for frame, _ in folds:
        if id(frame) not in offsets:
            offsets[id(frame)] = size
            pool.append(frame)
            size += len(frame)
    whole = pool[0] if len(pool) == 1 else pd.concat(pool, ignore_index=True)
    positions = np.concatenate([offsets[id(frame)] + rows for frame, rows in folds])
    return whole.take(positions).reset_index(drop=True)


def combined(
    folds: Sequence[Sequence[FoldRows]], weights: Sequence[float] | None = None
) -> pd.DataFrame:
    """``pd.concat([combine([each member's fold], weights) for each fold], ignore_index=True)``:
    per fold the members' value columns combined, the other columns of the fold's first
    member."""
    out = taken([members[0] for members in folds])
    for column in VALUE_COLUMNS:
        parts = [
            combined_values([frame[column].to_numpy()[rows] for frame, rows in members], weights)
            for members in folds
        ]
        out[column] = np.concatenate(parts)
    return out
