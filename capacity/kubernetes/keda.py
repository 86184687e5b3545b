"""Kubernetes output: a KEDA ScaledObject that carries a GPU plan out on its own for days.

Two forms:

- **live** (default): a ``metrics-api`` trigger polls gpucast's desired-replicas endpoint,
  which answers the replicas the freshest plan wants now (and the plan's peak when the plan
  is stale). Target value 1 with the AverageValue metric type makes the HPA hold exactly
  that many replicas. No dated triggers, so nothing goes stale.
- **cron**: daily-repeating cron triggers of one day's plan, each started one cold start
  early, with the plan's minimum as the floor.

Both carry an optional reactive trigger (the user's PromQL, e.g. vLLM running requests) so
bursts beyond the plan are caught, a ``fallback`` (the plan's peak) so an unreachable gpucast
or Prometheus never scales the fleet down, and HPA behavior matching the schedule rules:
scale-up immediate, scale-down after a stabilization window equal to the hold. The reactive
trigger writes ``ignoreNullValues: "false"``: with KEDA's default (true) a query that returns
no series (the serving pods' scrape target lost, an exporter renamed) reads as 0 and scales the
fleet down to the plan's floor exactly when nobody can see its load; as an error it counts
towards the fallback instead. The fleet never runs fewer than one replica
(``minReplicaCount`` >= 1), so a fleet-total query always has series while the target is
scraped.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from capacity._checks import require_finite, require_int
from capacity.errors import InvalidParameterError
from capacity.kubernetes.keda_triggers import (
    cron_triggers,
    live_trigger,
    metadata_number,
    milli_threshold,
)
from capacity.kubernetes.kube_yaml import dump as yaml_dump
from capacity.sizing.conversion import GPUPlan
from capacity.sizing.schedule import MAX_SCALE_DOWN_HOLD_S, ScheduleRules

KEDA_MODES = ("live", "cron")
#: KEDA's ``fallback.behavior`` values gpucast writes (KEDA >= 2.17; "static", KEDA's default,
#: is not written): the replicas a failing trigger answers from its (failureThreshold + 1)-th
#: failed poll — the fallback's, the current count, or the larger of the two.
FALLBACK_BEHAVIORS = ("static", "currentReplicas", "currentReplicasIfHigher")
KEDA_HPA_PREFIX = "keda-hpa-"  # KEDA names the HPA of a ScaledObject keda-hpa-<name>
MAX_NAME_CHARS = 63  # KEDA >= 2.20: the HPA's name (and a label value: the object's name)
MAX_PERIOD_S = 1800  # Kubernetes' bound on an HPA scaling policy's periodSeconds
INT32_MAX = 2**31 - 1
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


@dataclass(frozen=True)
class ScalingBehavior:
    """HPA ``behavior`` (Kubernetes autoscaling/v2 fields).

    Up: after scale_up_stabilization_s, at most the larger of scale_up_percent % more pods and
    scale_up_pods pods per scale_up_period_s (Kubernetes' own default: 100 % or 4 pods per
    15 s). Down: after scale_down_stabilization_s of consistently lower recommendations, at
    most scale_down_percent % of the pods per scale_down_period_s (or scale_down_pods pods when
    given).

    scale_up_tolerance / scale_down_tolerance: the HPA's dead band around a usage ratio of 1
    (Kubernetes' ``HPAScalingRules.tolerance``; None: not written, the cluster-wide default
    of 10 % applies). The field exists in KEDA's ScaledObject CRD from KEDA 2.18 and takes
    effect on Kubernetes 1.35+ (beta, on by default) or 1.33-1.34 with the
    HPAConfigurableTolerance feature gate; elsewhere the HPA keeps its 10 %.
    """

    scale_up_stabilization_s: int = 0
    scale_up_percent: int = 100
    scale_up_pods: int = 4
    scale_up_period_s: int = 15
    scale_down_stabilization_s: int = 1800
    scale_down_percent: int = 100
    scale_down_pods: int | None = None
    scale_down_period_s: int = 15
    scale_up_tolerance: float | None = None
    scale_down_tolerance: float | None = None

    def __post_init__(self) -> None:
        for label in ("scale_up_stabilization_s", "scale_down_stabilization_s"):
            value = require_int(label, getattr(self, label), minimum=0)
            if value > MAX_SCALE_DOWN_HOLD_S:
                raise InvalidParameterError(f"{label} must be <= {MAX_SCALE_DOWN_HOLD_S}")
        for label in ("scale_up_period_s", "scale_down_period_s"):
            if require_int(label, getattr(self, label), minimum=1) > MAX_PERIOD_S:
                raise InvalidParameterError(f"{label} must be <= {MAX_PERIOD_S}")
        for label in ("scale_up_percent", "scale_up_pods", "scale_down_percent"):
            require_int(label, getattr(self, label), minimum=1)
        if self.scale_down_pods is not None:
            require_int("scale_down_pods", self.scale_down_pods, minimum=1)
        for label in ("scale_up_tolerance", "scale_down_tolerance"):
            value = getattr(self, label)
            if value is not None and require_finite(label, value) < 0:
                raise InvalidParameterError(f"{label} must be >= 0, got {value!r}")

    @classmethod
    def for_rules(cls, rules: ScheduleRules, *, tolerance: float | None = None) -> ScalingBehavior:
        """Scale-up immediate; scale-down only after the rules' hold; ``tolerance`` (both
        directions) written when given."""
        return cls(
            scale_down_stabilization_s=rules.scale_down_hold_s,
            scale_up_tolerance=tolerance,
            scale_down_tolerance=tolerance,
        )

    def to_hpa(self) -> dict:
        up = [
            {
                "type": "Percent",
                "value": self.scale_up_percent,
                "periodSeconds": self.scale_up_period_s,
            },
            {"type": "Pods", "value": self.scale_up_pods, "periodSeconds": self.scale_up_period_s},
        ]
        down_policy = (
            {
                "type": "Pods",
                "value": self.scale_down_pods,
                "periodSeconds": self.scale_down_period_s,
            }
            if self.scale_down_pods is not None
            else {
                "type": "Percent",
                "value": self.scale_down_percent,
                "periodSeconds": self.scale_down_period_s,
            }
        )
        return {
            "scaleUp": _rules(self.scale_up_stabilization_s, up, self.scale_up_tolerance),
            "scaleDown": _rules(
                self.scale_down_stabilization_s, [down_policy], self.scale_down_tolerance
            ),
        }


def _rules(stabilization_s: int, policies: list[dict], tolerance: float | None) -> dict:
    rules: dict[str, Any] = {
        "stabilizationWindowSeconds": stabilization_s,
        "selectPolicy": "Max",
        "policies": policies,
    }
    if tolerance is not None:  # a Quantity: written as a plain decimal string
        rules["tolerance"] = metadata_number("tolerance", tolerance)
    return rules


@dataclass(frozen=True)
class ReactiveTrigger:
    """A Prometheus trigger on a live serving metric: ``query`` (PromQL giving the fleet's
    total, e.g. ``sum(vllm:num_requests_running{model="x"})``) and ``target_per_replica`` (the
    value one replica should carry; the HPA keeps ceil(total / target) replicas)."""

    server_address: str
    query: str
    target_per_replica: float

    def __post_init__(self) -> None:
        for label in ("server_address", "query"):
            if not str(getattr(self, label)).strip():
                raise InvalidParameterError(f"reactive trigger {label} must not be empty")
        if require_finite("target_per_replica", self.target_per_replica) <= 0:
            raise InvalidParameterError("reactive trigger target_per_replica must be > 0")
        milli_threshold("reactive trigger target_per_replica", self.target_per_replica)

    def to_trigger(self) -> dict:
        return {
            "type": "prometheus",
            "name": "reactive",
            "metricType": "AverageValue",
            "metadata": {
                "serverAddress": self.server_address,
                "query": self.query,
                "threshold": milli_threshold("target_per_replica", self.target_per_replica),
                # no series is a lost target, not an idle fleet: fail towards the fallback
                "ignoreNullValues": "false",
            },
        }


def keda_hpa_name(name: str) -> str:
    """The name of the HPA KEDA creates for the ScaledObject ``name``: its own
    ``keda-hpa-<name>`` while that fits the 63 characters KEDA 2.20 checks, else one of 63
    characters unique to ``name`` (the first characters and 10 hex digits of its SHA-256),
    which the object then states in ``horizontalPodAutoscalerConfig.name``."""
    if len(name) > MAX_NAME_CHARS or not _LABEL.fullmatch(name):
        raise InvalidParameterError(
            f"name {name[:80]!r} is not a DNS-1123 label of at most {MAX_NAME_CHARS} characters "
            "(lower case letters, digits and '-')"
        )
    if len(KEDA_HPA_PREFIX) + len(name) <= MAX_NAME_CHARS:
        return KEDA_HPA_PREFIX + name
    digest = hashlib.sha256(name.encode()).hexdigest()[:10]
    kept = name[: MAX_NAME_CHARS - len(KEDA_HPA_PREFIX) - len(digest) - 1].rstrip("-")
    return f"{KEDA_HPA_PREFIX}{kept}-{digest}"


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
    if (series < 1).any():
        raise InvalidParameterError("every plan hour needs at least one replica")
    return series


def keda_scaled_object(
    plan: GPUPlan | pd.DataFrame,
    *,
    name: str,
    namespace: str,
    deployment: str,
    mode: str = "live",
    desired_replicas_url: str | None = None,
    auth_ref: str | None = None,
    reactive: ReactiveTrigger | None = None,
    extra_triggers: Sequence[dict] = (),
    rules: ScheduleRules | None = None,
    timezone: str = "UTC",
    min_replicas: int | None = None,
    max_replicas: int | None = None,
    fallback_replicas: int | None = None,
    fallback_behavior: str = "static",
    failure_threshold: int = 3,
    behavior: ScalingBehavior | None = None,
    polling_interval_s: int = 30,
    hpa_tolerance: float | None = None,
) -> str:
    """A KEDA ScaledObject (YAML text) that executes ``plan``.

    plan: a GPUPlan (its executed ``replicas`` and rules) or a frame with ``hour`` (UTC) and
    ``replicas``. mode "live" needs ``desired_replicas_url`` (gpucast's
    ``/v1/series/{name}/desired-replicas?profile=…``; ``auth_ref`` names a TriggerAuthentication
    holding a bearer API key). mode "cron" repeats a plan of at most 24 hours every day.
    rules (default: the plan's, else ScheduleRules()) give the cold-start lead, the hold and
    the floor. min_replicas defaults to the rules' floor in live mode and to the plan's
    minimum in cron mode (always >= 1); max_replicas to the quota when one is set, else twice
    the plan's peak (room for tomorrow's plans and for reactive bursts). fallback_replicas
    defaults to the plan's peak: what the fleet holds once a trigger's source has failed more
    than failure_threshold times in a row (KEDA falls back at failure failure_threshold + 1);
    fallback_behavior (:data:`FALLBACK_BEHAVIORS`) whether the failing trigger then answers
    those replicas ("static"), the current count ("currentReplicas": a scrape gap holds the
    fleet where it is) or the larger of the two.
    hpa_tolerance (default None: not written) sets the HPA's ``tolerance`` in both directions
    when no ``behavior`` is given; 0 makes the HPA hold exactly the replicas the plan asks (see
    :class:`ScalingBehavior` for the KEDA and Kubernetes versions that honour it).
    """
    if mode not in KEDA_MODES:
        raise InvalidParameterError(f"mode must be one of {KEDA_MODES}, got {mode!r}")
    if fallback_behavior not in FALLBACK_BEHAVIORS:
        raise InvalidParameterError(
            f"fallback_behavior must be one of {', '.join(FALLBACK_BEHAVIORS)}, "
            f"got {fallback_behavior!r}"
        )
    rules = rules or (plan.rules if isinstance(plan, GPUPlan) else ScheduleRules())
    per_replica = plan.gpus_per_replica if isinstance(plan, GPUPlan) else 1
    replicas = _hourly_replicas(plan, timezone)
    peak = int(replicas.max())
    behavior = behavior or ScalingBehavior.for_rules(rules, tolerance=hpa_tolerance)
    if mode == "cron":
        if len(replicas) > 24:
            raise InvalidParameterError("mode 'cron' repeats one day: give a plan of at most 24 h")
        default_floor = int(replicas.min())
    else:
        default_floor = max(math.ceil(rules.min_gpus / per_replica), 1)
    floor = require_int(
        "min_replicas", default_floor if min_replicas is None else min_replicas, minimum=1
    )
    quota = rules.max_gpus // per_replica if rules.max_gpus is not None else None
    ceiling = max_replicas if max_replicas is not None else (quota or 2 * peak)
    ceiling = require_int("max_replicas", ceiling, minimum=floor)
    if ceiling < peak:
        raise InvalidParameterError(f"max_replicas={ceiling} is below the plan's peak of {peak}")
    if ceiling > INT32_MAX:
        raise InvalidParameterError("max_replicas does not fit a Kubernetes int32")
    fallback = require_int(
        "fallback_replicas", peak if fallback_replicas is None else fallback_replicas, minimum=1
    )
    if not floor <= fallback <= ceiling:
        raise InvalidParameterError(
            f"fallback_replicas={fallback} must lie between min ({floor}) and max ({ceiling})"
        )
    if mode == "live":
        if not desired_replicas_url:
            raise InvalidParameterError("mode 'live' needs desired_replicas_url")
        triggers = [live_trigger(desired_replicas_url, auth_ref)]
    else:
        triggers = cron_triggers(
            replicas,
            floor=floor,
            lead_s=rules.cold_start_s,
            hold_s=behavior.scale_down_stabilization_s,
            timezone=timezone,
        )
    if reactive is not None:
        triggers.append(reactive.to_trigger())
    triggers.extend(dict(trigger) for trigger in extra_triggers)
    if not triggers:
        raise InvalidParameterError(
            "the plan never rises above min_replicas and no reactive trigger was given; "
            "a ScaledObject needs at least one trigger"
        )
    spec: dict = {
        "scaleTargetRef": {"name": deployment},
        "pollingInterval": require_int("polling_interval_s", polling_interval_s, minimum=1),
        "minReplicaCount": floor,
        "maxReplicaCount": ceiling,
    }
    if any(t["type"] != "cron" for t in triggers):  # fallback applies to metric triggers only
        spec["fallback"] = {
            "failureThreshold": require_int("failure_threshold", failure_threshold, minimum=1),
            "replicas": fallback,
        }
        if fallback_behavior != "static":
            spec["fallback"]["behavior"] = fallback_behavior
    hpa_config: dict[str, Any] = {"behavior": behavior.to_hpa()}
    if keda_hpa_name(name) != KEDA_HPA_PREFIX + name:
        hpa_config = {"name": keda_hpa_name(name), **hpa_config}
    spec["advanced"] = {"horizontalPodAutoscalerConfig": hpa_config}
    spec["triggers"] = triggers
    document = {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "gpucast"},
            "annotations": {
                "gpucast.io/plan-peak-replicas": str(peak),
                "gpucast.io/scale-down-hold-s": str(rules.scale_down_hold_s),
                "gpucast.io/cold-start-s": str(rules.cold_start_s),
            },
        },
        "spec": spec,
    }
    return yaml_dump(document)
