"""Exceptions raised by :mod:`forecasting`.

Every error is a :class:`ForecastingError`; each leaf also subclasses the matching builtin so
that callers who only know Python's own exceptions still catch it::

    ForecastingError
    ├── InvalidSeriesError(ValueError)       history is not a usable hourly series
    │   └── EmptySeriesError                 no finite observation at all
    ├── InsufficientHistoryError(ValueError) too few hours for a model or a backtest
    ├── InvalidParameterError(ValueError)    bad horizon, window count, metric, events …
    │   └── UnknownModelError                a model name that is not in ``MODELS``
    ├── NotFittedError(RuntimeError)         ``predict`` called before ``fit``
    └── ModelFitError(RuntimeError)          a model raised or did not converge
"""

from __future__ import annotations

__all__ = [
    "EmptySeriesError",
    "ForecastingError",
    "InsufficientHistoryError",
    "InvalidParameterError",
    "InvalidSeriesError",
    "ModelFitError",
    "NotFittedError",
    "UnknownModelError",
]


class ForecastingError(Exception):
    """Base class of every error raised by the forecasting library."""


class InvalidSeriesError(ForecastingError, ValueError):
    """The history is not a non-negative float series on an hourly UTC index."""


class EmptySeriesError(InvalidSeriesError):
    """The history holds no finite observation."""


class InsufficientHistoryError(ForecastingError, ValueError):
    """Too few hours of history for a model or for the requested backtest."""


class InvalidParameterError(ForecastingError, ValueError):
    """An argument (horizon, windows, metric, events …) is out of range or malformed."""


class UnknownModelError(InvalidParameterError):
    """A model name that is not registered in ``forecasting.MODELS``."""


class NotFittedError(ForecastingError, RuntimeError):
    """``predict`` was called on a forecaster that has not been fitted."""


class ModelFitError(ForecastingError, RuntimeError):
    """A model raised while fitting or predicting, or its optimiser did not converge."""
