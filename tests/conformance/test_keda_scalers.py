"""The triggers pass KEDA's scaler rules and, run as KEDA and the HPA run them, hold the plan:
cron windows (any plan, cold start and hold), fallback, and the HPA's tolerance."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import capacity as cap
from tests.conformance import goyaml, keda_scalers
from tests.conformance.kube_validation import problems

ROOT = Path(__file__).parents[2]
START = datetime(2026, 12, 2, tzinfo=UTC)


def cron_object(
    replicas: list[int],
    *,
    cold_start_s: int,
    hold_s: int,
    floor: int | None,
    start: datetime = START,
    zone: str = "UTC",
) -> dict:
    """A cron ScaledObject of hourly ``replicas`` from ``start``, in ``zone``."""
    hours = pd.date_range(start, periods=len(replicas), freq="h")
    text = cap.keda_scaled_object(
        pd.DataFrame({"hour": hours, "replicas": replicas}),
        name="chat",
        namespace="inference",
        deployment="chat",
        mode="cron",
        rules=cap.ScheduleRules(cold_start_s=cold_start_s, scale_down_hold_s=hold_s),
        min_replicas=floor,
        timezone=zone,
        hpa_tolerance=0.0,
    )
    return goyaml.load(text)


def fleet(document: dict, minutes: int, start: datetime = START) -> list[int]:
    """Replicas the HPA keeps, minute by minute from ``start``: each minute the largest cron
    trigger value (1 when none is active), within min/max replicas, then scale-down only when
    every recommendation of the stabilization window was lower (tolerance 0, as written)."""
    spec = document["spec"]
    behavior = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    window = behavior["scaleDown"]["stabilizationWindowSeconds"] // 60
    values = [keda_scalers.cron_values(t["metadata"], start, minutes) for t in spec["triggers"]]
    wanted = []
    for minute in range(minutes):
        value = max([v[minute] for v in values] or [1])
        wanted.append(min(max(value, spec["minReplicaCount"]), spec["maxReplicaCount"]))
    return [max(wanted[max(0, m - window) : m + 1]) for m in range(minutes)]


def test_the_issue_case_is_accepted() -> None:
    """cold_start_s=0 and scale_down_hold_s=3600: one-hour windows used to start and end at
    the same minute (``0 17 * * *`` twice), which KEDA refuses."""
    document = cron_object([2] * 17 + [6] + [2] * 6, cold_start_s=0, hold_s=3600, floor=None)
    (trigger,) = document["spec"]["triggers"]
    assert keda_scalers.cron_refusal(trigger["metadata"]) is None
    assert trigger["metadata"]["start"] != trigger["metadata"]["end"]
    assert problems(document) == []


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    replicas=st.lists(st.integers(1, 12), min_size=1, max_size=24),
    cold_start_s=st.sampled_from([0, 1, 59, 60, 300, 1800, 3599, 3600]),
    hold_s=st.sampled_from([0, 59, 60, 900, 1800, 3540, 3599, 3600]),
    lower_floor=st.booleans(),
)
def test_any_plan_gives_windows_keda_accepts_and_the_fleet_holds_the_plan(
    replicas: list[int], cold_start_s: int, hold_s: int, lower_floor: bool
) -> None:
    floor = 1 if lower_floor else None
    # never above the floor: no trigger to write (refused with a clear error)
    assume(max(replicas) > (1 if lower_floor else min(replicas)))
    document = cron_object(replicas, cold_start_s=cold_start_s, hold_s=hold_s, floor=floor)
    assert problems(document) == []
    for trigger in document["spec"]["triggers"]:
        assert keda_scalers.cron_refusal(trigger["metadata"]) is None, trigger
    held = fleet(document, 3 * 24 * 60)
    lead = -(-cold_start_s // 60)
    for day in (1, 2):  # after a day of warm-up the schedule repeats
        for hour, count in enumerate(replicas):
            first = (day * 24 + hour) * 60
            ordered = range(first - lead, first + 60)  # started one cold start early
            assert min(held[m] for m in ordered) >= count, (hour, count)


def test_a_one_minute_window_still_holds_its_hour() -> None:
    document = cron_object([2, 9, 2, 2], cold_start_s=0, hold_s=3600, floor=None)
    (trigger,) = document["spec"]["triggers"]
    assert (trigger["metadata"]["start"], trigger["metadata"]["end"]) == ("0 1 * * *", "1 1 * * *")
    held = fleet(document, 2 * 24 * 60)
    assert min(held[24 * 60 + 60 : 24 * 60 + 120]) == 9


@pytest.mark.parametrize("threshold", [1, 3, 5])
def test_fallback_starts_after_more_than_failure_threshold_failures(threshold: int) -> None:
    assert not keda_scalers.falls_back(threshold, threshold)
    assert keda_scalers.falls_back(threshold + 1, threshold)


def test_the_docs_state_keda_fallback_semantics() -> None:
    """The README and the deploy guide say when KEDA falls back, as KEDA counts it: with the
    generated failureThreshold 3, at the 4th failed poll in a row."""
    spec = goyaml.load(
        cap.keda_scaled_object(
            pd.DataFrame({"hour": pd.date_range(START, periods=2, freq="h"), "replicas": [1, 2]}),
            name="a",
            namespace="b",
            deployment="c",
            desired_replicas_url="http://gpucast:8000/v1/series/a/desired-replicas?profile=p",
        )
    )["spec"]
    failing = spec["fallback"]["failureThreshold"] + 1
    assert keda_scalers.falls_back(failing, spec["fallback"]["failureThreshold"])
    for doc in ("README.md", "deploy/README.md"):
        text = " ".join((ROOT / doc).read_text().split())
        assert "3 failed polls" not in text and "three polls in a row" not in text, doc
        assert re.search(r"4th failed poll", text), doc


def reactive_fleet(spec: dict, polls: list[list[float]]) -> list[int]:
    """Replicas KEDA and the HPA ask for at each poll of the reactive trigger alone (the plan
    trigger answering its floor), the reactive query returning ``polls[i]``: an AverageValue
    metric of the total over the threshold, or the fallback's replicas once more polls than
    failureThreshold failed in a row."""
    (trigger,) = [t for t in spec["triggers"] if t["type"] == "prometheus"]
    threshold = float(trigger["metadata"]["threshold"])
    failures, asked = 0, []
    for samples in polls:
        try:
            total = keda_scalers.prometheus_value(trigger, samples)
            failures = 0
            replicas = math.ceil(total / threshold - 1e-9)
        except keda_scalers.QueryFailed:
            failures += 1
            fallback = spec["fallback"]
            replicas = (
                fallback["replicas"]
                if keda_scalers.falls_back(failures, fallback["failureThreshold"])
                else asked[-1]
            )
        asked.append(max(replicas, spec["minReplicaCount"]))
    return asked


@pytest.mark.parametrize("mode", ["live", "cron"])
def test_a_lost_scrape_target_falls_back_instead_of_scaling_down(mode: str) -> None:
    """The serving pods' metrics vanish (an empty result, not a 0): the fleet holds what it
    ran, then the fallback (the plan's peak) — never the floor KEDA's default 0 would give."""
    hours = pd.date_range(START, periods=24, freq="h")
    spec = goyaml.load(
        cap.keda_scaled_object(
            pd.DataFrame({"hour": hours, "replicas": [2] * 8 + [6] * 10 + [2] * 6}),
            name="a",
            namespace="b",
            deployment="c",
            mode=mode,
            desired_replicas_url=(
                None if mode == "cron" else "http://gpucast:8000/v1/series/a/desired-replicas"
            ),
            reactive=cap.ReactiveTrigger(
                server_address="http://prometheus:9090",
                query='sum(vllm:num_requests_running{model_name="m"})',
                target_per_replica=24,
            ),
        )
    )["spec"]
    (trigger,) = [t for t in spec["triggers"] if t["type"] == "prometheus"]
    assert keda_scalers.prometheus_refusal(trigger) is None
    threshold = spec["fallback"]["failureThreshold"]
    asked = reactive_fleet(spec, [[240.0]] * 3 + [[]] * (threshold + 2) + [[240.0]])
    assert asked[:3] == [10, 10, 10]
    assert asked[3 : 3 + threshold] == [10] * threshold  # failing polls: nothing changes
    assert asked[3 + threshold :][:2] == [spec["fallback"]["replicas"]] * 2 == [6, 6]
    assert asked[-1] == 10
    # an idle fleet (series present, value 0) still scales down as the load says
    assert reactive_fleet(spec, [[240.0], [0.0]]) == [10, spec["minReplicaCount"]]
    # what KEDA's default would have done with the same lost target
    default = {**trigger, "metadata": {**trigger["metadata"], "ignoreNullValues": "true"}}
    assert keda_scalers.prometheus_value(default, []) == 0.0


def test_ignore_null_values_is_read_as_go_reads_a_bool() -> None:
    base = {"serverAddress": "http://p", "query": "q", "threshold": "1"}
    for text, refused in (("false", False), ("0", False), ("True", False), ("no", True)):
        trigger = {"type": "prometheus", "metadata": base | {"ignoreNullValues": text}}
        assert (keda_scalers.prometheus_refusal(trigger) is not None) is refused, text


# -- cron mode across the clock changes -------------------------------------------------------

# The 2027 changes: Europe/Berlin 2027-03-28 02:00 -> 03:00 and 2027-10-31 03:00 -> 02:00;
# America/New_York 2027-03-14 02:00 -> 03:00 and 2027-11-07 02:00 -> 01:00.
DST_2027 = {
    "Europe/Berlin": ("2027-03-28", "2027-10-31"),
    "America/New_York": ("2027-03-14", "2027-11-07"),
}


def zone_plan(
    by_local_hour: list[int], zone: str, *, cold_start_s: int, hold_s: int
) -> tuple[dict, ZoneInfo]:
    """A cron ScaledObject in ``zone`` of a plan made on an ordinary day (2027-01-11): 24
    hours whose replicas, by the zone's hour of day, are ``by_local_hour``."""
    tz = ZoneInfo(zone)
    first = datetime(2027, 1, 11, tzinfo=tz).astimezone(UTC)
    hours = pd.date_range(first, periods=24, freq="h")
    replicas = [by_local_hour[h.astimezone(tz).hour] for h in hours]
    options = {"cold_start_s": cold_start_s, "hold_s": hold_s, "floor": None}
    return cron_object(replicas, **options, start=first, zone=zone), tz


def check_across_the_change(
    by_local_hour: list[int], zone: str, day: str, *, cold_start_s: int, hold_s: int
) -> None:
    """On the days around a clock change the fleet holds, every minute, at least the plan's
    replicas of the local hour (one cold start early), and never more than the plan asks
    within two hours of the wall clock (plus the lead and the hold) of that minute: no window
    stays open for a day."""
    document, tz = zone_plan(by_local_hour, zone, cold_start_s=cold_start_s, hold_s=hold_s)
    for trigger in document["spec"]["triggers"]:
        assert keda_scalers.cron_refusal(trigger["metadata"]) is None, trigger
    start = datetime.fromisoformat(day).replace(tzinfo=tz).astimezone(UTC) - timedelta(days=2)
    minutes = 4 * 24 * 60
    held = fleet(document, minutes, start)
    floor = document["spec"]["minReplicaCount"]
    wall_hours = [(start + timedelta(minutes=m)).astimezone(tz).hour for m in range(minutes + 61)]
    lead = -(-cold_start_s // 60)
    back, ahead = -(-(hold_s + 7200) // 3600), -(-(cold_start_s + 7200) // 3600)
    for m in range(24 * 60, minutes):  # after a day of warm-up
        at = (start + timedelta(minutes=m)).astimezone(tz)
        needed = max(floor, by_local_hour[wall_hours[m]], by_local_hour[wall_hours[m + lead]])
        assert held[m] >= needed, (zone, f"{at:%Y-%m-%d %H:%M %Z}", held[m], needed)
        near = [by_local_hour[(at.hour + d) % 24] for d in range(-back, ahead + 1)]
        assert held[m] <= max(floor, *near), (zone, f"{at:%Y-%m-%d %H:%M %Z}", held[m], near)


def test_the_issue_windows_hold_across_both_2027_changes_in_berlin() -> None:
    """The demo's Berlin windows 01:55-02:30 and 02:55-04:30 (cold start 300 s, hold 1800 s):
    on 2027-03-28 their ends do not exist, and KEDA kept them active for a day."""
    by_hour = [1, 1, 4, 7, 7] + [1] * 19
    document, _ = zone_plan(by_hour, "Europe/Berlin", cold_start_s=300, hold_s=1800)
    windows = [(t["metadata"]["start"], t["metadata"]["end"]) for t in document["spec"]["triggers"]]
    for start, end in windows:
        for spec in (start, end):  # no boundary in 02:00-02:59, which 2027-03-28 skips
            assert parse_hour(spec) != 2, windows
    for day in DST_2027["Europe/Berlin"]:
        check_across_the_change(by_hour, "Europe/Berlin", day, cold_start_s=300, hold_s=1800)


def parse_hour(spec: str) -> int:
    return int(spec.split()[1])


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    by_local_hour=st.lists(st.integers(1, 9), min_size=24, max_size=24),
    cold_start_s=st.sampled_from([0, 60, 300, 1800, 3600]),
    hold_s=st.sampled_from([0, 60, 1800, 3600]),
    zone=st.sampled_from(sorted(DST_2027)),
    spring=st.booleans(),
)
def test_any_plan_holds_across_the_2027_clock_changes(
    by_local_hour: list[int], cold_start_s: int, hold_s: int, zone: str, spring: bool
) -> None:
    assume(max(by_local_hour) > min(by_local_hour))
    day = DST_2027[zone][0 if spring else 1]
    check_across_the_change(by_local_hour, zone, day, cold_start_s=cold_start_s, hold_s=hold_s)
