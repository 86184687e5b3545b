"""Importing forecasting stays light: no statsmodels, no Prophet until a model needs them."""

from __future__ import annotations

import subprocess
import sys


def test_import_does_not_load_heavy_libraries() -> None:
    # CPU time, not wall time: CI machines are shared. pandas itself is not ours to count.
    code = (
        "import sys, time; import numpy, pandas; t = time.process_time(); import forecasting; "
        "t = time.process_time() - t; "
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('statsmodels', 'prophet', 'cmdstanpy', 'scipy')); print(heavy, t)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    heavy, seconds = out.stdout.rsplit(" ", 1)
    assert heavy == "[]", heavy
    assert float(seconds) < 0.5
    assert out.stderr == ""
