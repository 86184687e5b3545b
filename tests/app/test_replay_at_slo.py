"""The plan replay at a latency SLO, on an SLO model fitted to a real load-test table (a slice
of the NIM Llama-3-70B H100 table in ../shared/data/loadtests)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient

import capacity
from app.db import Database
from app.plans import PlanParams, ProfileFigures
from app.plans.replay import ReplayOptions, SeriesInputs, replay_series
from app.plans.slo_sizing import SloSizing
from tests.app.test_rolling_plan import assert_cheapest_meeting
from tests.app.test_slo_plans import (  # noqa: F401 - fixtures at_slo and h100
    CHAT,
    NIM_H100,
    add_profile,
    at_slo,
    h100,
    real_table,
)

FAST = ("seasonal_naive",)
END = pd.Timestamp("2026-11-20T00:00Z")
SHIFT = END - pd.Timedelta(days=5)  # answers grow from 200 to 1,000 tokens from here on
SLO = capacity.SloTarget(ttft_p95_s=2.0, tpot_p95_s=0.05)


@pytest.fixture(scope="module")
def sizing(shared_data: Path) -> SloSizing:
    table = real_table(shared_data, NIM_H100)
    return SloSizing(model=capacity.fit_slo_model(table, gpus_per_replica=4), slo=SLO)


@pytest.fixture(scope="module")
def profile(sizing: SloSizing) -> ProfileFigures:
    """The one-number profile at the SLO capacity of the chat mix (1,000 / 200 tokens)."""
    per_gpu = float(
        sizing.model.tokens_per_s_per_gpu(np.array([1000.0]), np.array([200.0]), SLO)[0]
    )
    return ProfileFigures("h100-nim", per_gpu, 4)


def history(*, shift: bool) -> pd.DataFrame:
    """12 days of hourly chat load, 1,200 tokens per request; with ``shift`` the same requests
    and tokens split 200 prompt / 1,000 completion from SHIFT on (decode-heavy)."""
    rng = np.random.default_rng(5)
    hours = pd.date_range(END - pd.Timedelta(days=12), END, freq="h", inclusive="left")
    shape = 1 + 0.6 * np.sin(2 * np.pi * (hours.hour.to_numpy() - 8) / 24)
    requests = 45_000 * shape * rng.lognormal(0, 0.05, len(hours))
    decode = shift & (hours >= SHIFT)
    prompt = np.where(decode, 200.0, 1000.0)
    return pd.DataFrame(
        {
            "hour": hours,
            "requests": requests,
            "prompt_tokens": requests * prompt,
            "completion_tokens": requests * (1200.0 - prompt),
            "total_tokens": requests * 1200.0,
            "peak_rps": requests / 3600 * 1.2,
        }
    )


def replay(
    profile: ProfileFigures, sizing: SloSizing | None, *, shift: bool, band: str = "yhat"
) -> dict:
    inputs = SeriesInputs(
        series="svc", history=history(shift=shift), events=(), profile=profile, slo=sizing
    )
    return replay_series(
        inputs,
        params=PlanParams(band=band),
        options=ReplayOptions(days=3, models=FAST),
    )


def by_policy(result: dict) -> dict[str, dict]:
    return {row["policy"]: row for row in result["policies"]}


def rounded_ratio(factor: float, gpu_hours: float, *, hours: int = 72, replica: int = 4) -> float:
    """The GPU-hours ratio of plans ``factor`` times the size of plans that held ``gpu_hours``
    over the replayed ``hours``, each rounded up to whole replicas: about half a replica per
    hour rides on both, so (factor x (m - 1/2) + 1/2) / m at m replicas per hour on average."""
    m = gpu_hours / hours / replica
    return (factor * (m - 0.5) + 0.5) / m


def slo_capacity_ratio(sizing: SloSizing) -> float:
    """What a GPU sustains within the SLO at the chat mix over the decode-heavy one, from the
    SLO model (apart from the replay)."""
    chat, decode = (
        float(sizing.model.tokens_per_s_per_gpu(np.array([p]), np.array([1200.0 - p]), SLO)[0])
        for p in (1000.0, 200.0)
    )
    return chat / decode


def test_a_decode_heavy_shift_is_sized_by_gpucast_and_missed_by_one_number_policies(
    profile: ProfileFigures, sizing: SloSizing
) -> None:
    plain = by_policy(replay(profile, None, shift=True))
    steady = replay(profile, sizing, shift=False)
    shifted = replay(profile, sizing, shift=True)
    assert all(capacity.SLO_KPI not in row for row in plain.values())
    assert shifted["slo"] == {"ttft_p95_s": 2.0, "tpot_p95_s": 0.05, "scored": True}
    steady_rows, shifted_rows = by_policy(steady), by_policy(shifted)
    for name, row in shifted_rows.items():
        # gpucast and the bound follow the mix; the HPA at equal risk is read at gpucast's risk
        if name in ("gpucast", "instant-bound", "reactive-at-equal-risk"):
            continue
        # policies sized at the one number cannot see the shift: same tokens, same fleet
        for kpi in ("gpu_hours", "cost_usd", "scale_events", "peak_gpus"):
            assert row[kpi] == plain[name][kpi] == steady_rows[name][kpi]
        # but they are judged on the one line, the SLO capacity at each minute's mix: the
        # profile's number at the chat mix, less at the decode-heavy one
        over = "time_over_capacity_share"
        assert steady_rows[name][over] == pytest.approx(plain[name][over])
        assert row[over] >= steady_rows[name][over]
        assert row[capacity.SLO_KPI] == row[over]
    # at the chat mix the SLO capacity is the profile's number, but this slice of the table
    # did not measure that mix: a plan sizes it at the low edge of the answer's range, as the
    # live plan does, so gpucast's plans are 1/share the size, less the rounding to whole
    # replicas, and over the SLO = over capacity
    gpucast = steady_rows["gpucast"]
    _, _, low_edge = capacity.sized_tokens_per_s_per_gpu(
        sizing.model, SLO, np.array([1000.0]), np.array([200.0])
    )
    share = float(low_edge[0]) / profile.tokens_per_s_per_gpu
    assert 0.9 < share < 0.99
    ratio = gpucast["gpu_hours"] / plain["gpucast"]["gpu_hours"]
    assert ratio == pytest.approx(rounded_ratio(1 / share, plain["gpucast"]["gpu_hours"]), rel=0.02)
    assert gpucast["peak_gpus"] >= plain["gpucast"]["peak_gpus"]
    assert gpucast["time_over_capacity_share"] <= plain["gpucast"]["time_over_capacity_share"]
    assert gpucast[capacity.SLO_KPI] == pytest.approx(gpucast["time_over_capacity_share"])
    assert gpucast["time_over_capacity_share"] == 0.0
    # a replica sustains 1/r of the chat mix's tokens/s at the decode-heavy mix (r = 2.0 by
    # the SLO model). Every replayed plan knows that mix (the 3 replayed days start 2 days after
    # the shift), so gpucast's GPUs grow r-fold, as the bound's (sized at each minute's SLO
    # capacity) do, less the rounding to whole replicas; 3 %: cold starts and the scale-down
    # hold add GPU-hours to both sides, not exactly in proportion
    r = slo_capacity_ratio(sizing)
    assert r == pytest.approx(2.0, rel=0.05)  # "half the capacity": the premise of the case
    grown = shifted_rows["gpucast"]
    growth = grown["gpu_hours"] / plain["gpucast"]["gpu_hours"]
    assert growth == pytest.approx(rounded_ratio(r, plain["gpucast"]["gpu_hours"]), rel=0.03)
    assert grown[capacity.SLO_KPI] <= 0.01  # the plans' own target
    # the HPA at its 0.75 target of the one number holds load / 0.75 of chat-mix capacity,
    # which sustains 1 / (0.75 r) = 2/3 of the decode-heavy load: a third short, more than
    # rounding up whole replicas (at least 4 of them at these loads) makes up, so it is over
    # the SLO except in the minutes after a fall that the scale-down hold keeps replicas for
    assert 1 / (0.75 * r) < 0.7
    assert shifted_rows["reactive-hpa"][capacity.SLO_KPI] > 0.9
    bound = shifted_rows["instant-bound"]
    assert bound[capacity.SLO_KPI] == 0.0
    bound_growth = bound["gpu_hours"] / plain["instant-bound"]["gpu_hours"]
    assert bound_growth == pytest.approx(
        rounded_ratio(r, plain["instant-bound"]["gpu_hours"]), rel=0.03
    )
    # the bound sits on the line (100 %), ~0.75 of the bound at the 0.75 target this held
    # 1.6x against: the same margin is 1.6 / 0.75 ≈ 2.13x (a fixed band at safety 1.2 and
    # target 0.75 plans 1.6x the point forecast)
    assert grown["gpu_hours"] < 1.6 / 0.75 * bound["gpu_hours"]


def test_band_auto_calibrates_plans_at_the_slo_to_the_slo(
    profile: ProfileFigures, sizing: SloSizing
) -> None:
    plain = replay(profile, None, shift=True, band="auto")
    scored = replay(profile, sizing, shift=True, band="auto")
    for night in plain["gpucast_plans"]:
        assert night["calibration"]["calibrated_risk"] == "time_over_capacity_share"
    for night in scored["gpucast_plans"]:
        calibration = night["calibration"]
        assert calibration["calibrated_risk"] == capacity.SLO_KPI
        assert "time over the SLO" in calibration["note"]
        assert calibration["replayed_time_over_slo_share"] is not None
    # the plans already carry the mix: band auto meets the SLO target with less than the
    # point forecast's fixed margin spends, and a headroom well below the 1.5x the mix shift
    # needed when the past plans were sized at the one number
    gpucast = by_policy(scored)["gpucast"]
    fixed = by_policy(replay(profile, sizing, shift=True))["gpucast"]
    assert gpucast[capacity.SLO_KPI] <= 0.01  # the calibration's target
    # the plans are sized at the known mix and the peak factor; the 5 % hour-to-hour noise of
    # this history needs no margin over the point forecast on top of that
    headrooms = [night["headroom"] for night in scored["gpucast_plans"]]
    assert all(h < 1.0 for h in headrooms)
    # auto sizes yhat x headroom, the fixed band yhat x its 1.2 safety factor: the GPU-hours
    # scale by their ratio, less the rounding to whole replicas (3 %: cold starts and holds)
    factor = float(np.mean(headrooms)) / 1.2
    ratio = gpucast["gpu_hours"] / fixed["gpu_hours"]
    assert ratio == pytest.approx(1 / rounded_ratio(1 / factor, gpucast["gpu_hours"]), rel=0.03)


def test_a_live_band_auto_plan_at_the_slo_calibrates_time_over_the_slo(
    at_slo: TestClient,  # noqa: F811 - the fixture of test_slo_plans
    database: Database,
) -> None:
    response = at_slo.get(f"/v1/series/{CHAT}/capacity", params={"band": "auto"})
    assert response.status_code == 200, response.text
    choice = response.json()["band_choice"]
    assert choice["calibrated_risk"] == capacity.SLO_KPI
    assert "time over the SLO" in choice["note"]
    # the share said is the chosen candidate's time over the SLO, which the risk bound caps,
    # and the choice is the cheapest grid headroom whose bound meets the 1 % target
    chosen = next(row for row in choice["candidates"] if row["headroom"] == choice["headroom"])
    assert choice["replayed_time_over_slo_share"] == chosen[capacity.SLO_KPI]
    assert 0.0 <= chosen[capacity.SLO_KPI] <= chosen["risk_upper_bound"]
    assert_cheapest_meeting(choice, 0.01)
    # the same series' plan without an SLO (the one-number profile) calibrates capacity
    add_profile(at_slo, database, "one-number", None, usd=10.0)
    response = at_slo.get(
        f"/v1/series/{CHAT}/capacity", params={"band": "auto", "profile": "one-number"}
    )
    assert response.status_code == 200, response.text
    plain = response.json()["band_choice"]
    assert plain["calibrated_risk"] == "time_over_capacity_share"
    assert "time over capacity" in plain["note"]
    assert all(capacity.SLO_KPI not in row for row in plain["candidates"])
    assert_cheapest_meeting(plain, 0.01)


def test_the_backtest_of_a_deployed_series_is_scored_at_its_slo(
    at_slo: TestClient,  # noqa: F811 - the fixture of test_slo_plans
    database: Database,
) -> None:
    query = {"days": 2, "models": "seasonal_naive", "band": "yhat"}
    response = at_slo.get(f"/v1/series/{CHAT}/capacity/backtest", params=query)
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["slo"] == {"ttft_p95_s": 2.0, "tpot_p95_s": 0.05, "scored": True}
    assert all(0.0 <= row[capacity.SLO_KPI] <= 1.0 for row in result["policies"])
    # a one-number profile given explicitly: no SLO capacity, no SLO column
    add_profile(at_slo, database, "one-number", None, usd=10.0)
    response = at_slo.get(
        f"/v1/series/{CHAT}/capacity/backtest", params={**query, "profile": "one-number"}
    )
    assert response.status_code == 200, response.text
    assert response.json()["slo"] is None
    assert all(capacity.SLO_KPI not in row for row in response.json()["policies"])


def test_the_known_mix_reads_only_the_newest_stored_hours_before_each_plan(
    sizing: SloSizing,
) -> None:
    from app.plans.slo_sizing import KNOWN_MIX_HOURS, known_mix_capacity

    frame = history(shift=True)
    hours = pd.DatetimeIndex(frame["hour"])
    moments = pd.DatetimeIndex([hours[0], SHIFT, SHIFT + pd.Timedelta(hours=KNOWN_MIX_HOURS), END])
    known = known_mix_capacity(sizing, frame, moments)
    # nothing known before the first stored hour; at the shift only chat hours are known;
    # KNOWN_MIX_HOURS later only decode-heavy ones
    assert np.isnan(known.per_gpu_tokens_per_s[0]) and np.isnan(known.prompt_tokens[0])
    assert known.prompt_tokens[1:] == pytest.approx([1000.0, 200.0, 200.0])
    assert known.tokens_per_request[1:] == pytest.approx([1200.0] * 3)
    chat, decode = known.per_gpu_tokens_per_s[1], known.per_gpu_tokens_per_s[2]
    assert decode == pytest.approx(
        float(sizing.model.tokens_per_s_per_gpu(np.array([200.0]), np.array([1000.0]), SLO)[0])
    )
    assert decode < 0.6 * chat
    # no look-ahead: rewriting every hour from a moment on changes nothing known at it
    future = frame["hour"] >= SHIFT
    altered = frame.copy()
    altered.loc[future, "prompt_tokens"] = altered.loc[future, "requests"] * 50.0
    again = known_mix_capacity(sizing, altered, moments[:2])
    assert again.per_gpu_tokens_per_s[1] == known.per_gpu_tokens_per_s[1]


def test_a_replayed_plan_sizes_an_unmeasured_mix_at_the_low_edge_as_the_live_plan(
    sizing: SloSizing,
) -> None:
    from app.plans.slo_sizing import known_mix_capacity

    frame = history(shift=True)
    # one hour into the shift the three newest hours blend both mixes: an unmeasured mix
    moment = SHIFT + pd.Timedelta(hours=1)
    known = known_mix_capacity(sizing, frame, pd.DatetimeIndex([moment]))
    prompt, completion = known.prompt_tokens[0], known.completion_tokens[0]
    assert sizing.model.table.measured_mix(prompt, completion) is None
    answer = sizing.model.capacity(prompt_tokens=prompt, completion_tokens=completion, slo=SLO)
    assert answer.basis == "interpolated"
    low_share = answer.requests_per_s_per_replica_low / answer.requests_per_s_per_replica
    assert low_share < 0.99
    live = capacity.plan_gpus_at_slo(
        pd.DataFrame({"ds": [moment], "yhat": [3600.0]}),
        model=sizing.model,
        slo=SLO,
        prompt_tokens=np.array([prompt]),
        completion_tokens=np.array([completion]),
        of_requests=True,
        gpus_per_replica=4,
    )
    assert known.per_gpu_tokens_per_s[0] == pytest.approx(
        live.frame["per_gpu_tokens_per_s"].iloc[0], rel=1e-9
    )
    assert known.per_gpu_tokens_per_s[0] == pytest.approx(
        answer.tokens_per_s_per_gpu * low_share, rel=1e-3
    )


def test_at_an_slo_the_reactive_hpa_is_compared_at_equal_time_over_the_slo(
    profile: ProfileFigures, sizing: SloSizing
) -> None:
    for shift in (False, True):
        result = replay(profile, sizing, shift=shift, band="auto")
        rows = by_policy(result)
        ours = rows["gpucast"]
        equal = result["versus_reactive_at_equal_risk"]
        assert equal["risk"] == capacity.SLO_KPI
        reaching = [
            p for p in result["reactive_frontier"] if p[capacity.SLO_KPI] <= ours[capacity.SLO_KPI]
        ]
        from tests.app.test_equal_risk import expected_gpu_hours

        want = expected_gpu_hours(result["reactive_frontier"], ours[capacity.SLO_KPI])
        assert reaching and want is not None
        assert rows["reactive-at-equal-risk"]["gpu_hours"] == pytest.approx(want)
        assert "time over the SLO" in rows["reactive-at-equal-risk"]["description"]
        # read at gpucast's own risk (or, riskier than every target, the cheapest)
        assert equal["time_over_slo_share_difference"] >= -1e-12
        if shift:
            # the HPA's trigger counts tokens at the one number; at the decode-heavy mix a
            # replica sustains under 0.6 of it within the SLO (see the known-mix test above),
            # so only targets below that hold gpucast's risk
            assert max(p["target_utilization"] for p in reaching) < 0.6
    # without an SLO the same comparison is at time over capacity
    plain = replay(profile, None, shift=True, band="auto")
    assert plain["versus_reactive_at_equal_risk"]["risk"] == "time_over_capacity_share"
