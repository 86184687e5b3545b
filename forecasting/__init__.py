"""gpucast.forecasting — pure forecasting library (no web, database or settings code).

Hourly history in, a forecast with calibrated intervals out, the model for each series chosen
by how well it would have forecast that series' own past::

    from forecasting import auto_forecast
    result = auto_forecast(y, horizon=24, events=events)
    result.model, result.forecast, result.scores, result.notes

statsmodels and Prophet are imported lazily, on the first fit of a model that needs them.
"""

from .auto import auto_forecast
from .backtest import backtest
from .errors import (
    EmptySeriesError,
    ForecastingError,
    InsufficientHistoryError,
    InvalidParameterError,
    InvalidSeriesError,
    ModelFitError,
    NotFittedError,
    UnknownModelError,
)
from .events import validate_events
from .hygiene import CleanHistory, clean_history, detect_anomalies
from .metrics import (
    METRICS,
    coverage,
    mae,
    mase,
    pinball,
    rmse,
    smape,
    summarize,
    underprovision_rate,
    wape,
)
from .models import MODELS, Forecaster
from .selection import DEFAULT_MODELS, DEFAULT_WINDOWS, ForecastResult, select

__all__ = [
    "DEFAULT_MODELS",
    "DEFAULT_WINDOWS",
    "METRICS",
    "MODELS",
    "CleanHistory",
    "EmptySeriesError",
    "ForecastResult",
    "Forecaster",
    "ForecastingError",
    "InsufficientHistoryError",
    "InvalidParameterError",
    "InvalidSeriesError",
    "ModelFitError",
    "NotFittedError",
    "UnknownModelError",
    "auto_forecast",
    "backtest",
    "clean_history",
    "coverage",
    "detect_anomalies",
    "mae",
    "mase",
    "pinball",
    "rmse",
    "select",
    "smape",
    "summarize",
    "underprovision_rate",
    "validate_events",
    "wape",
]
