"""The replay's failed reads are the ScaledObject's: for the failureThreshold and
pollingInterval gpucast writes, the replay's fleet reaches the fallback no earlier than KEDA
would (its (failureThreshold + 1)-th failed poll) and less than one replay tick later, and
then holds what KEDA's fallback.behavior answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import capacity as cap
from tests.conformance import goyaml, keda_scalers
from tests.conformance.kube_validation import problems

T0 = pd.Timestamp("2026-12-02T00:00Z")


def _document(threshold: int, polling_s: int, behavior: str = "static") -> dict:
    hours = pd.date_range(T0, periods=3, freq="h")
    return goyaml.load(
        cap.keda_scaled_object(
            pd.DataFrame({"hour": hours, "replicas": [2, 2, 2]}),
            name="a",
            namespace="b",
            deployment="c",
            desired_replicas_url="http://gpucast:8000/v1/series/a/desired-replicas",
            reactive=cap.ReactiveTrigger(
                server_address="http://prometheus:9090",
                query="sum(rate(tokens_total[1m]))",
                target_per_replica=100,
            ),
            failure_threshold=threshold,
            polling_interval_s=polling_s,
            fallback_replicas=20,
            fallback_behavior=behavior,
            max_replicas=40,
        )
    )


def _written(threshold: int, polling_s: int, behavior: str = "static") -> dict:
    return _document(threshold, polling_s, behavior)["spec"]


def _keda_fallback_after_s(spec: dict) -> int:
    """Seconds from the first failed poll to the poll at which KEDA's fallback is in force."""
    (trigger,) = [t for t in spec["triggers"] if t["type"] == "prometheus"]
    failures = 0
    for poll in range(1000):
        try:
            keda_scalers.prometheus_value(trigger, [])
        except keda_scalers.QueryFailed:
            failures += 1
        if keda_scalers.falls_back(failures, spec["fallback"]["failureThreshold"]):
            return poll * spec["pollingInterval"]
    raise AssertionError("KEDA never fell back")


@pytest.mark.parametrize("threshold, polling_s", [(3, 30), (1, 30), (5, 60), (2, 15), (4, 45)])
def test_the_replay_falls_back_when_the_written_object_does(threshold: int, polling_s: int) -> None:
    spec = _written(threshold, polling_s)
    desired, fleet = _replayed(spec, 800.0)
    first_failed_read = 61  # the tick at 01:01 reads the first unobserved minute
    reached = int(np.flatnonzero(desired == spec["fallback"]["replicas"])[0])
    replay_after_s = (reached - first_failed_read) * fleet.tick
    keda_after_s = _keda_fallback_after_s(spec)
    assert keda_after_s <= replay_after_s < keda_after_s + fleet.tick
    assert desired[first_failed_read:reached].max() == 8  # before it: the count is kept


def _replayed(spec: dict, before: float) -> tuple[np.ndarray, cap.Fleet]:
    """desired_replicas per minute of a replay at ``before`` tokens/s (100 per replica), an
    hour unobserved, then observed again, run with what ``spec`` writes."""
    fleet = cap.Fleet(
        per_gpu_tokens_per_s=100.0,
        rules=cap.ScheduleRules(cold_start_s=300, scale_down_hold_s=600),
        failure_threshold=spec["fallback"]["failureThreshold"],
        polling_interval_s=spec["pollingInterval"],
    )
    minutes = [before] * 60 + [np.nan] * 60 + [before] * 60
    load = pd.Series(minutes, index=pd.date_range(T0, periods=180, freq="min"))
    policy = cap.PlanPolicy(
        "plan",
        (cap.PlanDecision(at=T0, start=T0, gpus=np.array([2, 2, 2])),),
        reactive=cap.ReactiveSpec(target_utilization=1.0, tolerance=0.0),
        fallback_replicas=spec["fallback"]["replicas"],
        fallback_behavior=spec["fallback"].get("behavior", "static"),
    )
    result = cap.replay(
        load,
        [policy],
        fleet=fleet,
        start=T0,
        end=T0 + pd.Timedelta(hours=3),
        initial_tokens_per_s=before,
    )
    return result.timelines["plan"]["desired_replicas"].to_numpy(), fleet


@pytest.mark.parametrize("behavior", ["static", "currentReplicas", "currentReplicasIfHigher"])
@pytest.mark.parametrize("before", [800.0, 3000.0])
def test_the_replay_holds_what_the_written_fallback_behavior_answers(
    behavior: str, before: float
) -> None:
    document = _document(3, 30, behavior)
    assert problems(document) == []  # KEDA 2.19's CRD takes the behavior as written
    spec = document["spec"]
    assert spec["fallback"].get("behavior", "static") == behavior
    desired, fleet = _replayed(spec, before)
    current = int(before / 100)  # 8 or 30 replicas before the gap; the plan asks for 2
    reached = 61 + fleet.fallback_after_ticks - 1
    answered = keda_scalers.fallback_replicas(spec["fallback"], current)
    # the HPA holds the larger of the plan's 2 and what the failing trigger answers
    assert (desired[reached:121] == max(answered, 2)).all()
    assert desired[61:reached].max() == current  # before the fallback: the count is kept


def test_static_is_not_written_and_an_unknown_behavior_is_refused() -> None:
    assert "behavior" not in _written(3, 30)["fallback"]
    with pytest.raises(cap.InvalidParameterError, match="fallback_behavior must be one of"):
        _written(3, 30, "currentReplicasIfLower")
