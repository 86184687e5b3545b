"""Every ScaledObject gpucast generates is one Kubernetes accepts: read as kubectl reads YAML
(goyaml.py) and checked against KEDA's own CRD (vendor/keda) and the HPA's rules."""

from __future__ import annotations

import copy
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import capacity as cap
from app.api.schemas import DesiredReplicasOut
from app.plans.kubernetes import k8s_name
from capacity.kubernetes import kube_yaml
from tests.conformance import goyaml, keda_scalers
from tests.conformance.kube_validation import problems

URL = "http://gpucast.gpucast.svc:8000/v1/series/demo/servegen-m-small/desired-replicas?profile=p"
REACTIVE = cap.ReactiveTrigger(
    server_address="http://prometheus:9090",
    query='sum(vllm:num_requests_running{model_name="m"})',
    target_per_replica=24,
)
DEPLOY_EXAMPLE = Path(__file__).parents[2] / "deploy" / "kubernetes" / "scaledobject.yaml"


def plan(replicas: list[int], start: str = "2026-12-02 00:00") -> pd.DataFrame:
    hours = pd.date_range(start, periods=len(replicas), freq="h", tz="UTC")
    return pd.DataFrame({"hour": hours, "replicas": replicas})


DAY = [2] * 8 + [6] * 10 + [2] * 6
VARIANTS: dict[str, dict[str, Any]] = {
    "live": {"desired_replicas_url": URL},
    "live, bearer auth, reactive": {
        "desired_replicas_url": URL,
        "auth_ref": "gpucast-api-key",
        "reactive": REACTIVE,
    },
    "live, tolerance 0": {"desired_replicas_url": URL, "hpa_tolerance": 0.0},
    "live, quota and hold": {
        "desired_replicas_url": URL,
        "rules": cap.ScheduleRules(max_gpus=12, scale_down_hold_s=900, min_gpus=2),
    },
    "cron": {"mode": "cron", "timezone": "Europe/Berlin"},
    "cron, no cold start, one-hour hold, one-hour runs": {
        "mode": "cron",
        "rules": cap.ScheduleRules(cold_start_s=0, scale_down_hold_s=3600),
        "replicas": [2, 6, 2, 5, 2] * 4 + [2] * 4,
    },
    "cron, all day above the floor": {"mode": "cron", "min_replicas": 1, "replicas": [6] * 24},
    "cron, 23 hours with a one-hour cold start": {
        "mode": "cron",
        "rules": cap.ScheduleRules(cold_start_s=3600, scale_down_hold_s=0),
        "replicas": [2] + [7] * 23,
    },
    "cron, reactive": {"mode": "cron", "reactive": REACTIVE},
}


def generate(series: str = "demo/servegen-m-small", **kwargs: Any) -> str:
    name = k8s_name(series)
    replicas = kwargs.pop("replicas", DAY)
    return cap.keda_scaled_object(
        plan(replicas), name=name, namespace="inference", deployment=name, **kwargs
    )


@pytest.mark.parametrize("label", list(VARIANTS))
def test_every_variant_is_accepted_by_kubernetes(label: str) -> None:
    document = goyaml.load(generate(**VARIANTS[label]))
    assert problems(document) == []
    for trigger in document["spec"]["triggers"]:
        assert all(goyaml.is_string(v) for v in trigger["metadata"].values()), trigger
        refusal = {
            "cron": keda_scalers.cron_refusal(trigger["metadata"]),
            "metrics-api": keda_scalers.metrics_api_refusal(trigger),
            "prometheus": keda_scalers.prometheus_refusal(trigger),
        }[trigger["type"]]
        assert refusal is None, (trigger, refusal)


def test_the_plan_trigger_sets_tolerance_zero_where_asked() -> None:
    behavior = goyaml.load(generate(desired_replicas_url=URL, hpa_tolerance=0.0))["spec"][
        "advanced"
    ]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleUp"]["tolerance"] == "0" == behavior["scaleDown"]["tolerance"]
    default = goyaml.load(generate(desired_replicas_url=URL))["spec"]["advanced"]
    assert "tolerance" not in default["horizontalPodAutoscalerConfig"]["behavior"]["scaleUp"]


def test_the_validator_refuses_what_kubernetes_refuses() -> None:
    """The checks are not vacuous: each change below is one the API server would refuse."""
    good = goyaml.load(generate(desired_replicas_url=URL, reactive=REACTIVE, hpa_tolerance=0.0))
    assert problems(good) == []
    behavior = ("spec", "advanced", "horizontalPodAutoscalerConfig", "behavior")
    changes = {
        "numeric metadata": (("spec", "triggers", 1, "metadata"), "threshold", 24.0),
        "unknown field": (("spec",), "tolerance", "0"),
        "tolerance in a policy": (
            (*behavior, "scaleUp", "policies", 0),
            "tolerance",
            "0",
        ),  # where KEDA's 2.18 docs show it: not a field there
        "negative tolerance": ((*behavior, "scaleDown"), "tolerance", "-1"),
        "min above max": (("spec",), "minReplicaCount", 10_000),
        "no triggers": (("spec",), "triggers", []),
        "window too long": ((*behavior, "scaleDown"), "stabilizationWindowSeconds", 3601),
        "name too long": (("metadata",), "name", "a" * 64),
        "name not a DNS name": (("metadata",), "name", "Demo/ServeGen"),
        "int32 overflow": (("spec",), "maxReplicaCount", 2**31),
    }
    for label, (path, key, value) in changes.items():
        document = copy.deepcopy(good)
        target = document
        for step in path:
            target = target[step]
        target[key] = value
        assert problems(document), label


@pytest.mark.parametrize(
    "value",
    [0.000001, 1.23456789e-7, 0.0004999],
)
def test_thresholds_keda_cannot_hold_are_refused(value: float) -> None:
    with pytest.raises(cap.InvalidParameterError, match="thousandths"):
        cap.ReactiveTrigger(server_address="http://p:9090", query="up", target_per_replica=value)


@given(st.integers(min_value=1, max_value=10**12))
def test_metadata_numbers_parse_back_exactly(thousandths: int) -> None:
    value = thousandths / 1000
    trigger = cap.ReactiveTrigger(server_address="http://p", query="q", target_per_replica=value)
    text = trigger.to_trigger()["metadata"]["threshold"]
    assert keda_scalers.go_float(text) == value  # Go's ParseFloat reads back the float asked
    assert keda_scalers.milli_target(text) == Decimal(thousandths) / 1000  # and KEDA's target
    assert goyaml.load(kube_yaml.dump({"threshold": text})) == {"threshold": text}


def test_the_issue_numbers() -> None:
    big = cap.ReactiveTrigger(server_address="http://p", query="q", target_per_replica=1234567.5)
    assert big.to_trigger()["metadata"]["threshold"] == "1234567.5"  # was 1.23457e+06
    text = generate(desired_replicas_url=URL, reactive=big)
    (live, reactive) = goyaml.load(text)["spec"]["triggers"]
    assert reactive["metadata"]["threshold"] == "1234567.5"
    assert live["metadata"]["targetValue"] == "1"


@pytest.mark.parametrize("name", ["1e5", "0o17", "y", "no", "007", "1e-06", "on"])
def test_names_and_values_go_yaml_would_retype_are_quoted(name: str) -> None:
    text = cap.keda_scaled_object(
        plan([1, 2]), name=name, namespace="n", deployment=name, desired_replicas_url=URL
    )
    document = goyaml.load(text)
    assert document["metadata"]["name"] == name
    assert document["spec"]["scaleTargetRef"]["name"] == name


def test_every_annotation_and_label_is_a_string() -> None:
    document = goyaml.load(generate(mode="cron"))
    for value in [*document["metadata"]["annotations"].values(), *document["metadata"]["labels"]]:
        assert goyaml.is_string(value), value


def test_the_live_trigger_reads_the_endpoint_field() -> None:
    (live,) = goyaml.load(generate(desired_replicas_url=URL))["spec"]["triggers"]
    assert live["metadata"]["valueLocation"] in DesiredReplicasOut.model_fields
    assert live["metricType"] == "AverageValue"


def test_the_deploy_example_is_accepted() -> None:
    """deploy/kubernetes/scaledobject.yaml (its auth wiring: tests/test_compose.py)."""
    parts = DEPLOY_EXAMPLE.read_text().split("\n---\n")
    (scaled,) = [d for d in map(goyaml.load, parts) if d and d["kind"] == "ScaledObject"]
    assert problems(scaled) == []
    assert scaled["metadata"]["name"] == k8s_name("demo/servegen-m-small")
    (live, reactive) = scaled["spec"]["triggers"]
    assert keda_scalers.metrics_api_refusal(live) is None
    assert keda_scalers.prometheus_refusal(reactive) is None
    # what the default (auto) writes beside a reactive trigger
    assert scaled["spec"]["fallback"]["behavior"] == "currentReplicas"
