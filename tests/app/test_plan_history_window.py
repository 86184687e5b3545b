"""A plan built from a tokens forecast reads the last PEAK_DAYS days of stored hours, not the
whole history, and is the same plan the whole history gives. A plan from a requests forecast
converts with the tokens per request of those days (the current prompt mix), or of the last
PEAK_DAYS days with token counts when they stopped arriving."""

from __future__ import annotations

import pandas as pd
import pytest
from fastapi.testclient import TestClient

from app.db import Database, repository
from app.plans import service
from app.plans.auto_band import STORED
from app.plans.params import PEAK_DAYS, PlanParams
from app.plans.sizing import ProfileFigures, plan_from_forecast
from tests.support.clock import settled_hour

from .test_plan_surfaces import PROFILE, SERIES, _load, history_rows

DAYS = PEAK_DAYS + 12


@pytest.fixture
def long_history(client: TestClient) -> TestClient:
    """DAYS days of hours; the peaks of the hours older than PEAK_DAYS days are 3x the mean,
    the recent ones 1.3x (what the plan must learn)."""
    end = settled_hour()
    rows = history_rows(end, days=DAYS, seed=11)
    cutoff = end - pd.Timedelta(days=PEAK_DAYS)
    for row in rows:
        if pd.Timestamp(row["timestamp"]) <= cutoff:
            row["peak_rps"] = float(row["requests"]) / 3600 * 3.0
    return _load(client, rows)


def test_a_tokens_plan_reads_only_the_peak_window_and_equals_the_whole_history_plan(
    long_history: TestClient, database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[pd.DataFrame] = []
    original = repository.observations_frame

    def recorded(*args, **kwargs):
        frame = original(*args, **kwargs)
        reads.append(frame)
        return frame

    monkeypatch.setattr(repository, "observations_frame", recorded)
    params = PlanParams(band="hi_80")
    # the plan's own reads: its expected fleet's replay (over the calibration window, as band
    # auto's) is a read of its own, kept out by asking as a reader that only reads it stored
    with database.transaction() as session:
        served = service.series_plan(
            session,
            series_name=SERIES,
            profile_name=PROFILE["name"],
            params=params,
            calibrated_by=STORED,
        )
    assert served.source == "tokens forecast"
    assert len(reads) == 1
    read = reads[0]
    newest = read["hour"].max()
    assert read["hour"].min() == newest - pd.Timedelta(days=PEAK_DAYS)
    assert len(read) == PEAK_DAYS * 24 + 1

    monkeypatch.setattr(repository, "observations_frame", original)
    with database.transaction() as session:
        series = repository.get_series(session, name=SERIES)
        whole = repository.observations_frame(session, series_id=series.id)
        run = service.forecast_store.latest_run(session, series_id=series.id, metric="tokens")
        assert run is not None
        forecast = service.forecast_store.run_points(session, run_id=run.id)
        profile = repository.get_gpu_profile(session, name=PROFILE["name"])
        expected, _, expected_cost = plan_from_forecast(
            forecast,
            history=whole,
            uses_tokens=True,
            profile=ProfileFigures.of(profile),
            params=params,
            series_name=SERIES,
        )
    assert len(whole) == DAYS * 24
    pd.testing.assert_frame_equal(served.plan.frame, expected.frame)
    assert served.plan.peak_factors == expected.peak_factors
    assert served.plan.peak_factors.by_hour == pytest.approx([1.3] * 24)
    assert served.cost == expected_cost


def _with_mix(rows: list[dict[str, object]], per_request, tokens_until=None):
    """Rows whose tokens per request is ``per_request(hour)``; no token counts after
    ``tokens_until`` (when given)."""
    for row in rows:
        hour = pd.Timestamp(row["timestamp"])
        if tokens_until is not None and hour > tokens_until:
            row.pop("prompt_tokens")
            row.pop("completion_tokens")
            continue
        ratio = per_request(hour)
        row["prompt_tokens"] = float(row["requests"]) * ratio * 0.8
        row["completion_tokens"] = float(row["requests"]) * ratio * 0.2
    return rows


def _requests_plan(client: TestClient, rows: list[dict[str, object]], database: Database):
    assert client.post("/v1/series", json={"name": SERIES}).status_code == 201
    response = client.post(f"/v1/series/{SERIES}/observations", json=rows)
    assert response.status_code == 200, response.text
    assert client.post("/v1/gpu-profiles", json=PROFILE).status_code == 201
    response = client.post(
        f"/v1/series/{SERIES}/forecast", params={"models": "seasonal_naive", "metric": "requests"}
    )
    assert response.status_code == 200, response.text
    with database.transaction() as session:
        served = service.series_plan(
            session, series_name=SERIES, profile_name=PROFILE["name"], params=PlanParams("hi_80")
        )
    assert served.source == "requests forecast x tokens per request"
    return served


def test_a_requests_plan_converts_with_the_last_peak_days_mix_not_the_whole_history(
    client: TestClient, database: Database
) -> None:
    """The prompt mix tripled PEAK_DAYS days ago: the plan sizes on the new mix (the whole
    history's ratio would under-size it by about a fifth)."""
    end = settled_hour()
    cutoff = end - pd.Timedelta(days=PEAK_DAYS + 1)
    rows = _with_mix(history_rows(end, days=DAYS, seed=12), lambda h: 300 if h < cutoff else 1000)
    whole = sum(r["prompt_tokens"] + r["completion_tokens"] for r in rows) / sum(
        r["requests"] for r in rows
    )
    served = _requests_plan(client, rows, database)
    assert served.tokens_per_request == pytest.approx(1000.0)
    assert whole < 900  # the old whole-history figure really differs


def test_a_requests_plan_whose_token_counts_stopped_uses_the_last_measured_peak_days(
    client: TestClient, database: Database
) -> None:
    """Token counts stopped arriving 40 days ago: the plan still converts, with the mix of the
    last PEAK_DAYS days that had one (not an error, not the whole history's mix)."""
    end = settled_hour()
    stopped = end - pd.Timedelta(days=40)
    change = stopped - pd.Timedelta(days=PEAK_DAYS)  # the window of the last measured hours
    rows = history_rows(end, days=80, seed=13)
    rows = _with_mix(rows, lambda h: 300 if h < change else 700, tokens_until=stopped)
    served = _requests_plan(client, rows, database)
    assert served.tokens_per_request == pytest.approx(700.0)


def test_tokens_per_request_window_rules() -> None:
    from app.errors import InputError
    from app.plans.sizing import tokens_per_request

    hours = pd.date_range("2026-01-01", periods=24 * 60, freq="h", tz="UTC")
    requests = pd.Series(100.0, index=range(len(hours)))
    tokens = pd.Series(200.0, index=range(len(hours)))
    tokens[hours >= hours[-1] - pd.Timedelta(days=10)] = 500.0  # the last 10 days: 5 per request
    frame = pd.DataFrame({"hour": hours, "requests": requests, "total_tokens": tokens})
    recent = (hours >= hours[-1] - pd.Timedelta(days=28)).sum()
    last10 = (hours >= hours[-1] - pd.Timedelta(days=10)).sum()
    expected = (2.0 * (recent - last10) + 5.0 * last10) / recent
    assert tokens_per_request(frame, series_name="s") == pytest.approx(expected)
    assert tokens_per_request(frame, series_name="s", days=10) == pytest.approx(5.0)
    whole = (2.0 * (len(hours) - last10) + 5.0 * last10) / len(hours)
    assert tokens_per_request(frame, series_name="s", days=None) == pytest.approx(whole)
    # A frame without times can only be taken whole.
    assert tokens_per_request(frame.drop(columns="hour"), series_name="s") == pytest.approx(whole)
    # Hours without requests or without tokens do not count.
    gappy = frame.assign(
        total_tokens=frame["total_tokens"].where(hours < hours[-1] - pd.Timedelta(days=5))
    )
    gappy.loc[gappy.index[:24], "requests"] = 0.0
    gappy.loc[gappy.index[:24], "total_tokens"] = 9e9
    measured = gappy.dropna()
    kept = measured[measured["hour"] >= hours[-1] - pd.Timedelta(days=28)]
    ratio = kept["total_tokens"].sum() / kept["requests"].sum()
    assert tokens_per_request(gappy, series_name="s") == pytest.approx(ratio)
    assert tokens_per_request(gappy, series_name="s", days=None) == pytest.approx(
        measured["total_tokens"].iloc[24:].sum() / measured["requests"].iloc[24:].sum()
    )
    with pytest.raises(InputError, match="no token history"):
        tokens_per_request(frame.assign(total_tokens=float("nan")), series_name="s")
