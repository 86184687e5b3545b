"""Paired speed of two Prophet Stan backends inside ``auto_forecast``, in one process.

    git show REV:forecasting/models/_prophet_backend.py > before_backend.py
    python bench/prophet_backend_ab.py before_backend.py [--smooth 24] [--reps 2]

On the ``--smooth`` synthetic series with smooth daily and weekly cycles where Prophet
survives the race, ``auto_forecast`` runs ``--reps`` times per series with each backend,
alternating which goes first, so that both see the same machine load. CPU time includes
child processes (cmdstan). Prints the median and p90 CPU per series of each, and the
median of the paired ratios; checks that both backends give the same forecast. Prophet's
mode is found in process by default and the Stan backend is its fallback: here every
``ProphetModel`` is made with ``optimiser="stan"``, so that every fit runs the backend.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # before numpy loads: one BLAS thread, as in a worker process

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import logging  # noqa: E402
import resource  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import forecast_data  # noqa: E402
import numpy as np  # noqa: E402

import forecasting.models.prophet as prophet_model  # noqa: E402
from forecasting import auto_forecast  # noqa: E402
from forecasting.models import _prophet_backend  # noqa: E402

HOURS = 720
HORIZON = 24


def cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path, help="a previous _prophet_backend.py")
    parser.add_argument("--smooth", type=int, default=24)
    parser.add_argument("--reps", type=int, default=2)
    args = parser.parse_args()
    for name in ("prophet", "cmdstanpy"):
        logging.getLogger(name).disabled = True
    warnings.simplefilter("ignore")
    spec = importlib.util.spec_from_file_location("before_backend", args.before)
    assert spec is not None and spec.loader is not None
    before = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(before)
    from prophet import Prophet

    backends = {"before": before.FastCmdStanBackend, "after": _prophet_backend.FastCmdStanBackend}
    made = prophet_model.ProphetModel.__init__

    def with_stan(model, *args, **kwargs):  # type: ignore[no-untyped-def]
        made(model, *args, **{"optimiser": "stan", **kwargs})

    prophet_model.ProphetModel.__init__ = with_stan  # type: ignore[method-assign]

    def use(name: str) -> None:
        prophet_model._import_prophet = lambda: (Prophet, backends[name])  # type: ignore[assignment]

    series = forecast_data.smooth_daily_weekly(args.smooth, HOURS)
    for name in backends:  # warm-up: imports and compiled code out of the timings
        use(name)
        auto_forecast(series[0], HORIZON)
    survived = [
        y
        for y in series
        if auto_forecast(y, HORIZON).scores.set_index("model")["status"].get("prophet") == "ok"
    ]
    cpu: dict[str, list[float]] = {name: [] for name in backends}
    for rep in range(args.reps):
        for y in survived:
            forecasts = {}
            for name in ("before", "after") if rep % 2 == 0 else ("after", "before"):
                use(name)
                started = cpu_seconds()
                forecasts[name] = auto_forecast(y, HORIZON).forecast
                cpu[name].append(cpu_seconds() - started)
            if not forecasts["before"].equals(forecasts["after"]):
                print("the two backends gave different forecasts on one series")
    old, new = np.array(cpu["before"]), np.array(cpu["after"])
    print(
        f"{len(survived)} of {len(series)} smooth series where Prophet survived, "
        f"{args.reps} runs each per backend, CPU incl. child processes"
    )
    print("| backend | median CPU s | p90 CPU s |")
    print("|---|---|---|")
    for name, values in (("before", old), ("after", new)):
        print(f"| {name} | {np.median(values):.3f} | {np.quantile(values, 0.9):.3f} |")
    print(f"median of paired ratios after/before: {np.median(new / old):.3f}")


if __name__ == "__main__":
    main()
