"""Model selection by rolling-origin backtest: :func:`auto_forecast` and :func:`select`."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .errors import (
    InsufficientHistoryError,
    InvalidParameterError,
    UnknownModelError,
)
from .models import MODELS
from .models.base import Forecaster

__all__ = ["DEFAULT_MODELS", "DEFAULT_WINDOWS", "ForecastResult", "select"]

logger = logging.getLogger(__name__)

DEFAULT_MODELS = (
    "profile_level",
    "seasonal_naive",
    "seasonal_ma",
    "seasonal_ma_weekly",
    "arima",
    "prophet",
    "ensemble",
)
DEFAULT_WINDOWS = 5
MIN_TRAIN_HOURS = 24
SCORE_COLUMNS = (
    "model",
    "status",
    "reason",
    "mase",
    "mae",
    "rmse",
    "smape",
    "wape",
    "coverage_80",
    "coverage_95",
    "pinball_90",
    "underprovision_rate_80",
    "underprovision_rate_95",
    "n_points",
    "n_windows",
    "cpu_seconds",
    "selected",
)


@dataclass
class ForecastResult:
    """What :func:`auto_forecast` found.

    ``model``: chosen candidate name. ``forecast``: ``horizon`` rows of
    ``ds, yhat, lo_80, hi_80, lo_95, hi_95`` (UTC, non-negative, intervals calibrated).
    ``scores``: one row per candidate (``SCORE_COLUMNS``; status ok/failed/skipped, reason).
    ``forecast`` also carries the quantile columns ``q50 … q99`` when ``state`` exists.
    ``notes``: data issues and decisions, for operators. ``anomalies``: flagged hours
    (:func:`forecasting.detect_anomalies` columns). ``backtest``: the winner's backtest frame.
    """

    model: str
    forecast: pd.DataFrame
    scores: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    anomalies: pd.DataFrame = field(default_factory=pd.DataFrame)
    backtest: pd.DataFrame = field(default_factory=pd.DataFrame)
    reason: str = ""
    #: What :func:`forecasting.refresh` needs to condition the model on newer hours (JSON
    #: values), or None when the chosen model cannot be refreshed.
    state: dict | None = None

    def scores_records(self) -> list[dict]:
        """``scores`` as JSON-ready dicts (NaN → ``None``, numpy scalars → Python)."""
        records = []
        for row in self.scores.to_dict(orient="records"):
            clean = {}
            for key, value in row.items():
                if isinstance(value, np.generic):
                    value = value.item()
                if isinstance(value, float) and not math.isfinite(value):
                    value = None
                clean[key] = value
            records.append(clean)
        return records


def _resolve(models: Sequence[str] | Mapping[str, Callable[[], Forecaster]] | None) -> dict:
    if models is None:
        return {name: MODELS[name] for name in DEFAULT_MODELS}
    if isinstance(models, Mapping):
        return dict(models)
    if isinstance(models, str):
        models = [models]
    unknown = [name for name in models if name not in MODELS]
    if unknown:
        raise UnknownModelError(f"unknown model(s) {unknown}; choose from {sorted(MODELS)}")
    if not models:
        raise InvalidParameterError("models must name at least one candidate")
    return {name: MODELS[name] for name in models}


def _complexity(name: str, factories: Mapping[str, Callable[[], Forecaster]]) -> int:
    factory = factories.get(name)
    return getattr(factory, "complexity", 100) if factory is not None else 100


def select(
    scores: pd.DataFrame,
    metric: str = "mase",
    *,
    complexity: Mapping[str, int] | None = None,
    tie_tolerance: float = 0.0,
) -> tuple[str, str]:
    """Pick the ``status == "ok"`` row with the lowest ``metric``; return ``(name, reason)``.

    Candidates within ``tie_tolerance`` (relative) of the best count as tied, and ties go to
    the simpler model (lower ``complexity``, then earlier row). Raises
    :class:`InsufficientHistoryError` when no candidate has a finite score.
    """
    ok = scores[(scores["status"] == "ok") & np.isfinite(scores[metric].astype(float))]
    if ok.empty:
        raise InsufficientHistoryError("no candidate produced a finite backtest score")
    best = float(ok[metric].min())
    tied = ok[ok[metric] <= best + abs(best) * tie_tolerance + 1e-12]
    rank = complexity or {}
    order = sorted(range(len(tied)), key=lambda i: (rank.get(tied["model"].iloc[i], 100), i))
    name = str(tied["model"].iloc[order[0]])
    value = float(tied[metric].iloc[order[0]])
    reason = f"lowest backtest {metric} ({value:.4g}) among {len(ok)} candidate(s)"
    if len(tied) > 1:
        reason += f"; tied with {sorted(set(tied['model']) - {name})}, chose the simpler"
    return name, reason
