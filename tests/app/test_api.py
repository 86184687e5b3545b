"""REST API on SQLite and PostgreSQL: series, observations, events, GPU profiles, health."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.api import create_app
from app.settings import Settings

SERIES = "prod-us/llama-3.1-70b"
CSV_BODY = (
    "timestamp,requests,prompt_tokens,completion_tokens\n"
    "2026-11-30T00:00:00Z,3600,1000000,200000\n"
    "2026-11-30T01:00:00Z,7200,2000000,400000\n"
    "2026-11-30T03:00:00Z,1800,500000,100000\n"
)


def make_series(client: TestClient, name: str = SERIES) -> None:
    response = client.post("/v1/series", json={"name": name, "labels": {"region": "us"}})
    assert response.status_code == 201, response.text


def test_health_and_ready(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ok"


def test_series_with_slash_in_name(client: TestClient) -> None:
    make_series(client)
    listing = client.get("/v1/series").json()
    assert [s["name"] for s in listing] == [SERIES]
    one = client.get(f"/v1/series/{SERIES}")
    assert one.status_code == 200
    assert one.json()["labels"] == {"region": "us"} and one.json()["observations"] == 0
    encoded = client.get("/v1/series/prod-us%2Fllama-3.1-70b")
    assert encoded.status_code == 200 and encoded.json()["name"] == SERIES


def test_duplicate_series_is_409(client: TestClient) -> None:
    make_series(client)
    response = client.post("/v1/series", json={"name": SERIES})
    assert response.status_code == 409
    assert response.json()["detail"] == f"series {SERIES!r} already exists"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("../etc", "invalid series name"),
        ("a//b", "invalid series name"),
        ("x/observations", "reserved"),
        ("bad\u0007name", "contains the control character U+0007"),
    ],
)
def test_invalid_series_names_are_422(client: TestClient, name: str, message: str) -> None:
    response = client.post("/v1/series", json={"name": name})
    assert response.status_code == 422
    assert message in response.json()["detail"]


def test_unknown_series_is_404(client: TestClient) -> None:
    response = client.get("/v1/series/nope/observations")
    assert response.status_code == 404
    assert response.json() == {"detail": "series 'nope' not found"}


def test_csv_ingest_and_read_back(client: TestClient) -> None:
    make_series(client)
    response = client.post(
        f"/v1/series/{SERIES}/observations", content=CSV_BODY, headers={"Content-Type": "text/csv"}
    )
    assert response.status_code == 200, response.text
    summary = response.json()
    assert summary["rows_written"] == 3
    assert summary["series"][0]["missing_hours"] == 1
    rows = client.get(f"/v1/series/{SERIES}/observations").json()
    assert [r["requests"] for r in rows] == [3600.0, 7200.0, 1800.0]
    assert rows[1]["qps"] == 2.0 and rows[1]["total_tokens"] == 2_400_000.0
    window = client.get(
        f"/v1/series/{SERIES}/observations",
        params={"start": "2026-11-30T01:00:00Z", "end": "2026-11-30T03:00:00Z"},
    )
    assert [r["hour"] for r in window.json()] == ["2026-11-30T01:00:00Z"]


def test_json_ingest_is_idempotent(client: TestClient) -> None:
    make_series(client)
    body = [{"timestamp": "2026-11-30T00:00:00+01:00", "qps": 1.5, "tokens": 99}]
    for _ in range(2):
        response = client.post(f"/v1/series/{SERIES}/observations", json=body)
        assert response.status_code == 200, response.text
    rows = client.get(f"/v1/series/{SERIES}/observations").json()
    assert len(rows) == 1
    assert rows[0]["hour"] == "2026-11-29T23:00:00Z" and rows[0]["requests"] == 5400.0


def test_bad_row_is_422_and_writes_nothing(client: TestClient) -> None:
    make_series(client)
    bad = CSV_BODY.replace("7200", "-1")
    response = client.post(
        f"/v1/series/{SERIES}/observations", content=bad, headers={"Content-Type": "text/csv"}
    )
    assert response.status_code == 422
    assert response.json()["detail"].startswith("row 2 (line 3), column 'requests'")
    assert client.get(f"/v1/series/{SERIES}/observations").json() == []


def test_wrong_content_type_is_415(client: TestClient) -> None:
    make_series(client)
    response = client.post(
        f"/v1/series/{SERIES}/observations",
        content=b"x",
        headers={"Content-Type": "application/xml"},
    )
    assert response.status_code == 415
    assert "application/json or text/csv" in response.json()["detail"]


def test_observations_for_missing_series_is_404(client: TestClient) -> None:
    response = client.post(
        "/v1/series/ghost/observations", content=CSV_BODY, headers={"Content-Type": "text/csv"}
    )
    assert response.status_code == 404


def test_body_over_limit_is_413(settings: Settings) -> None:
    small = settings.model_copy(update={"max_body_bytes": 100})
    with TestClient(create_app(small)) as client:
        make_series(client)
        response = client.post(
            f"/v1/series/{SERIES}/observations",
            content=CSV_BODY,
            headers={"Content-Type": "text/csv"},
        )
    assert response.status_code == 413
    assert "limit is 100 bytes" in response.json()["detail"]


def test_naive_query_time_is_422(client: TestClient) -> None:
    make_series(client)
    response = client.get(
        f"/v1/series/{SERIES}/observations", params={"start": "2026-11-30T00:00:00"}
    )
    assert response.status_code == 422
    assert "UTC offset" in response.json()["detail"]


def test_events_create_and_filter(client: TestClient) -> None:
    make_series(client)
    created = client.post(
        "/v1/events",
        json={
            "name": "Black Friday",
            "start": "2026-11-27T00:00:00Z",
            "end": "2026-11-28T00:00:00Z",
            "series": SERIES,
            "multiplier": 2.5,
        },
    )
    assert created.status_code == 201, created.text
    client.post(
        "/v1/events",
        json={"name": "Launch", "start": "2026-12-10T00:00:00Z", "end": "2026-12-10T06:00:00Z"},
    )
    everything = client.get("/v1/events").json()
    assert [e["name"] for e in everything] == ["Black Friday", "Launch"]
    late = client.get("/v1/events", params={"start": "2026-12-01T00:00:00Z"}).json()
    assert [e["name"] for e in late] == ["Launch"]
    for_series = client.get("/v1/events", params={"series": SERIES}).json()
    assert {e["series"] for e in for_series} == {SERIES, None}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "x", "start": "2026-11-28T00:00:00Z", "end": "2026-11-27T00:00:00Z"}, "end"),
        ({"name": "x", "start": "2026-11-28T00:00:00", "end": "2026-11-29T00:00:00Z"}, "start"),
        (
            {
                "name": "x",
                "start": "2026-11-28T00:00:00Z",
                "end": "2026-11-29T00:00:00Z",
                "multiplier": -1,
            },
            "multiplier",
        ),
    ],
)
def test_invalid_events_are_422(client: TestClient, body: dict[str, object], field: str) -> None:
    response = client.post("/v1/events", json=body)
    assert response.status_code == 422
    assert field in str(response.json()["detail"])


def test_event_for_unknown_series_is_404(client: TestClient) -> None:
    response = client.post(
        "/v1/events",
        json={
            "name": "x",
            "start": "2026-11-28T00:00:00Z",
            "end": "2026-11-29T00:00:00Z",
            "series": "ghost",
        },
    )
    assert response.status_code == 404


def test_gpu_profile_crud(client: TestClient) -> None:
    profile = {
        "name": "h100-70b",
        "gpu_type": "H100-80G",
        "model": "llama-3.1-70b",
        "tokens_per_s_per_gpu": 2400,
        "gpus_per_replica": 2,
        "usd_per_hour_on_demand": 2.5,
    }
    assert client.post("/v1/gpu-profiles", json=profile).status_code == 201
    assert client.post("/v1/gpu-profiles", json=profile).status_code == 409
    got = client.get("/v1/gpu-profiles/h100-70b").json()
    assert got["tokens_per_s_per_gpu"] == 2400 and got["gpus_per_replica"] == 2
    update = {k: v for k, v in profile.items() if k != "name"} | {"tokens_per_s_per_gpu": 3000}
    assert (
        client.put("/v1/gpu-profiles/h100-70b", json=update).json()["tokens_per_s_per_gpu"] == 3000
    )
    assert client.delete("/v1/gpu-profiles/h100-70b").status_code == 204
    assert client.get("/v1/gpu-profiles/h100-70b").status_code == 404


def test_write_endpoints_need_a_key_when_configured(settings: Settings) -> None:
    keyed = settings.model_copy(update={"api_keys": "s3cret,other"})
    with TestClient(create_app(keyed)) as client:
        denied = client.post("/v1/series", json={"name": "a"})
        assert denied.status_code == 401 and "missing API key" in denied.json()["detail"]
        wrong = client.post(
            "/v1/series", json={"name": "a"}, headers={"Authorization": "Bearer nope"}
        )
        assert wrong.status_code == 401 and "s3cret" not in wrong.text
        ok = client.post(
            "/v1/series", json={"name": "a"}, headers={"Authorization": "Bearer s3cret"}
        )
        assert ok.status_code == 201
        also_ok = client.post("/v1/series", json={"name": "b"}, headers={"X-API-Key": "other"})
        assert also_ok.status_code == 201
        assert client.get("/v1/series").status_code == 200


def test_reads_need_a_key_when_configured(settings: Settings) -> None:
    keyed = settings.model_copy(update={"api_keys": "k", "read_requires_key": True})
    with TestClient(create_app(keyed)) as client:
        assert client.get("/v1/series").status_code == 401
        assert client.get("/v1/series", headers={"X-API-Key": "k"}).status_code == 200
        assert client.get("/healthz").status_code == 200


def test_openapi_lists_the_endpoints(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for path in (
        "/v1/series",
        "/v1/series/{name}/observations",
        "/v1/events",
        "/v1/gpu-profiles",
        "/healthz",
        "/readyz",
    ):
        assert path in paths
