"""Kubernetes output: a KEDA ScaledObject that follows an hourly plan with cron triggers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
import yaml

from capacity._checks import require_int
from capacity.conversion import GPUPlan
from capacity.errors import InvalidParameterError


def _hourly_replicas(plan: GPUPlan | pd.DataFrame, timezone: str) -> pd.Series:
    frame = plan.frame if isinstance(plan, GPUPlan) else plan
    missing = {"hour", "replicas"} - set(frame.columns)
    if missing:
        raise InvalidParameterError(f"plan frame is missing column(s) {sorted(missing)}")
    if frame.empty:
        raise InvalidParameterError("plan has no hours")
    hours = pd.DatetimeIndex(pd.to_datetime(frame["hour"], utc=True)).tz_convert(timezone)
    series = pd.Series(frame["replicas"].astype(int).to_numpy(), index=hours).sort_index()
    if (
        series.index.has_duplicates
        or (series.index.to_series().diff().dropna() != pd.Timedelta(hours=1)).any()
    ):
        raise InvalidParameterError("plan hours must be consecutive whole hours without gaps")
    return series


def _cron(moment: pd.Timestamp, repeat_daily: bool) -> str:
    if repeat_daily:
        return f"{moment.minute} {moment.hour} * * *"
    return f"{moment.minute} {moment.hour} {moment.day} {moment.month} *"


def _windows(replicas: pd.Series) -> list[tuple[pd.Timestamp, pd.Timestamp, int]]:
    """Runs of consecutive hours with the same replica count: (start, end, replicas)."""
    runs: list[tuple[pd.Timestamp, pd.Timestamp, int]] = []
    for hour, count in replicas.items():
        if runs and runs[-1][2] == count:
            runs[-1] = (runs[-1][0], hour + pd.Timedelta(hours=1), count)
        else:
            runs.append((hour, hour + pd.Timedelta(hours=1), int(count)))
    return runs


@dataclass(frozen=True)
class ScalingBehavior:
    """HPA ``behavior``: fast scale-up, slow scale-down (Kubernetes autoscaling/v2 fields).

    Up: at most scale_up_percent % more pods per scale_up_period_s, after
    scale_up_stabilization_s. Down: at most scale_down_pods pods per scale_down_period_s,
    after scale_down_stabilization_s of consistently lower recommendations.
    """

    scale_up_stabilization_s: int = 0
    scale_up_percent: int = 100
    scale_up_period_s: int = 15
    scale_down_stabilization_s: int = 600
    scale_down_pods: int = 1
    scale_down_period_s: int = 120

    def __post_init__(self) -> None:
        require_int("scale_up_stabilization_s", self.scale_up_stabilization_s, minimum=0)
        require_int("scale_down_stabilization_s", self.scale_down_stabilization_s, minimum=0)
        for label in (
            "scale_up_percent",
            "scale_up_period_s",
            "scale_down_pods",
            "scale_down_period_s",
        ):
            require_int(label, getattr(self, label), minimum=1)

    def to_hpa(self) -> dict:
        up = {
            "type": "Percent",
            "value": self.scale_up_percent,
            "periodSeconds": self.scale_up_period_s,
        }
        down = {
            "type": "Pods",
            "value": self.scale_down_pods,
            "periodSeconds": self.scale_down_period_s,
        }
        return {
            "scaleUp": {
                "stabilizationWindowSeconds": self.scale_up_stabilization_s,
                "selectPolicy": "Max",
                "policies": [up],
            },
            "scaleDown": {
                "stabilizationWindowSeconds": self.scale_down_stabilization_s,
                "selectPolicy": "Min",
                "policies": [down],
            },
        }


def _cron_triggers(
    replicas: pd.Series, *, floor: int, lead: pd.Timedelta, timezone: str, repeat_daily: bool
) -> list[dict]:
    day = pd.Timedelta(hours=24)
    return [
        {
            "type": "cron",
            "metadata": {
                "timezone": timezone,
                "start": _cron(start - lead, repeat_daily),
                "end": _cron(end, repeat_daily),
                "desiredReplicas": str(count),
            },
        }
        for start, end, count in _windows(replicas)
        if count > floor and not (repeat_daily and end - start >= day)
    ]


def keda_scaled_object(
    plan: GPUPlan | pd.DataFrame,
    *,
    name: str,
    namespace: str,
    deployment: str,
    timezone: str = "UTC",
    min_replicas: int | None = None,
    max_replicas: int | None = None,
    repeat_daily: bool = False,
    lead_minutes: int = 0,
    extra_triggers: Sequence[dict] = (),
    behavior: ScalingBehavior = ScalingBehavior(),
    polling_interval_s: int = 30,
) -> str:
    """A KEDA ScaledObject (YAML text) whose cron triggers hold each hour's planned replicas.

    plan: a GPUPlan or a frame with ``hour`` (UTC) and ``replicas``. Consecutive hours with the
    same count share one cron trigger; hours at min_replicas (default: the plan's minimum) need
    none. Triggers are pinned to the plan's dates (minute hour day month) unless repeat_daily,
    which repeats a plan of at most 24 hours every day. Each window starts lead_minutes early
    so that replicas finish their cold start by the hour (KEDA takes the max of overlapping
    triggers, so an early start never lowers the previous hour). extra_triggers (e.g. a
    prometheus trigger) add reactive scaling on top. max_replicas defaults to the plan's
    peak, or twice it when extra triggers can react.
    """
    replicas = _hourly_replicas(plan, timezone)
    lead = pd.Timedelta(minutes=require_int("lead_minutes", lead_minutes, minimum=0))
    if lead >= pd.Timedelta(hours=1):
        raise InvalidParameterError(f"lead_minutes must be < 60, got {lead_minutes!r}")
    if repeat_daily and len(replicas) > 24:
        raise InvalidParameterError("repeat_daily needs a plan of at most 24 hours")
    peak = int(replicas.max())
    floor = require_int(
        "min_replicas", int(replicas.min()) if min_replicas is None else min_replicas, minimum=0
    )
    ceiling = max_replicas if max_replicas is not None else peak * (2 if extra_triggers else 1)
    ceiling = require_int("max_replicas", ceiling, minimum=max(floor, 1))
    if ceiling < peak:
        raise InvalidParameterError(f"max_replicas={ceiling} is below the plan's peak of {peak}")
    triggers = _cron_triggers(
        replicas, floor=floor, lead=lead, timezone=timezone, repeat_daily=repeat_daily
    )
    triggers.extend(dict(trigger) for trigger in extra_triggers)
    if not triggers:
        raise InvalidParameterError(
            "the plan never rises above min_replicas and no extra trigger was given; "
            "a ScaledObject needs at least one trigger"
        )
    spec = {
        "scaleTargetRef": {"name": deployment},
        "pollingInterval": require_int("polling_interval_s", polling_interval_s, minimum=1),
        "minReplicaCount": floor,
        "maxReplicaCount": ceiling,
        "advanced": {"horizontalPodAutoscalerConfig": {"behavior": behavior.to_hpa()}},
        "triggers": triggers,
    }
    metadata = {
        "name": name,
        "namespace": namespace,
        "labels": {"app.kubernetes.io/managed-by": "gpucast"},
    }
    document = {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": metadata,
        "spec": spec,
    }
    return yaml.safe_dump(document, sort_keys=False)
