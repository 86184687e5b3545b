"""Prophet's Stan backend as gpucast runs it: the same fit as Prophet's own backend (to the
looser stopping tolerance), the same parameters as cmdstanpy's optimiser with the same
settings (bit for bit), the same data text, and no file of the run left behind."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecasting.models import _prophet_backend
from forecasting.models._prophet_design import nanoseconds
from forecasting.models.prophet import ProphetModel

from .conftest import daily_pattern, hourly

pytestmark = pytest.mark.slow


def _leftovers() -> set[str]:
    """Files of runs: anything in the temporary folder (this test's own, see below), and in
    cmdstanpy's temporary folder of this process (where Prophet's backend leaves every run's
    CSV and console output until the process exits)."""
    import cmdstanpy

    ours = {p.name for p in Path(tempfile.gettempdir()).rglob("*")}
    return ours | {p.name for p in Path(cmdstanpy._TMPDIR).rglob("*")}


def test_the_fast_backend_fits_what_prophets_own_backend_fits() -> None:
    from prophet.models import CmdStanPyBackend

    y = daily_pattern(days=21, noise=3.0)
    fast = ProphetModel().fit(y)
    # Prophet itself, with its own backend and cmdstan's default tolerances
    reference = fast.reference(y.to_numpy(), pd.DataFrame(index=range(len(y))))
    assert type(reference.stan_backend).__name__ == "FastCmdStanBackend"
    reference.stan_backend = CmdStanPyBackend()
    reference.fit(pd.DataFrame({"ds": y.index.tz_localize(None), "y": y.to_numpy()}))
    ds = pd.DataFrame({"ds": fast.predict(48)["ds"].dt.tz_localize(None)})
    ours, theirs = fast.predict(48)["yhat"], reference.predict(ds)["yhat"].clip(lower=0)
    assert np.max(np.abs(ours - theirs)) < 0.01 * float(np.mean(np.abs(theirs)))


def test_no_file_of_a_fit_is_left_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a temporary folder of this test's own: other processes' fits cannot show up in it
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    before = _leftovers()
    for seed in range(3):
        ProphetModel().fit(daily_pattern(days=14, noise=2.0, seed=seed))
    assert _leftovers() == before


def _weekly(days: int, seed: int) -> np.ndarray:
    t = np.arange(days * 24)
    daily = 1 + 0.5 * np.cos(2 * np.pi * (t % 24 - 14) / 24)
    weekly = np.where((t // 24) % 7 >= 5, 0.75, 1.0)
    noise = np.random.default_rng(seed).lognormal(0, 0.05, len(t))
    return 800 * daily * weekly * (1 + 0.2 * t / len(t)) * noise


@pytest.fixture
def stan_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[dict, dict, dict]]:
    """The (inits, data, keyword arguments) of every Stan fit."""
    calls: list[tuple[dict, dict, dict]] = []
    original = _prophet_backend.FastCmdStanBackend.fit

    def recorded(self, stan_init, stan_data, **kwargs):
        calls.append((stan_init, stan_data, dict(kwargs)))
        return original(self, stan_init, stan_data, **kwargs)

    monkeypatch.setattr(_prophet_backend.FastCmdStanBackend, "fit", recorded)
    return calls


def test_cmdstan_called_directly_gives_cmdstanpys_parameters_bit_for_bit(
    stan_calls: list[tuple[dict, dict, dict]],
) -> None:
    # cold and warm-started L-BFGS fits over growing histories (as in a backtest), and a
    # short history (Newton)
    y = hourly(_weekly(30, seed=3))
    previous = None
    for end in (600, 648, 720):
        model = ProphetModel(optimiser="stan")
        if previous is not None:
            model.warm_start(previous)
        previous = model.fit(y.iloc[:end])
    ProphetModel(optimiser="stan").fit(y.iloc[:80])
    fits = list(stan_calls)  # (the calls below are recorded too)
    assert len(fits) == 4 and "init" in fits[1][2]

    backend = _prophet_backend.FastCmdStanBackend()
    for stan_init, stan_data, kwargs in fits:
        ours = backend.fit(stan_init, stan_data, **dict(kwargs))
        inits = dict(stan_init)
        if "init" in kwargs:
            inits = backend.sanitize_custom_inits(stan_init, kwargs["init"])
        settings: dict = {"algorithm": "LBFGS", **_prophet_backend.LOOSE_TOLERANCES}
        if stan_data["T"] < 100:
            settings = {"algorithm": "Newton"}
        fit = backend.model.optimize(
            data=_prophet_backend._lists(stan_data),
            inits=_prophet_backend._lists(inits),
            iter=10_000,
            **settings,
        )
        theirs = backend.stan_to_dict_numpy(fit.column_names, fit.optimized_params_np)
        assert list(ours) == list(theirs)
        for name, values in theirs.items():
            np.testing.assert_array_equal(ours[name], values.reshape((1, -1)))


def test_the_data_text_is_json_of_the_data_with_cached_rows() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 6))
    data = {"T": 50, "y": rng.normal(size=50), "X": x, "sigmas": [10.0] * 6}
    expected = json.loads(json.dumps(_prophet_backend._lists(data)))
    first = _prophet_backend.data_json(data)
    assert json.loads(first) == expected
    # a later fold: the same rows and one more, partly served from the cache
    longer = {**data, "X": np.vstack([x, rng.normal(size=(1, 6))])}
    assert json.loads(_prophet_backend.data_json(longer))["X"] == longer["X"].tolist()
    assert _prophet_backend.data_json(data) == first
    # -0.0 and 0.0 are different rows
    signed = {"X": np.array([[0.0, 1.0], [-0.0, 1.0]])}
    assert json.loads(_prophet_backend.data_json(signed)) == {"X": [[0.0, 1.0], [-0.0, 1.0]]}
    assert str(json.loads(_prophet_backend.data_json(signed))["X"][1][0]) == "-0.0"


def test_the_row_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_prophet_backend, "MAX_ROWS", 10)
    monkeypatch.setattr(_prophet_backend, "_ROWS", {})
    x = np.arange(70.0).reshape(35, 2)
    assert json.loads(_prophet_backend.data_json({"X": x})) == {"X": x.tolist()}
    assert 0 < len(_prophet_backend._ROWS) <= 10


def test_a_failed_lbfgs_run_falls_back_to_newton(monkeypatch: pytest.MonkeyPatch) -> None:
    algorithms: list[str] = []
    original = _prophet_backend.FastCmdStanBackend._optimize

    def failing(self, folder, data, inits, algorithm, settings):
        algorithms.append(algorithm)
        if algorithm == "LBFGS":
            raise RuntimeError("line search failed")
        assert not set(settings) & set(_prophet_backend.LOOSE_TOLERANCES)
        return original(self, folder, data, inits, algorithm, settings)

    monkeypatch.setattr(_prophet_backend.FastCmdStanBackend, "_optimize", failing)
    model = ProphetModel(optimiser="stan").fit(hourly(_weekly(6, seed=4)))
    assert algorithms == ["LBFGS", "Newton"]
    assert np.isfinite(model.predict(24)["yhat"]).all()


def test_a_failing_cmdstan_run_raises_runtime_error_with_its_console() -> None:
    backend = _prophet_backend.FastCmdStanBackend()
    backend.newton_fallback = False
    y = _weekly(21, seed=5)
    design = ProphetModel()._design(y, pd.DataFrame(index=range(len(y))))
    ns = nanoseconds(hourly(y).index)
    data, init = design.stan_inputs(ns, y, np.zeros((len(y), 0)))
    with pytest.raises(RuntimeError, match="cmdstan exited with code"):
        backend.fit(init, data, tol_rel_grad=-1.0)  # cmdstan rejects a negative tolerance
