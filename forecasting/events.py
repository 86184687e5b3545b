"""Business events (promotions, launches, holidays): validation and expected multipliers."""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import pandas as pd

from .errors import InvalidParameterError

__all__ = ["apply_multipliers", "event_hours", "validate_events"]

REQUIRED = ("name", "start", "end")


def validate_events(events: pd.DataFrame | None) -> pd.DataFrame | None:
    """Return a clean copy: ``name`` (str), ``start``/``end`` (UTC), ``multiplier`` (float/NaN).

    Naive timestamps are taken as UTC. Raises :class:`InvalidParameterError` for missing
    columns, unparsable times, ``end <= start`` or a non-positive multiplier.
    """
    if events is None or len(events) == 0:
        return None
    if not isinstance(events, pd.DataFrame):
        raise InvalidParameterError(f"events must be a DataFrame, got {type(events).__name__}")
    missing = [c for c in REQUIRED if c not in events.columns]
    if missing:
        raise InvalidParameterError(f"events lack column(s) {missing}; need name, start, end")
    out = pd.DataFrame({"name": events["name"].astype(str)})
    for column in ("start", "end"):
        try:
            out[column] = pd.to_datetime(events[column], utc=True)
        except (TypeError, ValueError) as exc:
            raise InvalidParameterError(f"events.{column} is not a timestamp: {exc}") from exc
    bad = out[out["end"] <= out["start"]]
    if len(bad):
        raise InvalidParameterError(
            f"event {bad['name'].iloc[0]!r} ends at or before it starts ({bad['start'].iloc[0]})"
        )
    if "multiplier" in events.columns:
        mult = pd.to_numeric(events["multiplier"], errors="coerce").astype(float)
        if (mult <= 0).any():
            raise InvalidParameterError("event multipliers must be positive (1.0 = no change)")
        out["multiplier"] = mult.to_numpy()
    else:
        out["multiplier"] = np.nan
    return out.reset_index(drop=True)


def event_hours(index: pd.DatetimeIndex, events: pd.DataFrame | None) -> np.ndarray:
    """Boolean mask of the hours of ``index`` that fall inside any event."""
    mask = np.zeros(len(index), dtype=bool)
    if events is not None:
        for start, end in zip(events["start"], events["end"], strict=True):
            mask |= (index >= start) & (index < end)
    return mask


_SCALED = ("yhat", "lo_80", "hi_80", "lo_95", "hi_95")
_QUANTILES = ("q50", "q60", "q70", "q80", "q90", "q95", "q99")


def apply_multipliers(
    frame: pd.DataFrame, events: pd.DataFrame | None, *, skip: Collection[str] = frozenset()
) -> tuple[pd.DataFrame, list[str]]:
    """Scale forecast rows inside events that carry a multiplier (names in ``skip`` excluded).

    Returns the scaled copy and one note per applied event.
    """
    out, notes = frame.copy(), list[str]()
    if events is None:
        return out, notes
    ds = pd.DatetimeIndex(out["ds"])
    for row in events.itertuples(index=False):
        if not np.isfinite(row.multiplier) or row.name in skip:
            continue
        mask = (ds >= row.start) & (ds < row.end)
        if mask.any():
            for column in _SCALED + tuple(c for c in out.columns if c in _QUANTILES):
                out.loc[mask, column] = out.loc[mask, column] * row.multiplier
            notes.append(
                f"event {row.name!r}: forecast x{row.multiplier:g} for {int(mask.sum())} hour(s)"
            )
    return out, notes
