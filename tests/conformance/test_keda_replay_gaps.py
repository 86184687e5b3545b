"""The replay's failed reads are the ScaledObject's: for the failureThreshold and
pollingInterval gpucast writes, the replay's fleet reaches the fallback no earlier than KEDA
would (its (failureThreshold + 1)-th failed poll) and less than one replay tick later."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import capacity as cap
from tests.conformance import goyaml, keda_scalers

T0 = pd.Timestamp("2026-12-02T00:00Z")


def _written(threshold: int, polling_s: int) -> dict:
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
            max_replicas=40,
        )
    )["spec"]


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
    rules = cap.ScheduleRules(cold_start_s=300, scale_down_hold_s=600)
    fleet = cap.Fleet(
        per_gpu_tokens_per_s=100.0,
        rules=rules,
        failure_threshold=spec["fallback"]["failureThreshold"],
        polling_interval_s=spec["pollingInterval"],
    )
    minutes = [800.0] * 60 + [np.nan] * 60 + [800.0] * 60
    load = pd.Series(minutes, index=pd.date_range(T0, periods=180, freq="min"))
    decision = cap.PlanDecision(at=T0, start=T0, gpus=np.array([2, 2, 2]))
    policy = cap.PlanPolicy(
        "plan",
        (decision,),
        reactive=cap.ReactiveSpec(target_utilization=1.0, tolerance=0.0),
        fallback_replicas=spec["fallback"]["replicas"],
    )
    result = cap.replay(
        load,
        [policy],
        fleet=fleet,
        start=T0,
        end=T0 + pd.Timedelta(hours=3),
        initial_tokens_per_s=800.0,
    )
    desired = result.timelines["plan"]["desired_replicas"].to_numpy()
    first_failed_read = 61  # the tick at 01:01 reads the first unobserved minute
    reached = int(np.flatnonzero(desired == spec["fallback"]["replicas"])[0])
    replay_after_s = (reached - first_failed_read) * fleet.tick
    keda_after_s = _keda_fallback_after_s(spec)
    assert keda_after_s <= replay_after_s < keda_after_s + fleet.tick
    assert desired[first_failed_read:reached].max() == 8  # before it: the count is kept
