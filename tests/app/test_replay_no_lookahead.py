"""No look-ahead in the plan replay: what happens after a decision never changes it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import capacity
from app.plans import PlanParams, ProfileFigures
from app.plans.replay import ReplayOptions, SeriesInputs, replay_series

FAST = ("seasonal_naive", "seasonal_ma")
REAL_REPLAY = capacity.replay
PROFILE = ProfileFigures("l4", 2000.0, 1, 1.0, 0.6, None)
END = pd.Timestamp("2026-11-20T00:00Z")


def _history(scale_after: pd.Timestamp | None = None, factor: float = 1.0) -> pd.DataFrame:
    rng = np.random.default_rng(11)
    hours = pd.date_range(END - pd.Timedelta(days=10), END, freq="h", inclusive="left")
    shape = 1 + 0.6 * np.sin(2 * np.pi * (hours.hour.to_numpy() - 8) / 24)
    requests = 7200 * shape * rng.lognormal(0, 0.05, len(hours))
    if scale_after is not None:
        requests = np.where(hours >= scale_after, requests * factor, requests)
    return pd.DataFrame(
        {
            "hour": hours,
            "requests": requests,
            "prompt_tokens": requests * 800,
            "completion_tokens": requests * 200,
            "total_tokens": requests * 1000,
            "peak_rps": requests / 3600 * 1.25,
        }
    )


def _replay(history: pd.DataFrame, load: pd.Series | None = None) -> dict:
    inputs = SeriesInputs(series="svc", history=history, events=(), profile=PROFILE)
    return replay_series(
        inputs, params=PlanParams(), options=ReplayOptions(days=4, models=FAST), load=load
    )


def _plans_by_time(result: dict) -> dict[pd.Timestamp, list[int]]:
    return {pd.Timestamp(p["at"]): p["gpus"] for p in result["gpucast_plans"]}


def _sized_by_time(result: dict) -> dict[pd.Timestamp, list[float]]:
    """The load each night's plan sized its hours for (GPUs at 100 %): what the forecast saw,
    even where the floor sits on the minimum."""
    return {pd.Timestamp(p["at"]): p["sized_load_gpus"] for p in result["gpucast_plans"]}


def test_a_different_future_leaves_every_earlier_decision_unchanged() -> None:
    change = pd.Timestamp("2026-11-18T02:00Z")  # a nightly decision time inside the window
    base_result = _replay(_history())
    # five times the load from then on (the rolling plan's weekly means see one day of it)
    raised_result = _replay(_history(scale_after=change, factor=5.0))
    base, raised = _plans_by_time(base_result), _plans_by_time(raised_result)
    base_sized, raised_sized = _sized_by_time(base_result), _sized_by_time(raised_result)
    assert set(base) == set(raised) and len(base) == 5
    for at, gpus in base.items():
        if at <= change:  # decided from data strictly before ``at`` <= change
            assert raised[at] == gpus, at
            assert raised_sized[at] == base_sized[at], at
        else:  # and the later ones did see the new load, so the test can tell
            assert sum(raised_sized[at]) > 2 * sum(base_sized[at]), at
            assert sum(raised[at]) >= sum(gpus), at


def _hourly_decisions(history: pd.DataFrame, monkeypatch: pytest.MonkeyPatch) -> dict:
    """Every hourly plan of the gpucast policy, by the hour it starts (from the replay)."""

    seen: dict = {}
    real = REAL_REPLAY

    def spy(load, policies, **kwargs):  # noqa: ANN001, ANN202
        for policy in policies:  # the band calibrations replay too: keep the final replay's
            if policy.name == "gpucast":
                seen.update({d.start: (d.at, d.gpus.tolist()) for d in policy.decisions})
        return real(load, policies, **kwargs)

    monkeypatch.setattr(capacity, "replay", spy)
    _replay(history)
    return seen


def test_every_hourly_plan_before_a_change_is_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    change = pd.Timestamp("2026-11-18T13:00Z")  # mid-day: between two nightly fits
    base = _hourly_decisions(_history(), monkeypatch)
    raised = _hourly_decisions(_history(scale_after=change, factor=3.0), monkeypatch)
    assert set(base) == set(raised) and len(base) == 4 * 24 + 23
    for start, (at, gpus) in base.items():
        assert at == start + pd.Timedelta(minutes=5)  # served once the hourly cycle ran
        if start <= change:  # made from the hours before ``start`` <= change
            assert raised[start][1] == gpus, start
    # the plans of the last day, made a day or more after the change, did see it
    late = [s for s in base if s >= change + pd.Timedelta(days=1)]
    assert sum(sum(raised[s][1]) for s in late) > 1.5 * sum(sum(base[s][1]) for s in late)


def test_a_finer_load_changed_after_a_decision_does_not_change_it() -> None:
    history = _history()
    minutes = pd.date_range(history["hour"].iloc[0], END, freq="min", inclusive="left")
    per_hour = history.set_index("hour")["total_tokens"] / 3600
    load = pd.Series(per_hour.reindex(minutes, method="ffill").to_numpy(), index=minutes)
    change = pd.Timestamp("2026-11-17T02:00Z")
    spiky = load.copy()
    spiky[spiky.index >= change] *= np.where(np.arange((spiky.index >= change).sum()) % 7, 1, 5)
    base_result, other_result = _replay(history, load), _replay(history, spiky)
    base, other = _plans_by_time(base_result), _plans_by_time(other_result)
    for at, gpus in base.items():
        if at <= change:
            assert other[at] == gpus, at
    # the changed load did reach the replay: last week's peak, re-read each night, rose
    static = {r["policy"]: r for r in base_result["policies"]}["static-peak"]
    static_spiky = {r["policy"]: r for r in other_result["policies"]}["static-peak"]
    assert static_spiky["gpu_hours"] > 2 * static["gpu_hours"]


def test_the_replay_window_is_the_last_days_with_nightly_fits_and_hourly_plans() -> None:
    result = _replay(_history())
    assert pd.Timestamp(result["end"]) == END
    assert pd.Timestamp(result["start"]) == END - pd.Timedelta(days=4)
    times = sorted(_plans_by_time(result))
    assert times[0] <= pd.Timestamp(result["start"]) < times[1]
    assert all(t.hour == 2 for t in times)
    assert all(b - a == pd.Timedelta(days=1) for a, b in zip(times, times[1:], strict=False))
    # a plan every hour from the hour before the first night to the last hour
    assert result["decisions"] == int((END - times[0]) / pd.Timedelta(hours=1)) + 1
    # band auto was chosen each night from the days before it
    for night in result["gpucast_plans"]:
        calibration = night["calibration"]
        assert night["band"] == calibration["band"]
        assert pd.Timestamp(calibration["window_end"]) == pd.Timestamp(night["at"])


def test_the_stored_load_puts_each_hours_busiest_minute_at_its_own_tokens_per_request() -> None:
    from app.plans.load import hourly_load

    hours = pd.date_range("2026-11-01", periods=2, freq="h", tz="UTC")
    history = pd.DataFrame(
        {
            "hour": hours,
            "requests": [3600.0, 3600.0],
            "total_tokens": [3600.0 * 100, 3600.0 * 300],  # 100 and 300 tokens per request
            "peak_rps": [2.0, 2.0],
        }
    )
    load = hourly_load(history, tokens_per_req=200.0)
    assert load.iloc[30] == pytest.approx(2.0 * 100)  # the busiest minute of hour 0
    assert load.iloc[90] == pytest.approx(2.0 * 300)  # and of hour 1
    # the other minutes carry the rest, so each hour keeps its tokens
    assert load.iloc[:60].mean() == pytest.approx(100.0)
    assert load.iloc[60:].mean() == pytest.approx(300.0)


def _with_outage_then_spike(at: pd.Timestamp, spike: float) -> pd.DataFrame:
    """A collection outage (a zero hour) just before ``at`` and, with spike > 1, a spike
    from ``at`` on."""
    history = _history()
    before = history["hour"] == at - pd.Timedelta(hours=1)
    history.loc[before, ["requests", "prompt_tokens", "completion_tokens", "total_tokens"]] = 0
    history.loc[before, "peak_rps"] = 0.0
    after = history["hour"] >= at
    for column in ("requests", "prompt_tokens", "completion_tokens", "total_tokens", "peak_rps"):
        history.loc[after, column] = history.loc[after, column] * spike
    return history


def test_an_outage_before_a_decision_is_filled_from_the_past_not_from_the_spike_after_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    at = pd.Timestamp("2026-11-18T13:00Z")
    base = _hourly_decisions(_with_outage_then_spike(at, 1.0), monkeypatch)
    spiked = _hourly_decisions(_with_outage_then_spike(at, 20.0), monkeypatch)
    for start, (_, gpus) in base.items():
        if start <= at:  # the refresh at ``at`` cleans the zero hour from the hours before it
            assert spiked[start][1] == gpus, start
    assert sum(spiked[at + pd.Timedelta(hours=3)][1]) > sum(base[at + pd.Timedelta(hours=3)][1])


def test_the_outage_cleaning_of_a_refresh_reads_no_later_hour() -> None:
    from forecasting.refresh import _without_outages

    hours = 24 * 6
    values = 100 + 50 * np.sin(np.arange(hours) * 2 * np.pi / 24)
    values[100] = 0.0  # an outage: the same hour carried load on the days before
    values[98] = np.nan  # and a gap
    later = values.copy()
    later[101:] *= 40  # a spike afterwards
    later[60:70] = 0.0  # would not matter either way: before, so both series share it
    values[60:70] = 0.0
    assert np.array_equal(_without_outages(values)[:101], _without_outages(later)[:101])
    assert _without_outages(values)[100] == _without_outages(values)[99]  # filled from before


def test_a_requests_load_is_converted_with_the_tokens_per_request_known_then() -> None:
    from app.plans.backtest import load_tokens_per_s

    change = pd.Timestamp("2026-11-17T02:00Z")
    history = _history()
    tripled = history.copy()
    later = tripled["hour"] >= change
    tripled.loc[later, ["prompt_tokens", "completion_tokens", "total_tokens"]] *= 3
    minutes = pd.date_range(history["hour"].iloc[0], END, freq="10min", inclusive="left")
    rps = history.set_index("hour")["requests"].reindex(minutes, method="ffill") / 3600
    load = pd.DataFrame({"requests_per_s": rps.to_numpy()}, index=minutes)
    convert = lambda h: load_tokens_per_s(  # noqa: E731
        load, SeriesInputs(series="svc", history=h, events=(), profile=PROFILE)
    )
    base, other = convert(history), convert(tripled)
    assert np.array_equal(base[base.index < change], other[other.index < change])
    # the tripled hours do reach the ratio once they are known (a 28-day mix: it rises slowly)
    assert (other / base)[other.index >= change + pd.Timedelta(days=1)].min() > 1.2
    # and every decision made before the change — static peak, the reactive trigger's and the
    # calibration's past load, gpucast's plans — is the same
    replayed = [_replay(h, convert(h).rename("tokens_per_s")) for h in (history, tripled)]
    plans = [_plans_by_time(r) for r in replayed]
    for at, gpus in plans[0].items():
        if at <= change:
            assert plans[1][at] == gpus, at
    nights = [{n["at"]: n["headroom"] for n in r["gpucast_plans"]} for r in replayed]
    assert {a: h for a, h in nights[0].items() if pd.Timestamp(a) <= change} == {
        a: h for a, h in nights[1].items() if pd.Timestamp(a) <= change
    }


def test_the_stored_load_before_a_level_shift_and_a_gap_is_unchanged_by_it() -> None:
    from app.plans.load import hourly_load

    change = pd.Timestamp("2026-11-17T02:00Z")
    history = _history()
    history.loc[history["hour"] == change - pd.Timedelta(hours=1), "total_tokens"] = np.nan
    shifted = history.copy()
    later = shifted["hour"] >= change
    shifted.loc[later, ["requests", "total_tokens", "peak_rps"]] *= 4
    base, other = hourly_load(history, None), hourly_load(shifted, None)
    assert np.array_equal(base[base.index < change], other[other.index < change])
    assert other[other.index >= change].mean() > 3 * base[base.index >= change].mean()


@pytest.mark.parametrize("cold_start_s", [60, 900])
def test_the_plans_and_the_calibration_use_the_cold_start_given(
    monkeypatch: pytest.MonkeyPatch, cold_start_s: int
) -> None:
    fleets: list[capacity.Fleet] = []
    final: dict[str, Any] = {}
    real = REAL_REPLAY

    def spy(load, policies, **kwargs):  # noqa: ANN001, ANN202
        fleets.append(kwargs["fleet"])
        result = real(load, policies, **kwargs)
        for policy in policies:  # the final replay's gpucast plans and what its fleet held
            if policy.name == "gpucast":
                final.update(decisions=policy.decisions, timeline=result.timelines["gpucast"])
        return result

    monkeypatch.setattr(capacity, "replay", spy)
    inputs = SeriesInputs(series="svc", history=_history(), events=(), profile=PROFILE)
    # no reactive trigger beside the plan, so every GPU the fleet holds is the plan's
    params = PlanParams(cold_start_s=cold_start_s, reactive_backstop=False)
    result = replay_series(inputs, params=params, options=ReplayOptions(days=2, models=FAST))
    # every night's calibration replays and the final replay run on that cold start
    assert len(fleets) > 2
    assert {f.rules.cold_start_s for f in fleets} == {cold_start_s}
    assert result["params"]["cold_start_s"] == cold_start_s
    # and the plans lead by it in the replay: where an hourly plan asks for more GPUs from
    # the next hour on, its fleet starts them one cold start before that hour (not at the
    # hour, not earlier), so they are ready when the hour begins
    provisioned = final["timeline"]["provisioned_gpus"]
    ready = final["timeline"]["ready_gpus"]
    rises = 0
    for decision in final["decisions"]:
        hour = decision.start + pd.Timedelta(hours=1)
        wanted = int(decision.gpus[1])
        if wanted <= decision.gpus[0] or hour not in provisioned.index:
            continue
        served = provisioned[(provisioned.index >= decision.at) & (provisioned.index <= hour)]
        if served.iloc[0] >= wanted:  # still held from an earlier hour: no start to time
            continue
        started = served.index[np.argmax(served.to_numpy() >= wanted)]
        assert hour - started == pd.Timedelta(seconds=cold_start_s), hour
        assert ready[hour] >= wanted, hour
        rises += 1
    assert rises >= 1  # the daily cycle makes the plan rise in the morning


def test_the_hour_before_the_first_night_reads_no_load_after_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # nightly at the replay's end hour: the first night is 00:00 and the plan of the hour before
    # it (23:00, so that a plan is in force at the start) is band auto's; it must not depend on
    # the first night's calibration, which replays the load up to 00:00
    first_plan = pd.Timestamp("2026-11-15T23:00Z")

    def decisions(history: pd.DataFrame) -> dict:
        seen: dict = {}

        def spy(load, policies, **kwargs):  # noqa: ANN001, ANN202
            for policy in policies:
                if policy.name == "gpucast":
                    seen.update({d.start: d.gpus.tolist() for d in policy.decisions})
            return REAL_REPLAY(load, policies, **kwargs)

        monkeypatch.setattr(capacity, "replay", spy)
        inputs = SeriesInputs(series="svc", history=history, events=(), profile=PROFILE)
        replay_series(
            inputs,
            # the plan trigger alone at a tight risk: an hour at three times the load moves
            # the calibration of the night after it
            params=PlanParams(band="auto", reactive_backstop=False, max_over_capacity=0.002),
            options=ReplayOptions(days=4, models=FAST, nightly_hour_utc=0),
        )
        return seen

    base = decisions(_history())
    raised = decisions(_history(scale_after=first_plan, factor=3.0))
    assert min(base) == first_plan
    assert raised[first_plan] == base[first_plan]
    # the first night's own plans did see the raised hour (its calibration replays it)
    night = first_plan + pd.Timedelta(hours=1)
    assert sum(raised[night]) > sum(base[night])
