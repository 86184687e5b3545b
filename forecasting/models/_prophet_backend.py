"""Prophet's own Stan model and optimiser, made cheap to call thousands of times a night.

The Stan model (Prophet's compiled ``prophet_model.bin``), its data and the optimiser are
Prophet's; what changes is the plumbing around one run of it:

* the data and inits are written by the standard library's C JSON encoder into a private
  temporary folder (Prophet hands cmdstanpy dicts of lists, which cmdstanpy re-walks value
  by value in Python). The rows of the feature matrix ``X`` — Fourier terms of the hour,
  the same for every backtest fold and for every series on the same clock — are encoded
  once and kept by their bytes (``_ROWS``): formatting its floats was half of a fit's
  in-process CPU. The text is the same as encoding ``X`` in one piece;
* cmdstan runs as cmdstanpy would run it (the same command line: model, data, inits,
  ``method=optimize``, algorithm, tolerances, iterations) but called directly, and the one
  row of its output CSV is read directly: cmdstanpy's run set, console streaming and CSV
  metadata parsing (the column names of every ``trend`` point) cost more than the JSON;
* L-BFGS stops at ``TOL_REL_GRAD``/``TOL_REL_OBJ`` instead of cmdstan's 1e7/1e4 — the
  forecast is unchanged to the third digit of MASE on M4 Hourly, at a third of the optimiser's CPU
  (see ``LOOSE_TOLERANCES``);
* every file of the run (data, inits, output CSV) is removed once the parameters are read,
  instead of piling up in a temporary folder until the process exits.

``tests/forecasting/test_prophet_backend.py`` checks that the parameters are those of
cmdstanpy's ``CmdStanModel.optimize`` with the same settings, bit for bit.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from prophet.models import CmdStanPyBackend

#: cmdstan's L-BFGS stops when the relative gradient or objective change falls below these
#: multiples of machine precision (defaults 1e7 and 1e4).
TOL_REL_GRAD = 1e9
TOL_REL_OBJ = 1e6
LOOSE_TOLERANCES = {"tol_rel_grad": TOL_REL_GRAD, "tol_rel_obj": TOL_REL_OBJ}
#: cmdstan's optimiser settings ``fit`` passes on, as cmdstanpy writes them (``name=value``,
#: in this order: cmdstan reads the algorithm's settings only before ``iter``).
OPTIMISER_SETTINGS = (
    "init_alpha",
    "tol_obj",
    "tol_rel_obj",
    "tol_grad",
    "tol_rel_grad",
    "tol_param",
    "history_size",
    "iter",
)
#: With inits for every parameter the optimiser draws nothing at random; a fixed seed makes
#: that explicit (cmdstanpy draws one per run).
SEED = 20_261_203
#: Encoded rows of ``X`` kept (about 0.7 kB each with daily and weekly terms): eight weeks of
#: hours with room to spare; the cache starts over when full.
MAX_ROWS = 4096
_ROWS: dict[bytes, str] = {}


class FastCmdStanBackend(CmdStanPyBackend):
    """Prophet's Stan optimiser with fast JSON, looser L-BFGS tolerances, cmdstan called
    directly and no leftover files."""

    def fit(self, stan_init: dict[str, Any], stan_data: dict[str, Any], **kwargs: Any) -> Any:
        if "inits" not in kwargs and "init" in kwargs:
            stan_init = self.sanitize_custom_inits(stan_init, kwargs.pop("init"))
        algorithm = kwargs.pop("algorithm", "Newton" if int(stan_data["T"]) < 100 else "LBFGS")
        settings: dict[str, Any] = {"iter": 10_000}
        if algorithm.lower() == "lbfgs":
            settings.update(LOOSE_TOLERANCES)
        unknown = set(kwargs) - set(OPTIMISER_SETTINGS)
        if unknown:
            raise TypeError(f"unsupported optimiser arguments: {sorted(unknown)}")
        settings.update(kwargs)
        with tempfile.TemporaryDirectory(prefix="gpucast-prophet-") as name:
            folder = Path(name)
            data = folder / "data.json"
            data.write_text(data_json(stan_data), encoding="ascii")
            inits = _write(folder / "inits.json", _lists(stan_init))
            try:
                names, values = self._optimize(folder, str(data), inits, algorithm, settings)
            except RuntimeError:
                if not self.newton_fallback or algorithm.lower() == "newton":
                    raise
                settings = {k: v for k, v in settings.items() if k not in LOOSE_TOLERANCES}
                names, values = self._optimize(folder, str(data), inits, "Newton", settings)
        params = self.stan_to_dict_numpy(names, values)
        for param in params:
            params[param] = params[param].reshape((1, -1))
        return params

    def _optimize(
        self, folder: Path, data: str, inits: str, algorithm: str, settings: dict[str, Any]
    ) -> tuple[list[str], np.ndarray]:
        """One cmdstan optimisation: the output's column names and its row of values."""
        output = folder / f"output-{algorithm.lower()}.csv"
        command = [
            str(self.model.exe_file),
            "random",
            f"seed={SEED}",
            "data",
            f"file={data}",
            f"init={inits}",
            "output",
            f"file={output}",
            "method=optimize",
            f"algorithm={algorithm.lower()}",
            # in cmdstanpy's order: the algorithm's own settings before ``iter``
            *(f"{k}={settings[k]}" for k in OPTIMISER_SETTINGS if k in settings),
        ]
        try:
            run = subprocess.run(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                check=False,
            )
        except OSError as exc:
            raise RuntimeError(f"cmdstan could not run: {exc}") from exc
        if run.returncode != 0:
            console = run.stdout.decode(errors="replace").strip().splitlines()
            raise RuntimeError(
                f"Error during optimization! cmdstan exited with code {run.returncode}: "
                + " | ".join(console[-5:])
            )
        return _read_output(output)


def _read_output(path: Path) -> tuple[list[str], np.ndarray]:
    """Column names and the last row of a cmdstan output CSV (comments skipped)."""
    header: list[str] | None = None
    row: bytes | None = None
    with path.open("rb") as lines:
        for line in lines:
            if line.startswith(b"#") or not line.strip():
                continue
            if header is None:
                header = line.strip().decode().split(",")
            else:
                row = line
    if header is None or row is None:
        raise RuntimeError(f"cmdstan wrote no estimate to {path.name}")
    values = np.array([float(v) for v in row.strip().split(b",")], dtype=np.float64)
    if len(values) != len(header):
        raise RuntimeError(f"cmdstan's estimate has {len(values)} values for {len(header)} columns")
    return header, values


def data_json(stan_data: dict[str, Any]) -> str:
    """``json.dumps`` of the Stan data as lists, with the rows of ``X`` from ``_ROWS``."""
    data = dict(stan_data)
    x = data.pop("X", None)
    text = json.dumps(_lists(data), allow_nan=False)
    if x is None:
        return text
    matrix = np.ascontiguousarray(x.to_numpy() if hasattr(x, "to_numpy") else x, dtype=float)
    rows = ", ".join(_row(r) for r in matrix) if matrix.ndim == 2 else json.dumps(matrix.tolist())
    return f'{text[:-1]}, "X": [{rows}]}}' if data else f'{{"X": [{rows}]}}'


def _row(values: np.ndarray) -> str:
    key = values.tobytes()
    text = _ROWS.get(key)
    if text is None:
        text = json.dumps(values.tolist(), allow_nan=False)
        if len(_ROWS) >= MAX_ROWS:
            _ROWS.clear()
        _ROWS[key] = text
    return text


def _lists(values: dict[str, Any]) -> dict[str, Any]:
    """Arrays and frames as lists for JSON (what Prophet's ``prepare_data`` does, for numpy
    inputs too: :mod:`._prophet_design` builds ``X`` as an array)."""
    out = {}
    for name, value in values.items():
        if hasattr(value, "to_numpy"):
            value = value.to_numpy()
        out[name] = value.tolist() if isinstance(value, np.ndarray) else value
    return out


def _write(path: Path, values: dict[str, Any]) -> str:
    # dumps, not dump: only the one-shot encoder is the C one
    path.write_text(json.dumps(values, allow_nan=False), encoding="ascii")
    return str(path)
