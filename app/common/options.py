"""Defaults and limits that the CLI, the REST API and the README all state: one place each, so
help text, validation and documentation cannot drift apart (tests/app/test_options_documented.py
checks the README and every ``--help`` against them). Imports nothing heavy: the CLI reads it
while building its parser."""

from __future__ import annotations

from typing import Final

# The in-cluster Service of deploy/kubernetes: the address a KEDA object polls by default.
DEFAULT_PUBLIC_URL: Final = "http://gpucast:8000"

# Backtest folds of the nightly forecast (forecasting.DEFAULT_WINDOWS; a test keeps them equal,
# since the CLI must not import the forecasting library to print its help).
FORECAST_WINDOWS: Final = 5
FORECAST_WINDOWS_MAX: Final = 30

# The ScaledObject's fallback.behavior choices: "auto" and capacity.FALLBACK_BEHAVIORS (a test
# keeps them equal): what a trigger whose source fails answers once KEDA falls back.
FALLBACK_BEHAVIORS: Final = ("auto", "static", "currentReplicas", "currentReplicasIfHigher")
FALLBACK_BEHAVIOR: Final = "auto"


def resolved_fallback_behavior(choice: str, *, reactive: bool) -> str:
    """What ``choice`` writes: "auto" is currentReplicas beside a reactive trigger (a failing
    trigger answers the replicas the fleet runs, and the other one still scales it up) and
    static without one (the fleet's only trigger failing must not freeze it)."""
    if choice != "auto":
        return choice
    return "currentReplicas" if reactive else "static"


# The PNG chart (gpucast plot, GET /v1/series/{name}/plot.png).
PLOT_DAYS: Final = 7
PLOT_DAYS_MIN: Final = 1
PLOT_DAYS_MAX: Final = 90
PLOT_BAND: Final = "auto"

# GPU plan parameters shared by every plan surface (app.plans.PlanParams, the CLI's flags).
UTILIZATION_TARGET: Final = 0.75
SAFETY_FACTOR: Final = 1.2
MAX_OVER_CAPACITY: Final = 0.01
# band auto's headroom is calibrated on the replay of this many days of hourly plans
# (app.plans.calibration.CALIBRATION_DAYS)
BAND_AUTO_DAYS: Final = 7


def band_auto_help(risk: str) -> str:
    """What band auto sizes on, naming the risk target as the surface spells it."""
    return (
        "auto (default): the point forecast times the cheapest headroom whose replay of the "
        f"last {BAND_AUTO_DAYS} days kept time over capacity within {risk}"
    )


# Shared GPU pools (app.pools.spec, app.pools.plan; gpucast pool ...).
POOL_PRIORITIES: Final = ("critical", "standard", "batch")  # the order quota is granted in
POOL_GPUS_PER_NODE: Final = 8
POOL_SPOT_INTERRUPTION: Final = 0.05
POOL_PLAN_HOURS: Final = 24
POOL_PLAN_HOURS_MAX: Final = 168

# Prometheus sources of the hourly import (app.sources.spec; gpucast series source).
SOURCE_TIMEOUT_S: Final = 30.0
SOURCE_LOOKBACK_HOURS: Final = 48
