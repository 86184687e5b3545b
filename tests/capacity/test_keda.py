"""KEDA ScaledObject output, validated against a JSON schema of the fields KEDA documents."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pandas as pd
import pytest
import yaml

import capacity as cap
from tests.capacity.conftest import make_forecast

SCHEMA = json.loads(
    (Path(__file__).parent / "schemas" / "keda-scaledobject.schema.json").read_text()
)
URL = "http://gpucast.ops:8000/v1/series/chat/desired-replicas?profile=h100"
REACTIVE = cap.ReactiveTrigger(
    server_address="http://prometheus:9090",
    query='sum(vllm:num_requests_running{model_name="chat"})',
    target_per_replica=24,
)


def _plan(replicas: list[int], start: str = "2026-12-01 22:00") -> pd.DataFrame:
    hours = pd.date_range(start, periods=len(replicas), freq="h", tz="UTC")
    return pd.DataFrame({"hour": hours, "replicas": replicas})


def _valid(text: str) -> dict:
    document = yaml.safe_load(text)
    jsonschema.validate(document, SCHEMA)
    return document


def _gpu_plan(**kwargs) -> cap.GPUPlan:
    forecast = make_forecast([1_000 * 3600, 5_000 * 3600, 1_000 * 3600, 1_000 * 3600])
    return cap.plan_gpus(forecast, per_gpu_tokens_per_s=1000, gpus_per_replica=2, **kwargs)


def test_the_schema_catches_what_kubernetes_would_reject() -> None:
    good = _valid(
        cap.keda_scaled_object(
            _gpu_plan(), name="chat", namespace="ml", deployment="vllm", desired_replicas_url=URL
        )
    )
    bad_cases = [
        lambda d: d["spec"]["triggers"][0]["metadata"].update(targetValue=1),  # not a string
        lambda d: d["spec"]["scaleTargetRef"].pop("name"),
        lambda d: d["spec"].update(minReplicaCount=0),
        lambda d: d["spec"]["fallback"].pop("replicas"),
        lambda d: d["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"][
            "policies"
        ][0].update(periodSeconds=1801),
        lambda d: d["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"][
            "scaleDown"
        ].update(stabilizationWindowSeconds=3601),
        lambda d: d["spec"]["triggers"][0].pop("type"),
    ]
    for breaks in bad_cases:
        document = yaml.safe_load(yaml.safe_dump(good))
        breaks(document)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(document, SCHEMA)


def test_live_mode_polls_desired_replicas_with_fallback_and_the_hold() -> None:
    plan = _gpu_plan()
    assert plan.frame["replicas"].tolist() == [1, 4, 4, 1]  # the dip after the peak is held
    spec = _valid(
        cap.keda_scaled_object(
            plan, name="chat", namespace="ml", deployment="vllm", desired_replicas_url=URL
        )
    )["spec"]
    (live,) = spec["triggers"]
    assert live["type"] == "metrics-api"
    assert live["metadata"] == {
        "url": URL,
        "format": "json",
        "valueLocation": "desired_replicas",
        "targetValue": "1",
    }
    assert live["metricType"] == "AverageValue"  # what makes targetValue 1 mean "N replicas"
    assert spec["fallback"] == {"failureThreshold": 3, "replicas": 4}  # the plan's peak
    assert spec["minReplicaCount"] == 1
    assert spec["maxReplicaCount"] == 8  # twice the peak: room for tomorrow's plans
    behavior = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleUp"]["stabilizationWindowSeconds"] == 0
    assert behavior["scaleDown"]["stabilizationWindowSeconds"] == 1800
    assert not any(t["type"] == "cron" for t in spec["triggers"])


def test_a_reactive_trigger_a_quota_and_a_custom_hold_are_carried_out() -> None:
    plan = _gpu_plan(max_gpus=6, scale_down_hold_s=900, min_gpus=2)
    spec = _valid(
        cap.keda_scaled_object(
            plan,
            name="chat",
            namespace="ml",
            deployment="vllm",
            desired_replicas_url=URL,
            reactive=REACTIVE,
            auth_ref="gpucast-api-key",
        )
    )["spec"]
    live, reactive = spec["triggers"]
    assert live["authenticationRef"] == {"name": "gpucast-api-key"}
    assert live["metadata"]["authMode"] == "bearer"
    assert reactive["type"] == "prometheus"
    assert reactive["metadata"]["threshold"] == "24"
    assert reactive["metadata"]["query"] == REACTIVE.query
    assert spec["maxReplicaCount"] == 3  # the quota: 6 GPUs of 2 per replica
    assert spec["minReplicaCount"] == 1
    hold = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]
    assert hold["stabilizationWindowSeconds"] == 900


def test_cron_mode_repeats_daily_with_a_safe_floor_and_no_dates() -> None:
    replicas = [2] * 8 + [6] * 10 + [2] * 6
    spec = _valid(
        cap.keda_scaled_object(
            _plan(replicas, "2026-12-02 00:00"),
            name="a",
            namespace="b",
            deployment="c",
            mode="cron",
            timezone="Europe/Berlin",
        )
    )["spec"]
    (trigger,) = spec["triggers"]
    # 08:00 UTC is 09:00 in Berlin: started 5 minutes early, ended one 30-minute hold early
    assert trigger["metadata"] == {
        "timezone": "Europe/Berlin",
        "start": "55 8 * * *",
        "end": "30 18 * * *",
        "desiredReplicas": "6",
    }
    assert spec["minReplicaCount"] == 2  # the plan's minimum holds whenever no trigger does
    assert "fallback" not in spec  # cron triggers cannot fail


def test_cron_mode_with_a_reactive_trigger_gets_a_fallback() -> None:
    spec = _valid(
        cap.keda_scaled_object(
            _plan([1, 3, 1]),
            name="a",
            namespace="b",
            deployment="c",
            mode="cron",
            reactive=REACTIVE,
        )
    )["spec"]
    assert [t["type"] for t in spec["triggers"]] == ["cron", "prometheus"]
    assert spec["fallback"]["replicas"] == 3


@pytest.mark.parametrize(
    ("kwargs", "plan", "message"),
    [
        ({"mode": "cron"}, [2, 2, 2], "needs at least one trigger"),
        ({"mode": "cron"}, [1, 2] * 13, "at most 24 h"),
        ({}, [1, 2], "needs desired_replicas_url"),
        ({"desired_replicas_url": "ftp://x"}, [1, 2], "http"),
        ({"desired_replicas_url": URL, "max_replicas": 3}, [1, 5], "below the plan's peak of 5"),
        ({"desired_replicas_url": URL, "mode": "push"}, [1, 2], "mode must be one of"),
        ({"desired_replicas_url": URL, "min_replicas": 0}, [1, 2], "min_replicas must be >= 1"),
        ({"desired_replicas_url": URL}, [0, 2], "at least one replica"),
    ],
)
def test_keda_rejects_unusable_plans(kwargs: dict, plan: list[int], message: str) -> None:
    with pytest.raises(cap.InvalidParameterError, match=message):
        cap.keda_scaled_object(_plan(plan), name="a", namespace="b", deployment="c", **kwargs)


def test_gaps_in_the_plan_are_rejected() -> None:
    plan = _plan([1, 2, 3]).drop(index=1)
    with pytest.raises(cap.InvalidParameterError, match="consecutive whole hours"):
        cap.keda_scaled_object(
            plan, name="a", namespace="b", deployment="c", desired_replicas_url=URL
        )


def test_behavior_is_validated_against_the_kubernetes_bounds() -> None:
    with pytest.raises(
        cap.InvalidParameterError, match="scale_down_stabilization_s must be <= 3600"
    ):
        cap.ScalingBehavior(scale_down_stabilization_s=4000)
    with pytest.raises(cap.InvalidParameterError, match="scale_up_period_s must be <= 1800"):
        cap.ScalingBehavior(scale_up_period_s=2000)
    with pytest.raises(cap.InvalidParameterError, match="scale_down_pods must be >= 1"):
        cap.ScalingBehavior(scale_down_pods=0)
    behavior = cap.ScalingBehavior(scale_down_pods=2, scale_down_stabilization_s=900)
    text = cap.keda_scaled_object(
        _plan([1, 2]),
        name="a",
        namespace="b",
        deployment="c",
        desired_replicas_url=URL,
        behavior=behavior,
    )
    down = _valid(text)["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert down["scaleDown"]["policies"] == [{"type": "Pods", "value": 2, "periodSeconds": 15}]
