"""Prophet's posterior mode computed in process (:mod:`forecasting.models._prophet_map`):
a stationary point of Prophet's objective (checked against an independent implementation of
it), at least as low as cmdstan's optimiser gets, and Stan's optimiser when it fails."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecasting.models import prophet
from forecasting.models._prophet_backend import FastCmdStanBackend
from forecasting.models._prophet_design import nanoseconds
from forecasting.models._prophet_map import NotConverged, feature_sign, map_estimate
from forecasting.models.prophet import ProphetModel, event_columns

from .conftest import START, hourly

pytestmark = pytest.mark.slow


def _traffic(days: int, *, seed: int, growth: float, shift_day: int | None = None) -> pd.Series:
    t = np.arange(days * 24)
    rng = np.random.default_rng(seed)
    daily = 1 + 0.6 * np.cos(2 * np.pi * (t % 24 - 15) / 24)
    weekly = np.where((t // 24) % 7 >= 5, 0.7, 1.0)
    level = 1000 * (1 + growth * t / len(t))
    if shift_day is not None:
        level = level * np.where(t >= shift_day * 24, 1.4, 1.0)
    return hourly(level * daily * weekly * rng.lognormal(0, 0.06, len(t)))


def _events() -> pd.DataFrame:
    starts = [START + pd.Timedelta(days=d, hours=12) for d in (3, 9, 16, 23)]
    return pd.DataFrame(
        {"name": "promo", "start": starts, "end": [s + pd.Timedelta(hours=4) for s in starts]}
    )


def _stan_problem(y: pd.Series, mode: str, events: pd.DataFrame | None = None):
    """Prophet's Stan data and inits for ``y``, and the design that forecasts from them."""
    frame = event_columns(y.index, events)
    flags = frame.loc[:, frame.sum() > 0].to_numpy(dtype=float)
    design = ProphetModel(seasonality_mode=mode)._design(
        y.to_numpy(), frame.iloc[:, : flags.shape[1]]
    )
    data, init = design.stan_inputs(nanoseconds(y.index), y.to_numpy(), flags)
    return data, init, design, flags


def objective(data: dict, params: dict) -> float:
    """Prophet's negative log posterior as Stan's optimiser sees it (constants dropped, no
    Jacobian), written from the Stan model: the trend through the changepoint matrix A."""
    y, t = np.asarray(data["y"]), np.asarray(data["t"])
    x, t_change = np.asarray(data["X"]), np.asarray(data["t_change"])
    k, m = float(params["k"].ravel()[0]), float(params["m"].ravel()[0])
    delta, beta = params["delta"].ravel(), params["beta"].ravel()
    sigma = float(params["sigma_obs"].ravel()[0])
    a = (t[:, None] >= t_change[None, :]).astype(float)
    trend = (k + a @ delta) * t + (m + a @ (-t_change * delta))
    mu = trend * (1 + x @ (beta * np.asarray(data["s_m"]))) + x @ (beta * np.asarray(data["s_a"]))
    return float(
        k**2 / 50
        + m**2 / 50
        + np.abs(delta).sum() / data["tau"]
        + sigma**2 / (2 * 0.5**2)
        + (beta**2 / (2 * np.asarray(data["sigmas"]) ** 2)).sum()
        + len(y) * np.log(sigma)
        + ((y - mu) ** 2).sum() / (2 * sigma**2)
    )


def _smooth_gradient(data: dict, params: dict) -> tuple[np.ndarray, np.ndarray]:
    """Central differences of the objective without its lasso term, in the layout
    ``[k, m, δ, β, σ]``; and that layout's values."""
    names = ("k", "m", "delta", "beta", "sigma_obs")
    theta = np.concatenate([params[n].ravel() for n in names])
    sizes = [params[n].size for n in names]

    def smooth(vector: np.ndarray) -> float:
        parts = np.split(vector, np.cumsum(sizes)[:-1])
        point = {n: p.reshape((1, -1)) for n, p in zip(names, parts, strict=True)}
        return objective(data, point) - np.abs(point["delta"]).sum() / data["tau"]

    gradient = np.empty_like(theta)
    for i in range(len(theta)):
        step = 1e-6 * max(1.0, abs(theta[i]))
        up, down = theta.copy(), theta.copy()
        up[i] += step
        down[i] -= step
        gradient[i] = (smooth(up) - smooth(down)) / (2 * step)
    return gradient, theta


CASES = {
    "additive, level shift": (lambda: _traffic(28, seed=1, growth=0.2, shift_day=18), "additive"),
    "multiplicative, growth": (lambda: _traffic(28, seed=2, growth=0.8), "multiplicative"),
    "multiplicative, level shift": (
        lambda: _traffic(35, seed=3, growth=0.1, shift_day=20),
        "multiplicative",
    ),
    "short (Stan's Newton)": (lambda: _traffic(3, seed=4, growth=0.1), "additive"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_estimate_is_a_stationary_point_of_prophets_objective(case: str) -> None:
    make, mode = CASES[case]
    data, init, *_ = _stan_problem(make(), mode)
    params = map_estimate(data, init)
    gradient, theta = _smooth_gradient(data, params)
    lam, size = 1.0 / data["tau"], data["S"]
    delta = theta[2 : 2 + size]
    free = np.ones(len(theta), dtype=bool)
    free[2 : 2 + size] = False
    scale = 1e-4 * len(data["y"])
    # every parameter without a kink: zero gradient; a changepoint slope away from zero: the
    # lasso's pull balances it; at zero: the gradient within ±λ
    assert np.max(np.abs(gradient[free])) < scale
    moved = delta != 0
    assert np.max(
        np.abs(gradient[2 : 2 + size][moved] + lam * np.sign(delta[moved])), initial=0
    ) < (scale)
    assert np.all(np.abs(gradient[2 : 2 + size][~moved]) <= lam + scale)
    assert 0 < moved.sum() < size  # the lasso acts: some changepoints used, others not


@pytest.mark.parametrize("with_events", [False, True])
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_estimate_is_at_least_as_good_as_cmdstans(case: str, with_events: bool) -> None:
    make, mode = CASES[case]
    y = make()
    data, init, design, flags = _stan_problem(y, mode, _events() if with_events else None)
    ours = map_estimate(data, init)
    # cmdstan's L-BFGS with its default tolerances (Newton below 100 hours, as Prophet)
    tolerances = {} if data["T"] < 100 else {"tol_rel_grad": 1e7, "tol_rel_obj": 1e4}
    stan = FastCmdStanBackend().fit(init, data, **tolerances)
    assert objective(data, ours) <= objective(data, stan) + 1e-9 * abs(objective(data, stan))
    # and the fit over the history is Stan's, but where L-BFGS stalls at the kinks of the
    # changepoint lasso near a level shift (tighter tolerances do not move it: the
    # multiplicative level shift with events stays 3.7 above our objective): within 1 % on
    # average, 5 % at any hour
    rows = nanoseconds(y.index)
    ours_yhat, stan_yhat = design.yhat(ours, rows, flags), design.yhat(stan, rows, flags)
    gap = np.abs(ours_yhat - stan_yhat) / np.mean(np.abs(stan_yhat))
    assert gap.mean() < 0.01
    assert gap.max() < 0.05


def test_a_warm_start_reaches_the_same_estimate() -> None:
    y = _traffic(30, seed=6, growth=0.5, shift_day=12)
    cold = ProphetModel(seasonality_mode="multiplicative").fit(y.iloc[:-24])
    warm = ProphetModel(seasonality_mode="multiplicative")
    warm.warm_start(cold)
    warm.fit(y)
    fresh = ProphetModel(seasonality_mode="multiplicative").fit(y)
    np.testing.assert_allclose(warm.predict(24)["yhat"], fresh.predict(24)["yhat"], rtol=1e-4)


def test_when_it_does_not_converge_stans_optimiser_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(data, init):
        raise NotConverged("no convergence in 0 iterations")

    monkeypatch.setattr(prophet, "map_estimate", failing)
    y = _traffic(21, seed=7, growth=0.3)
    fallen_back = ProphetModel().fit(y)
    stan = ProphetModel(optimiser="stan").fit(y)
    for name in ("k", "m", "delta", "beta", "sigma_obs"):
        np.testing.assert_array_equal(fallen_back.params_[name], stan.params_[name])


def test_an_unknown_optimiser_is_refused() -> None:
    with pytest.raises(ValueError, match="optimiser must be one of"):
        ProphetModel(optimiser="adam")


def test_the_iteration_bound_is_reported() -> None:
    data, init, *_ = _stan_problem(_traffic(28, seed=2, growth=0.8), "multiplicative")
    with pytest.raises(NotConverged, match="no convergence in 1 iterations"):
        map_estimate(data, init, max_iterations=1)


@pytest.mark.parametrize("seed", range(6))
def test_the_lasso_step_is_exact(seed: int) -> None:
    """feature_sign against the same problem split into positive and negative parts and
    solved by a bound-constrained optimiser to tight tolerance."""
    from scipy.optimize import minimize

    rng = np.random.default_rng(seed)
    n, lasso_size = 12, 7
    a = rng.normal(size=(40, n))
    h = a.T @ a + 0.1 * np.eye(n)
    c = rng.normal(size=n) * 5
    lasso = np.zeros(n, dtype=bool)
    lasso[2 : 2 + lasso_size] = True
    lam = 2.0
    z = feature_sign(h, c, lam, lasso, np.zeros(n))

    def split(v: np.ndarray) -> tuple[float, np.ndarray]:
        # v = [w, q]: z = w off the lasso, w − q on it (w, q >= 0 there)
        w, q = v[:n], v[n:]
        point = w.copy()
        point[lasso] = w[lasso] - q
        grad_point = h @ point + c
        value = 0.5 * point @ h @ point + c @ point + lam * (w[lasso].sum() + q.sum())
        grad_w = grad_point + lam * lasso
        return value, np.concatenate([grad_w, -grad_point[lasso] + lam])

    bounds = [(0, None) if flag else (None, None) for flag in lasso] + [(0, None)] * lasso_size
    reference = minimize(
        split,
        np.zeros(n + lasso_size),
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
        options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10_000},
    )

    def value(point: np.ndarray) -> float:
        return float(0.5 * point @ h @ point + c @ point + lam * np.abs(point[lasso]).sum())

    assert value(z) <= reference.fun + 1e-9
    gradient = h @ z + c
    assert np.allclose(gradient[~lasso], 0, atol=1e-8)
    on = lasso & (z != 0)
    assert np.allclose(gradient[on] + lam * np.sign(z[on]), 0, atol=1e-8)
    assert np.all(np.abs(gradient[lasso & (z == 0)]) <= lam + 1e-8)
    assert 0 < on.sum() < lasso_size  # some at zero, some not: the case worth testing


def test_a_history_with_non_finite_values_is_refused_at_once() -> None:
    data, init, *_ = _stan_problem(_traffic(10, seed=8, growth=0.1), "additive")
    data["y"] = np.where(np.arange(len(data["y"])) == 5, np.nan, data["y"])
    with pytest.raises(NotConverged, match="non-finite"):
        map_estimate(data, init)


def _awkward(kind: int, n: int, rng: np.random.Generator) -> np.ndarray:
    t = np.arange(n)
    if kind == 0:  # sparse counts
        return rng.poisson(3, n).astype(float)
    if kind == 1:  # rare spikes on zero
        return np.where(rng.random(n) < 0.05, 1000.0, 0.0)
    if kind == 2:  # a daily cycle with a level shift
        shift = np.where(t > n // 2, 300.0, 0.0)
        return np.maximum(0, 100 + 50 * np.sin(2 * np.pi * t / 24) + shift + rng.normal(0, 5, n))
    if kind == 3:  # heavy tailed
        return np.exp(rng.normal(0, 2, n))
    # huge and growing
    return 1e9 * (1 + 0.5 * np.sin(2 * np.pi * t / 24)) * (1 + t / n) * rng.lognormal(0, 0.1, n)


@pytest.mark.parametrize("seed", range(10))
def test_on_awkward_histories_it_converges_and_does_as_well_as_stan(seed: int) -> None:
    """Sparse counts, spikes on zero, level shifts, heavy tails, huge values, in both modes:
    the solver converges and its estimate is at least as good as cmdstan's. Giving up is
    not accepted here: on these ten it converges, and each hand-over costs a Stan run per
    fit, which the in-process solver exists to avoid (the hand-over itself is checked by
    test_when_it_does_not_converge_stans_optimiser_fits)."""
    rng = np.random.default_rng(seed)
    n = int(rng.choice([48, 99, 240, 720]))
    values = _awkward(seed % 5, n, rng)
    if np.ptp(values) == 0:
        values[0] += 1.0
    mode = ("additive", "multiplicative")[seed % 2]
    data, init, *_ = _stan_problem(hourly(values), mode)
    ours = map_estimate(data, init)
    tolerances = {} if data["T"] < 100 else {"tol_rel_grad": 1e7, "tol_rel_obj": 1e4}
    stan = FastCmdStanBackend().fit(init, data, **tolerances)
    assert objective(data, ours) <= objective(data, stan) + 1e-9 * abs(objective(data, stan))
