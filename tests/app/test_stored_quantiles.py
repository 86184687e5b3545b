"""A stored run read through the API: its band ends are its stored quantiles (hi_80 = q90),
for the nightly run and for the refresh run after an ingest alike."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.support.clock import settled_hour

from .test_plan_surfaces import SERIES, history_rows

ORDER = ("lo_95", "lo_80", "q50", "q60", "q70", "q80", "q90", "q95", "hi_95", "q99")


def _assert_one_distribution(run: dict) -> None:
    assert run["points"]
    for point in run["points"]:
        assert point["hi_80"] == point["q90"]
        levels = [point[c] for c in ORDER]
        assert levels == sorted(levels) and levels[0] >= 0


def test_stored_runs_serve_bands_that_are_their_quantiles(client: TestClient) -> None:
    end = settled_hour()
    rows = history_rows(end, days=10)
    assert client.post("/v1/series", json={"name": SERIES}).status_code == 201
    assert client.post(f"/v1/series/{SERIES}/observations", json=rows[:-3]).status_code == 200
    fitted = client.post(f"/v1/series/{SERIES}/forecast", params={"models": "seasonal_ma"})
    assert fitted.status_code == 200, fitted.text
    nightly = client.get(f"/v1/series/{SERIES}/forecast", params={"metric": "tokens"}).json()
    assert nightly["kind"] == "nightly"
    _assert_one_distribution(nightly)

    assert client.post(f"/v1/series/{SERIES}/observations", json=rows[-3:]).status_code == 200
    refreshed = client.get(f"/v1/series/{SERIES}/forecast", params={"metric": "tokens"}).json()
    assert refreshed["kind"] == "refresh"
    _assert_one_distribution(refreshed)
