"""``prophet`` — Prophet with daily and weekly seasonality and business events.

* Seasonality: daily always, weekly from two weeks of history on; yearly never (the service
  forecasts a day ahead from weeks of history).
* Additive or multiplicative: with ``seasonality_mode="auto"`` the seasonality is
  multiplicative when the daily swing grows with the daily level (correlation of the daily
  standard deviation with the daily mean above 0.5, and the daily mean moving by more than
  10 %) — typical of traffic that grows — and additive otherwise.
* Events: Prophet's own holidays are whole calendar days, while gpucast events are hour ranges,
  so every event name seen in the history becomes a 0/1 holiday regressor over its hours (with
  ``holidays_prior_scale``). Names without any past occurrence cannot be learnt; the selection
  layer applies their ``multiplier`` instead.
* Speed: MAP fit, ``uncertainty_samples=0`` (bands come from in-sample residual quantiles
  and are calibrated by the backtest), warm start from the previous backtest window's
  parameters. The posterior mode of Prophet's model is computed in process
  (:mod:`._prophet_map`: profiled noise scale, proximal Gauss-Newton steps with the lasso on
  the changepoints kept exact) — at least as good a mode as cmdstan's L-BFGS finds, for a
  fraction of its CPU and without a child process; when it does not converge, Prophet's Stan
  model and optimiser run instead (called directly with fast JSON, :mod:`._prophet_backend`),
  and ``optimiser="stan"`` asks for them always. The Stan inputs and the forecast are built
  with numpy (:mod:`._prophet_design`) instead of Prophet's pandas front end — the same data
  as Prophet's; :meth:`ProphetModel.reference` gives the equivalent ``Prophet`` object.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd

from .._quiet import captured, operator_notes
from .._series import future_index
from ..errors import ModelFitError
from ..intervals import residual_bands
from ._prophet_design import Design, nanoseconds
from ._prophet_map import NotConverged, map_estimate
from ._shape import choose_seasonality_mode
from .base import Bands, Forecaster, steps_ahead_in_seasons

logger = logging.getLogger(__name__)

DAY = 24
WEEK = 168
RESIDUAL_HOURS = 2 * WEEK
#: Hours after the fit predicted together with the in-sample residual window (one call to
#: Prophet's predict, whose feature building is most of its cost): the backtest's horizon,
#: M4's 48 and the 72 h path of the refresh state are served from it.
AHEAD_HOURS = 72
#: How the posterior mode is found: in process (falling back to Stan), or by Prophet's Stan
#: optimiser.
OPTIMISERS = ("map", "stan")
_LOGGERS = ("prophet", "prophet.models", "prophet.forecaster", "prophet.plot", "cmdstanpy")


def _import_prophet() -> tuple[type, type]:
    with captured(*_LOGGERS):
        from prophet import Prophet

        from ._prophet_backend import FastCmdStanBackend
    return Prophet, FastCmdStanBackend


def event_columns(ds: pd.DatetimeIndex, events: pd.DataFrame | None) -> pd.DataFrame:
    """One 0/1 column per event name: 1 in the hours ``start <= ds < end`` of that event."""
    columns: dict[str, np.ndarray] = {}
    if events is not None:
        for name, group in events.groupby("name", sort=True):
            flag = np.zeros(len(ds))
            for start, end in zip(group["start"], group["end"], strict=True):
                flag[(ds >= start) & (ds < end)] = 1.0
            columns[f"event_{name}"] = flag
    return pd.DataFrame(columns, index=range(len(ds)))


class ProphetModel(Forecaster):
    """Prophet (MAP fit) with daily/weekly seasonality and events as hourly holidays."""

    name = "prophet"
    complexity = 4
    handles_events = True
    expensive = True

    def __init__(
        self,
        *,
        seasonality_mode: str = "auto",
        changepoint_prior_scale: float = 0.05,
        seasonality_prior_scale: float = 10.0,
        holidays_prior_scale: float = 10.0,
        daily_fourier_order: int = 10,
        weekly_fourier_order: int = 5,
        max_history: int = 8 * WEEK,
        optimiser: str = "map",
    ) -> None:
        if optimiser not in OPTIMISERS:
            raise ValueError(f"optimiser must be one of {OPTIMISERS}, got {optimiser!r}")
        self.optimiser = optimiser
        self.seasonality_mode = seasonality_mode
        self.changepoint_prior_scale = changepoint_prior_scale
        self.seasonality_prior_scale = seasonality_prior_scale
        self.holidays_prior_scale = holidays_prior_scale
        self.daily_fourier_order = daily_fourier_order
        self.weekly_fourier_order = weekly_fourier_order
        self.max_history = max_history
        self._init: dict | None = None

    def min_history(self) -> int:
        return 2 * DAY

    def warm_start(self, previous: Forecaster, *, refit: bool = False) -> None:
        params = getattr(previous, "params_", None)
        if params is None:
            return
        self._init = {name: float(params[name][0][0]) for name in ("k", "m", "sigma_obs")}
        self._init.update({name: params[name][0] for name in ("delta", "beta")})

    def _design(self, values: np.ndarray, events_frame: pd.DataFrame) -> Design:
        """The model as Prophet would be configured (see :meth:`reference`)."""
        mode = self.seasonality_mode
        if mode == "auto":
            mode = choose_seasonality_mode(values)
        seasonalities = [(1.0, self.daily_fourier_order, self.seasonality_prior_scale)]
        if len(values) >= 2 * WEEK:
            seasonalities.append((7.0, self.weekly_fourier_order, self.seasonality_prior_scale))
        self.mode_ = mode
        return Design(
            mode=mode,
            seasonalities=seasonalities,
            regressor_scales=[self.holidays_prior_scale] * events_frame.shape[1],
            changepoint_prior_scale=self.changepoint_prior_scale,
        )

    def reference(self, values: np.ndarray, events_frame: pd.DataFrame) -> Any:
        """An unfitted ``Prophet`` configured as this model fits (the fit itself builds the
        same inputs with :mod:`._prophet_design`; the tests compare the two)."""
        prophet_cls, backend_cls = _import_prophet()
        design = self._design(values, events_frame)
        model = prophet_cls(
            growth="linear",
            daily_seasonality=False,
            weekly_seasonality=False,
            yearly_seasonality=False,
            seasonality_mode=design.mode,
            changepoint_prior_scale=self.changepoint_prior_scale,
            uncertainty_samples=0,
        )
        model.stan_backend = backend_cls()
        names = ("daily", "weekly")[: len(design.seasonalities)]
        for name, (period, order, prior) in zip(names, design.seasonalities, strict=True):
            model.add_seasonality(name, period=period, fourier_order=order, prior_scale=prior)
        for column in events_frame.columns:
            model.add_regressor(column, prior_scale=self.holidays_prior_scale, standardize=False)
        return model

    def _fit(
        self, values: np.ndarray, index: pd.DatetimeIndex, events: pd.DataFrame | None
    ) -> None:
        values, index = values[-self.max_history :], index[-self.max_history :]
        flags = event_columns(index, events)
        flags = flags.loc[:, flags.sum() > 0]
        self.event_names_ = list(flags.columns)
        self.events_ = events
        design = self._design(values, flags)
        ns = nanoseconds(index)
        data, init = design.stan_inputs(ns, values, flags.to_numpy(dtype=float))
        self.params_ = self._optimise(data, init, constant=bool(np.ptp(values) == 0))
        if not design.has_changepoints:  # as Prophet: the dummy changepoint's slope into k
            self.params_["k"] = self.params_["k"] + self.params_["delta"].reshape(-1)
            self.params_["delta"] = np.zeros(self.params_["delta"].shape).reshape((-1, 1))
        self.design_ = design
        # residual quantiles for the bands need only the recent past; the hours ahead are
        # served from the same evaluation
        recent = slice(max(0, len(values) - RESIDUAL_HOURS), len(values))
        ahead = future_index(index[-1], AHEAD_HOURS)
        rows = np.concatenate([ns[recent], nanoseconds(ahead)])
        row_flags = np.concatenate(
            [flags.to_numpy(dtype=float)[recent], self._flags(ahead)], axis=0
        )
        yhat = design.yhat(self.params_, rows, row_flags)
        n_recent = recent.stop - recent.start
        self.residuals_ = values[recent] - yhat[:n_recent]
        self.ahead_ = yhat[n_recent:]

    def _optimise(self, data: dict, init: dict, *, constant: bool) -> dict[str, np.ndarray]:
        """MAP parameters of Prophet's model (Prophet's shortcut for a constant history: the
        initial values), each shaped ``(1, n)`` as Prophet keeps them."""
        if constant:
            params = {**init, "sigma_obs": 1e-9}
            return {k: np.array(v).reshape((1, -1)) for k, v in params.items()}
        if self.optimiser == "map":
            start = dict(init)
            for name, value in (self._init or {}).items():  # warm values that fit the data
                if np.shape(value) == np.shape(init[name]):
                    start[name] = value
            try:
                return map_estimate(data, start)
            except (NotConverged, np.linalg.LinAlgError) as exc:
                logger.debug("prophet: in-process MAP failed (%s); running Stan's optimiser", exc)
        return self._optimise_with_stan(data, init)

    def _optimise_with_stan(self, data: dict, init: dict) -> dict[str, np.ndarray]:
        _, backend_cls = _import_prophet()
        kwargs = {"init": self._init} if self._init is not None else {}
        with captured(*_LOGGERS) as lines:
            try:
                params = backend_cls().fit(init, data, **kwargs)
            except RuntimeError as exc:
                raise ModelFitError(f"prophet: optimisation failed: {exc}") from exc
        self.notes_.extend(operator_notes("prophet", lines))
        return dict(params)

    def _flags(self, ds: pd.DatetimeIndex) -> np.ndarray:
        """The learnt events' 0/1 columns at hours ``ds``, ``(len(ds), events)``."""
        flags = event_columns(ds, self.events_)
        columns = [
            flags[c].to_numpy() if c in flags else np.zeros(len(ds)) for c in self.event_names_
        ]
        return np.column_stack(columns) if columns else np.zeros((len(ds), 0))

    def _future(self, ds: pd.DatetimeIndex) -> pd.DataFrame:
        """Prophet's input rows for hours ``ds``: the learnt events' 0/1 columns."""
        flags = event_columns(ds, self.events_)
        future = pd.DataFrame({"ds": ds.tz_localize(None)})
        for column in self.event_names_:
            future[column] = flags[column].to_numpy() if column in flags else 0.0
        return future

    def _predict(self, horizon: int, ds: pd.DatetimeIndex) -> tuple[np.ndarray, Bands]:
        if horizon <= len(self.ahead_):
            yhat = self.ahead_[:horizon].copy()
        else:
            yhat = self.design_.yhat(self.params_, nanoseconds(ds), self._flags(ds))
        scale = np.sqrt(steps_ahead_in_seasons(horizon, DAY))
        return yhat, residual_bands(yhat, self.residuals_, scale)
