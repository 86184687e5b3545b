"""Prophet's Stan backend as gpucast runs it: the same fit as Prophet's own backend (to the
looser stopping tolerance), and no file of the run left behind."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

from forecasting.models.prophet import ProphetModel

from .conftest import daily_pattern

pytestmark = pytest.mark.slow


def _leftovers() -> set[str]:
    """Files of runs: anything in the temporary folder (this test's own, see below), and in
    cmdstanpy's temporary folder of this process (where Prophet's backend leaves every run's
    CSV and console output until the process exits)."""
    import cmdstanpy

    ours = {p.name for p in Path(tempfile.gettempdir()).rglob("*")}
    return ours | {p.name for p in Path(cmdstanpy._TMPDIR).rglob("*")}


def test_the_fast_backend_fits_what_prophets_own_backend_fits() -> None:
    import pandas as pd
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
