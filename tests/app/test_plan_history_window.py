"""A plan built from a tokens forecast reads the last PEAK_DAYS days of stored hours, not the
whole history, and is the same plan the whole history gives."""

from __future__ import annotations

import pandas as pd
import pytest
from fastapi.testclient import TestClient

from app import repository
from app.db import Database
from app.plans import service
from app.plans.params import PEAK_DAYS, PlanParams
from app.plans.sizing import ProfileFigures, plan_from_forecast

from .test_plan_surfaces import PROFILE, SERIES, _load, history_rows

DAYS = PEAK_DAYS + 12


@pytest.fixture
def long_history(client: TestClient) -> TestClient:
    """DAYS days of hours; the peaks of the hours older than PEAK_DAYS days are 3x the mean,
    the recent ones 1.3x (what the plan must learn)."""
    end = pd.Timestamp.now(tz="UTC").floor("h")
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
    with database.transaction() as session:
        served = service.series_plan(
            session, series_name=SERIES, profile_name=PROFILE["name"], params=params
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
