"""Hand-made pools for the pool surface tests (Grafana, overview, /metrics): members whose
token forecasts are stored directly, so every member's GPUs per hour are known in advance.

Profiles carry 1,000 tokens/s per GPU; at utilization 0.75 and safety factor 1.2 a member
needs ceil(tokens/s × 0.0016) GPUs, in whole replicas: 4,000 tokens/s is 8 GPUs on TP4 (two
replicas), 2,000 is 4 (one), 1,000 on TP2 is 2 (one). The forecasts start two hours before
now, so the plan's current hour is its third; history ends where the forecast starts and
``peak_rps`` equals the mean rate (peak factor 1). Requests carry 1,000 tokens each, except
code's: 1,000 to 1,750 by the hour of day (:func:`code_tokens_per_request`), so its requests/s
rate limits differ by hour."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from fastapi.testclient import TestClient

from app import ingest
from app.db import Database, repository
from app.forecasts.store import save_run
from app.forecasts.work import ItemResult

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


def code_tokens_per_request(hour: int) -> float:
    """Code's measured tokens per request at a UTC hour of day: 1,000, 1,250, 1,500, 1,750, …"""
    return 1000.0 + 250.0 * (hour % 4)


PER_REQUEST: dict[str, Callable[[int], float]] = {CODE: code_tokens_per_request}
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


def history(
    start: pd.Timestamp,
    tokens_per_s: float,
    *,
    days: int = 3,
    per_request: Callable[[int], float] = lambda hour: TOKENS_PER_REQUEST,
) -> pd.DataFrame:
    """``days`` of hours before ``start`` at ``tokens_per_s``, in requests of
    ``per_request(hour of day)`` tokens."""
    hours = pd.date_range(end=start - pd.Timedelta(hours=1), periods=days * 24, freq="h")
    tokens = np.full(len(hours), tokens_per_s * 3600)
    requests = tokens / np.array([per_request(hour) for hour in hours.hour])
    return pd.DataFrame(
        {
            "hour": hours,
            "requests": requests,
            "prompt_tokens": tokens * 0.8,
            "completion_tokens": tokens * 0.2,
            "total_tokens": tokens,
            "peak_rps": requests / 3600,
        }
    )


def forecast_frame(start: pd.Timestamp, per_hour: Any) -> pd.DataFrame:
    """A forecast from ``start`` whose every band is ``per_hour`` (values per hour)."""
    values = np.asarray(per_hour, dtype=float)
    hours = pd.date_range(start, periods=len(values), freq="h")
    bands = ("yhat", "lo_80", "hi_80", "lo_95", "hi_95")
    return pd.DataFrame({"ds": hours, **{band: values for band in bands}})


def save_forecast(
    database: Database, name: str, metric: str, start: pd.Timestamp, per_hour: Any
) -> None:
    """Store a complete ``metric`` forecast run of series ``name`` from ``start``."""
    forecast = forecast_frame(start, per_hour)
    with database.transaction() as session:
        series = repository.get_series(session, name=name)
        result = ItemResult(
            series=name,
            metric=metric,
            status="complete",
            horizon=len(forecast),
            trained_until=start - pd.Timedelta(hours=1),
            model="hand-made",
            forecast=forecast,
        )
        save_run(session, series_id=series.id, result=result)


def store_members(database: Database, *, start: pd.Timestamp | None = None) -> pd.Timestamp:
    """History and a token forecast of every member (the forecast from ``start``)."""
    start = start if start is not None else forecast_start()
    for name, pattern in PATTERN.items():
        per_request = PER_REQUEST.get(name, lambda hour: TOKENS_PER_REQUEST)
        frame = history(start, pattern[0], per_request=per_request)
        with database.transaction() as session:
            ingest.store(session, frame.assign(series=name), create_series=True)
        save_forecast(database, name, "tokens", start, np.asarray(pattern) * 3600)
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
