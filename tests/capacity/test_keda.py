"""KEDA ScaledObject output, parsed back with yaml.safe_load."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

import capacity as cap
from tests.capacity.conftest import make_forecast


def _plan(replicas: list[int], start: str = "2026-12-01 22:00") -> pd.DataFrame:
    hours = pd.date_range(start, periods=len(replicas), freq="h", tz="UTC")
    return pd.DataFrame({"hour": hours, "replicas": replicas})


def _load(text: str) -> dict:
    document = yaml.safe_load(text)
    assert document["apiVersion"] == "keda.sh/v1alpha1"
    assert document["kind"] == "ScaledObject"
    return document


def test_cron_triggers_follow_the_plan_across_midnight() -> None:
    text = cap.keda_scaled_object(
        _plan([2, 4, 4, 6, 2]), name="llama", namespace="inference", deployment="vllm"
    )
    spec = _load(text)["spec"]
    assert spec["scaleTargetRef"] == {"name": "vllm"}
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (2, 6)
    assert [t["metadata"] for t in spec["triggers"]] == [
        {"timezone": "UTC", "start": "0 23 1 12 *", "end": "0 1 2 12 *", "desiredReplicas": "4"},
        {"timezone": "UTC", "start": "0 1 2 12 *", "end": "0 2 2 12 *", "desiredReplicas": "6"},
    ]
    behavior = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleUp"]["stabilizationWindowSeconds"] == 0
    assert behavior["scaleUp"]["policies"] == [
        {"type": "Percent", "value": 100, "periodSeconds": 15}
    ]
    assert behavior["scaleDown"]["stabilizationWindowSeconds"] == 600
    assert behavior["scaleDown"]["policies"] == [{"type": "Pods", "value": 1, "periodSeconds": 120}]


def test_from_a_gpu_plan_with_lead_time_timezone_and_a_reactive_trigger() -> None:
    forecast = make_forecast([1_000 * 3600, 5_000 * 3600, 1_000 * 3600])
    plan = cap.plan_gpus(forecast, per_gpu_tokens_per_s=1000, gpus_per_replica=2)
    prometheus = {
        "type": "prometheus",
        "metadata": {
            "serverAddress": "http://prometheus:9090",
            "query": "sum(vllm:num_requests_running)",
            "threshold": "24",
        },
    }
    text = cap.keda_scaled_object(
        plan,
        name="p",
        namespace="n",
        deployment="d",
        timezone="Europe/Berlin",
        lead_minutes=10,
        extra_triggers=[prometheus],
    )
    spec = _load(text)["spec"]
    replicas = plan.frame["replicas"].tolist()
    assert replicas == [1, 4, 1]
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (1, 8)
    cron, reactive = spec["triggers"]
    # 2026-12-02 01:00 UTC is 02:00 in Berlin; 10 minutes early is 01:50.
    assert cron["metadata"]["start"] == "50 1 2 12 *"
    assert cron["metadata"]["end"] == "0 3 2 12 *"
    assert cron["metadata"]["timezone"] == "Europe/Berlin"
    assert reactive == prometheus


def test_repeat_daily_uses_hour_only_cron() -> None:
    replicas = [1] * 8 + [3] * 10 + [1] * 6
    text = cap.keda_scaled_object(
        _plan(replicas, "2026-12-02 00:00"),
        name="a",
        namespace="b",
        deployment="c",
        repeat_daily=True,
    )
    (trigger,) = _load(text)["spec"]["triggers"]
    assert trigger["metadata"]["start"] == "0 8 * * *"
    assert trigger["metadata"]["end"] == "0 18 * * *"


@pytest.mark.parametrize(
    ("kwargs", "plan", "message"),
    [
        ({}, [2, 2, 2], "needs at least one trigger"),
        ({"max_replicas": 3}, [1, 5], "below the plan's peak of 5"),
        ({"repeat_daily": True}, [1, 2] * 13, "at most 24 hours"),
        ({"lead_minutes": 60}, [1, 2], "lead_minutes must be < 60"),
    ],
)
def test_keda_rejects_unusable_plans(kwargs: dict, plan: list[int], message: str) -> None:
    with pytest.raises(cap.InvalidParameterError, match=message):
        cap.keda_scaled_object(_plan(plan), name="a", namespace="b", deployment="c", **kwargs)


def test_gaps_in_the_plan_are_rejected() -> None:
    plan = _plan([1, 2, 3]).drop(index=1)
    with pytest.raises(cap.InvalidParameterError, match="consecutive whole hours"):
        cap.keda_scaled_object(plan, name="a", namespace="b", deployment="c")


def test_custom_behavior_is_rendered_and_validated() -> None:
    behavior = cap.ScalingBehavior(scale_up_percent=50, scale_down_stabilization_s=900)
    text = cap.keda_scaled_object(
        _plan([1, 2]), name="a", namespace="b", deployment="c", behavior=behavior
    )
    rendered = _load(text)["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert rendered["scaleUp"]["policies"][0]["value"] == 50
    assert rendered["scaleDown"]["stabilizationWindowSeconds"] == 900
    with pytest.raises(cap.InvalidParameterError, match="scale_down_pods must be >= 1"):
        cap.ScalingBehavior(scale_down_pods=0)
