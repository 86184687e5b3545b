"""The parameters of a GPU plan, as every surface takes them (CLI flags, query parameters,
Grafana payload) and echoes them in every plan response."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

import capacity
from app.common import options

# A plan whose freshest forecast was trained longer ago than this is stale: its readers say so
# and the desired-replicas endpoint answers the plan's peak instead of a possibly low count.
STALE_AFTER = timedelta(hours=36)
# Peak factors are learned from this many days of stored peak_rps, and a requests forecast's
# tokens per request from this many days of stored tokens (the current prompt mix, not an
# average over every month the series was recorded).
PEAK_DAYS = 28
#: The safety factor of an explicit band when none is given (band auto's is 1.0: its
#: calibrated headroom replaces it).
DEFAULT_SAFETY_FACTOR = options.SAFETY_FACTOR


def check_max_over_capacity(value: float) -> float:
    """The band=auto risk target: a share of time in (0, 0.5]."""
    from app.errors import InputError

    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 0.5:
        raise InputError(f"max_over_capacity must be a share in (0, 0.5], got {value!r}")
    return float(value)


HPA_TOLERANCE_HELP = (
    "the HPA's tolerance on the plan trigger, both directions: written into the ScaledObject's "
    "behavior and modelled by band auto's calibration and the replay (default 0: the HPA holds "
    "exactly the replicas gpucast answers; needs KEDA >= 2.18, and Kubernetes >= 1.35 or "
    "1.33-1.34 with the HPAConfigurableTolerance feature gate). Where the cluster cannot set "
    "it, say so: 'none' writes no tolerance (KEDA < 2.18, whose CRD has no such field) and "
    "plans for Kubernetes' 10 %; 0.1 plans for 10 % too (Kubernetes without the gate)"
)


#: The version of band auto's replay in the calibration key: "line" judges candidates on the
#: capacity line with both triggers at the ScaledObject's tolerance.
CALIBRATION_REPLAY = "line"


def parse_hpa_tolerance(text: str) -> float | None:
    """The ``hpa_tolerance`` option: a share in [0, 1], or ``none`` for no tolerance field."""
    from app.common.names import echo
    from app.errors import InputError

    if text.strip().lower() == "none":
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value <= 1:
        raise InputError(f"hpa_tolerance must be a number in [0, 1] or 'none', got {echo(text)}")
    return value


@dataclass(frozen=True)
class PlanParams:
    band: str = "auto"
    utilization_target: float = options.UTILIZATION_TARGET
    # None: the default for the band — 1.0 under "auto" (the calibrated headroom is the
    # margin), DEFAULT_SAFETY_FACTOR for an explicit band. An explicit value stacks on purpose.
    safety_factor: float | None = None
    min_gpus: int = 1
    max_gpus: int | None = None
    cold_start_s: int = 300
    scale_down_hold_s: int = 1800
    # band "auto": the risk target the quantile is calibrated to (share of time over capacity)
    max_over_capacity: float = options.MAX_OVER_CAPACITY
    # the deployment runs a reactive trigger beside the plan (KEDA's second trigger on the
    # observed load): band "auto" is calibrated for that fleet; False: for the plan alone
    reactive_backstop: bool = True
    # the HPA's tolerance on the plan trigger (see HPA_TOLERANCE_HELP); None: gpucast writes
    # none and the cluster's default (Kubernetes' 10 %) applies
    hpa_tolerance: float | None = 0.0

    @property
    def held_hpa_tolerance(self) -> float:
        """The tolerance the cluster's HPA really applies to the plan trigger."""
        if self.hpa_tolerance is None:
            return capacity.KUBERNETES_TOLERANCE
        return float(self.hpa_tolerance)

    def fleet(self, *, tokens_per_s_per_gpu: float, gpus_per_replica: int) -> capacity.Fleet:
        """The fleet a plan with these parameters runs on (rules and HPA tolerance), for the
        replay and band auto's calibration."""
        return capacity.Fleet(
            per_gpu_tokens_per_s=tokens_per_s_per_gpu,
            gpus_per_replica=gpus_per_replica,
            rules=self.rules(),
            hpa_tolerance=self.held_hpa_tolerance,
        )

    @property
    def sizing_safety_factor(self) -> float:
        """The safety factor the formula multiplies by (see ``safety_factor``)."""
        if self.safety_factor is not None:
            return float(self.safety_factor)
        return 1.0 if self.band == "auto" else DEFAULT_SAFETY_FACTOR

    def rules(self) -> capacity.ScheduleRules:
        """The schedule rules (raises capacity.InvalidParameterError when they are unusable)."""
        return capacity.ScheduleRules(
            cold_start_s=self.cold_start_s,
            scale_down_hold_s=self.scale_down_hold_s,
            min_gpus=self.min_gpus,
            max_gpus=self.max_gpus,
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def calibration_key(self) -> str:
        """What a band=auto choice depends on (everything but the band), as text."""
        values = asdict(self)
        values.pop("band")
        if values["hpa_tolerance"] == 0:  # keys kept before the setting existed stay valid
            values.pop("hpa_tolerance")
        # how a candidate is replayed: a choice stored under an older replay is not reused
        values["replay"] = CALIBRATION_REPLAY
        return ",".join(f"{k}={v}" for k, v in sorted(values.items()))

    def non_default_query(self) -> dict[str, Any]:
        """The parameters that differ from the defaults (to build a URL serving this plan)."""
        defaults = PlanParams()
        return {k: v for k, v in asdict(self).items() if v != getattr(defaults, k)}
