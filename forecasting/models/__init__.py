"""The model registry: ``MODELS[name]()`` builds a fresh, unfitted forecaster.

Names, from the simplest to the most complex (ties in model selection go to the simpler):
``profile_level`` (the robust baseline), ``seasonal_naive``, ``seasonal_ma``,
``seasonal_ma_weekly``, ``arima``, ``prophet``, ``ensemble``. Adapters for statsmodels and
Prophet import those libraries only when fitted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from .arima import Arima
from .base import Forecaster
from .ensemble import Ensemble
from .profile_level import ProfileLevel
from .prophet import ProphetModel
from .seasonal_ma import SeasonalMA, SeasonalMAWeekly
from .seasonal_naive import SeasonalNaive

__all__ = [
    "MODELS",
    "Arima",
    "Ensemble",
    "Forecaster",
    "ProfileLevel",
    "ProphetModel",
    "SeasonalMA",
    "SeasonalMAWeekly",
    "SeasonalNaive",
]

MODELS: Mapping[str, Callable[[], Forecaster]] = MappingProxyType(
    {
        "profile_level": ProfileLevel,
        "seasonal_naive": SeasonalNaive,
        "seasonal_ma": SeasonalMA,
        "seasonal_ma_weekly": SeasonalMAWeekly,
        "arima": Arima,
        "prophet": ProphetModel,
        "ensemble": Ensemble,
    }
)
