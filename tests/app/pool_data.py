"""Hand-made pools for the pool surface tests (Grafana, overview, /metrics): members whose
token forecasts are stored directly, so every member's GPUs per hour are known in advance.

Profiles carry 1,000 tokens/s per GPU; at utilization 0.75 and safety factor 1.2 a member
needs ceil(tokens/s × 0.0016) GPUs, in whole replicas: 4,000 tokens/s is 8 GPUs on TP4 (two
replicas), 2,000 is 4 (one), 1,000 on TP2 is 2 (one). The forecasts start two hours before
now, so the plan's current hour is its third; history ends where the forecast starts and
``peak_rps`` equals the mean rate (peak factor 1)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from fastapi.testclient import TestClient

from app import ingest, repository
from app.db import Database
from app.forecast_store import save_run
from app.jobs.work import ItemResult

CHAT, CODE, BATCH = "pool/chat", "pool/code", "pool/batch"
TOKENS_PER_REQUEST = 1000.0
HIGH, LOW = 4000.0, 2000.0
# tokens/s per forecast hour: chat and code 8 GPUs for 6 h, then 4 for 6 h, twice; batch 2
PATTERN = {
    CHAT: [HIGH] * 6 + [LOW] * 6 + [HIGH] * 6 + [LOW] * 6,
    CODE: [HIGH] * 6 + [LOW] * 6 + [HIGH] * 6 + [LOW] * 6,
    BATCH: [1000.0] * 24,
}
PROFILES = (
    {
        "name": "h100-tp4",
        "gpu_type": "H100-80G",
        "model": "llama-3.1-405b",
        "tokens_per_s_per_gpu": 1000,
        "gpus_per_replica": 4,
        "usd_per_hour_on_demand": 2.5,
    },
    {
        "name": "h100-tp2",
        "gpu_type": "H100-80G",
        "model": "llama-3.1-70b",
        "tokens_per_s_per_gpu": 1000,
        "gpus_per_replica": 2,
        "usd_per_hour_on_demand": 2.5,
    },
)
MEMBERS = (
    (CHAT, "h100-tp4", "critical"),
    (CODE, "h100-tp4", "standard"),
    (BATCH, "h100-tp2", "batch"),
)
# The parameters that make each member's executed plan its formula hour by hour.
EXACT = {"band": "yhat", "cold_start_s": 0, "scale_down_hold_s": 0}


def forecast_start() -> pd.Timestamp:
    return pd.Timestamp.now(tz="UTC").floor("h") - pd.Timedelta(hours=2)


def pool_body(name: str, *, quota: int | None = None, members: Any = MEMBERS) -> dict[str, Any]:
    return {
        "name": name,
        "gpu_type": "H100-80G",
        "gpus_per_node": 8,
        "node_prices": {
            "on_demand_usd_per_hour": 20.0,
            "reserved_usd_per_hour": 12.0,
            "spot_usd_per_hour": 8.0,
        },
        "quota_nodes": quota,
        "members": [
            {"series": s, "profile": p, "priority": c, "spot_ok": c == "batch"}
            for s, p, c in members
        ],
    }


def _history(start: pd.Timestamp, tokens_per_s: float, days: int = 3) -> pd.DataFrame:
    hours = pd.date_range(end=start - pd.Timedelta(hours=1), periods=days * 24, freq="h")
    requests = np.full(len(hours), tokens_per_s * 3600 / TOKENS_PER_REQUEST)
    return pd.DataFrame(
        {
            "hour": hours,
            "requests": requests,
            "prompt_tokens": requests * 800,
            "completion_tokens": requests * 200,
            "total_tokens": requests * TOKENS_PER_REQUEST,
            "peak_rps": requests / 3600,
        }
    )


def _forecast(start: pd.Timestamp, tokens_per_s: list[float]) -> pd.DataFrame:
    hours = pd.date_range(start, periods=len(tokens_per_s), freq="h")
    values = np.asarray(tokens_per_s) * 3600
    bands = ("yhat", "lo_80", "hi_80", "lo_95", "hi_95")
    return pd.DataFrame({"ds": hours, **{band: values for band in bands}})


def store_members(database: Database, *, start: pd.Timestamp | None = None) -> pd.Timestamp:
    """History and a token forecast of every member (the forecast from ``start``)."""
    start = start if start is not None else forecast_start()
    for name, pattern in PATTERN.items():
        with database.transaction() as session:
            ingest.store(
                session, _history(start, pattern[0]).assign(series=name), create_series=True
            )
            series = repository.get_series(session, name=name)
            result = ItemResult(
                series=name,
                metric="tokens",
                status="complete",
                horizon=len(pattern),
                trained_until=start - pd.Timedelta(hours=1),
                model="hand-made",
                forecast=_forecast(start, pattern),
            )
            save_run(session, series_id=series.id, result=result)
    return start


def create_profiles(client: TestClient) -> None:
    for profile in PROFILES:
        response = client.post("/v1/gpu-profiles", json=profile)
        assert response.status_code == 201, response.text


def create_pool(client: TestClient, name: str, **kwargs: Any) -> None:
    response = client.post("/v1/pools", json=pool_body(name, **kwargs))
    assert response.status_code == 201, response.text


def rest_plan(client: TestClient, name: str, **params: Any) -> dict[str, Any]:
    response = client.get(f"/v1/pools/{name}/plan", params=params)
    assert response.status_code == 200, response.text
    return response.json()
