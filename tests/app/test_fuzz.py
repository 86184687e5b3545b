"""Property-based fuzzing of every operation in gpucast's OpenAPI schema with schemathesis.

A real server (uvicorn on a loopback port) serves a fresh database, SQLite and PostgreSQL
(``GPUCAST_TEST_POSTGRES_URL``; skipped without it, CI sets it), seeded with a series, its
history, a GPU profile, an event and stored forecasts, so deep paths (plans, accuracy, KEDA
YAML) are reachable. PostgreSQL refuses input SQLite stores (NUL in text), so a guarantee
checked on SQLite alone does not hold in production. Each operation is fuzzed with valid and
invalid inputs, free and pinned to the seeded names, and every response must pass schemathesis'
checks: no 5xx, documented status codes and content types, bodies matching the response
schema, invalid input rejected.
The run is seeded and bounded; ``GPUCAST_FUZZ_EXAMPLES`` raises the budget (bench/fuzz.sh).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pytest
import requests
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

import capacity
from app import ingest
from app.api import create_app
from app.api.routes import forecasts as forecast_routes
from app.db import Database, open_database, repository
from app.forecasts.work import ItemResult, WorkItem
from app.jobs import ForecastOptions, run_forecasts
from app.settings import get_settings
from tests.support.server import LiveServer

EXAMPLES = int(os.environ.get("GPUCAST_FUZZ_EXAMPLES", "12"))
API_KEY = "fuzz-key-7f3a9c"
SERIES = "prod-us/llama-3.1-70b"  # the schema's own example name, so explicit examples hit it
PROFILE = "h100-70b"
WRITE_METHODS = {"POST", "PUT", "DELETE"}
# POSTs that only compute or query (Grafana's protocol posts its queries): reads, no key needed.
READ_POSTS = ("/v1/capacity/estimate", "/v1/capacity/simulate", "/grafana/")
# Operations that fit models (one backtest + refit per example) get a fraction of the budget,
# and their pinned variant uses the fast models.
HEAVY = {
    "POST /v1/series/{name}/forecast": {"models": "seasonal_naive,seasonal_ma"},
    # one forecast per replayed night
    "GET /v1/series/{name}/capacity/backtest": {"models": "seasonal_naive,seasonal_ma", "days": 2},
}
# positive_data_acceptance expects every schema-valid request to succeed. These operations
# also apply rules JSON Schema cannot state, so a schema-valid request may rightly get a 422;
# every other check (no 5xx, documented statuses, response schemas, ...) still runs on them.
SEMANTIC_RULES = {
    # hours on the hour, no hour twice, 1970 .. a year ahead, known column sets (cross-row)
    "POST /v1/series/{name}/observations": "rows are validated together",
    # hours on the hour and over, each once; tokens at least one per request (cross-field)
    "POST /v1/gpu-profiles/{name}/observations": "rows are validated together",
    "POST /v1/events": "end must be after start",
    "PUT /v1/events/{event_id}": "end must be after start",
    "POST /v1/capacity/simulate": "exactly one of series / load_qps; the series needs history",
    "POST /v1/capacity/estimate": "the model must fit the GPU and context (a sizing result)",
    "POST /v1/series/{name}/forecast": "the series needs stored history to forecast",
    "GET /v1/series/{name}/kubernetes": "a plan that never exceeds min_replicas has no trigger",
    "GET /v1/series/{name}/capacity/backtest": "the replay needs history before its first night",
    # max_gpus >= min_gpus and an SLO of both p95 targets or none are rules across two query
    # parameters
    "GET /v1/series/{name}/capacity": "max_gpus must not be below min_gpus",
    "GET /v1/series/{name}/desired-replicas": "max_gpus must not be below min_gpus",
    "GET /v1/series/{name}/capacity/compare": "profiles are distinct stored names",
    # members name stored series and GPU profiles whose replicas fit the pool's nodes
    "POST /v1/pools": "members must exist, each once, and fit the nodes; a name may not end /plan",
    "PUT /v1/pools/{name}": "members must exist, each once, and fit the nodes",
    "GET /v1/pools/{name}/plan": "max_gpus must not be below min_gpus",
    # an SLO is both p95 targets or none, on a load-test profile that meets it at the series'
    # mixes at the lowest load; the profile must exist (404 otherwise)
    "PUT /v1/series/{name}/deployment": "an SLO needs both targets and a profile that meets it",
    # kube_deployment or replicas_query, not both; TGI's preset has no TTFT histogram to default
    "PUT /v1/series/{name}/serving-source": "replicas counted one way; tgi needs a ttft histogram",
    # file contents are parsed: a readable load test of one setup, measured at the replica size
    "PUT /v1/gpu-profiles/{name}/loadtest": "the files must hold a valid load-test table",
    # a mix whose p95 TTFT or TPOT misses the SLO even at the lowest load has no capacity
    "GET /v1/gpu-profiles/{name}/slo-capacity": "the mix must meet the SLO at the lowest load",
    # a load-test profile's replica size is the tensor-parallel degree its table was measured at
    "PUT /v1/gpu-profiles/{name}": "gpus_per_replica must match a stored load test",
}
# Grafana's protocol carries target names, variable queries, tag and ad-hoc filter keys as
# free strings; the datasource checks them against what gpucast serves (400 with the list).
SEMANTIC_PREFIXES = ("/grafana/",)


def _history(days: int = 10) -> pd.DataFrame:
    rng = np.random.default_rng(6)
    hours = pd.date_range("2026-10-01T00:00Z", periods=days * 24, freq="h")
    shape = 1.0 + 0.6 * np.sin(2 * np.pi * (hours.hour.to_numpy() - 6) / 24)
    requests_ = 3600.0 * shape * rng.lognormal(0, 0.05, len(hours))
    return pd.DataFrame(
        {
            "series": SERIES,
            "hour": hours,
            "requests": requests_,
            "prompt_tokens": requests_ * 500,
            "completion_tokens": requests_ * 100,
            "total_tokens": requests_ * 600,
            "peak_rps": requests_ / 1800,
        }
    )


def _seed(database_url: str) -> None:
    """A series with 10 days of history, a GPU profile, an event and stored forecasts."""
    database = open_database(database_url)
    with database.transaction() as session:
        ingest.store(session, _history(), create_series=True)
        repository.create_gpu_profile(
            session,
            name=PROFILE,
            gpu_type="H100-80G",
            model="llama-3.1-70b",
            tokens_per_s_per_gpu=2400.0,
            gpus_per_replica=2,
            usd_per_hour_on_demand=2.5,
            usd_per_hour_reserved=1.6,
            usd_per_hour_spot=None,
        )
        repository.create_event(
            session,
            name="launch",
            start=pd.Timestamp("2026-10-05T00:00Z").to_pydatetime(),
            end=pd.Timestamp("2026-10-06T00:00Z").to_pydatetime(),
            series_name=SERIES,
            multiplier=1.5,
        )
    run_forecasts(database, ForecastOptions(models=("seasonal_naive", "seasonal_ma"), workers=1))
    database.dispose()


@dataclass
class FuzzReport:
    examples: int = 0
    failures: list[str] = field(default_factory=list)

    def run(self, label: str, test: Callable[[], None]) -> None:
        try:
            test()
        except Unsatisfiable:
            pass  # negative mode on an operation with nothing to make invalid
        # schemathesis raises a FailureGroup (a BaseExceptionGroup) for several distinct failures
        except (Exception, BaseExceptionGroup) as exc:  # collect every failure, then fail once
            self.failures.append(f"{label}: {type(exc).__name__}: {exc}")


def _label(operation: Any) -> str:
    return f"{operation.method.upper()} {operation.path}"


def _no_route(response: requests.Response) -> bool:
    """The router matched no operation (Starlette's bare 404), so nothing ran: '.'/'..' path
    segments the client resolves to another path, or a decoded newline, which a ``{name:path}``
    parameter does not span."""
    return response.status_code == 404 and response.json() == {"detail": "Not Found"}


_GUARD_REFUSAL = re.compile(r"contains (the control character|an unpaired surrogate)|levels deep")


def _refused_by_the_guard(response: requests.Response) -> bool:
    """The request guard (app/api/guard.py) refused text no route may see, before routing and
    so before the key check: nothing ran. Free-form bodies (an ingest record is any object)
    cannot state that rule in their schema, so positive examples may hold such text."""
    if response.status_code != 422:
        return False
    detail = response.json().get("detail")
    return isinstance(detail, str) and _GUARD_REFUSAL.search(detail) is not None


def _pinned_variants(operation: Any) -> list[dict[str, Any]]:
    """Free generation plus, where the path or query names a series or profile, pinned to the
    seeded ones (random names only ever reach the 404 branch)."""
    variants: list[dict[str, Any]] = [{}]
    names = {p.name for p in operation.path_parameters}
    queries = {p.name for p in operation.query}
    path = operation.path
    if "name" in names and operation.method.upper() != "DELETE":
        pinned = PROFILE if path.startswith("/v1/gpu-profiles") else SERIES
        variant: dict[str, Any] = {"path_parameters": {"name": pinned}}
        query = dict(HEAVY.get(_label(operation), {}))
        if "profile" in queries:
            query["profile"] = PROFILE
        if "profiles" in queries:
            query["profiles"] = PROFILE
        if query:
            variant["query"] = query
        variants.append(variant)
    return variants


def _fuzz_operation(
    operation: Any, *, base_url: str, headers: dict[str, str], report: FuzzReport
) -> None:
    label = _label(operation)
    examples = max(2, EXAMPLES // 4) if label in HEAVY else EXAMPLES
    semantic = label in SEMANTIC_RULES or operation.path.startswith(SEMANTIC_PREFIXES)
    excluded = [schemathesis.checks.positive_data_acceptance] if semantic else []
    session = requests.Session()
    anonymous = requests.Session()
    needs_key = (
        bool(headers)
        and operation.method.upper() in WRITE_METHODS
        and not operation.path.startswith(READ_POSTS)
    )

    def fuzz_test(mode: GenerationMode, variant: dict[str, Any]) -> Callable[[], None]:
        @settings(
            max_examples=examples,
            deadline=None,
            derandomize=True,
            database=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy(mode, **variant))
        def fuzz(case: schemathesis.Case) -> None:
            report.examples += 1
            if needs_key and mode is GenerationMode.POSITIVE:
                response = case.call(base_url=base_url, session=anonymous)
                refused = _no_route(response) or _refused_by_the_guard(response)
                assert response.status_code == 401 or refused, (
                    f"write without a key answered {response.status_code}, not 401"
                )
            case.call_and_validate(
                base_url=base_url,
                session=session,
                headers=headers,
                excluded_checks=excluded,
                timeout=60,
            )

        return fuzz  # type: ignore[no-any-return]

    with session, anonymous:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            for variant in _pinned_variants(operation):
                name = f"{label} [{mode.value}, {variant or 'free'}]"
                report.run(name, fuzz_test(mode, variant))


def _operations(schema: Any) -> Iterator[Any]:
    operations = [result.ok() for result in schema.get_all_operations()]
    # Deletes last, so they do not remove what the other operations are fuzzed against.
    return iter(sorted(operations, key=lambda op: op.method.upper() == "DELETE"))


@pytest.mark.parametrize("api_keys", ["", API_KEY], ids=["no-key-configured", "key-configured"])
def test_fuzz_every_operation(database_url: str, api_keys: str) -> None:
    """``database_url`` is a fresh SQLite file or the emptied PostgreSQL test database."""
    _seed(database_url)
    backend = "postgresql" if database_url.startswith("postgresql") else "sqlite"
    app_settings = get_settings(database_url=database_url, auto_migrate=False, api_keys=api_keys)
    headers = {"X-API-Key": api_keys} if api_keys else {}
    report = FuzzReport()
    started = time.monotonic()
    with LiveServer(app_settings) as base_url:
        schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json")
        labels = []
        for operation in _operations(schema):
            labels.append(_label(operation))
            _fuzz_operation(operation, base_url=base_url, headers=headers, report=report)
    print(
        f"\nfuzz[{backend}, {'key' if api_keys else 'open'}]: {len(labels)} operations, "
        f"{report.examples} examples, {len(report.failures)} failing variants, "
        f"{time.monotonic() - started:.0f} s"
    )
    # every operation of the app's own schema was fuzzed (read here in process, apart from the
    # served document schemathesis parsed), and none fell out of it: the schema had 52
    # operations when this floor was set, and an operation removed on purpose lowers it here
    schema_ops = create_app(app_settings).openapi()["paths"]
    expected = {f"{method.upper()} {path}" for path, item in schema_ops.items() for method in item}
    assert sorted(labels) == sorted(expected)
    assert len(labels) >= 52, labels
    assert report.examples >= len(labels) * 2
    assert not report.failures, "\n\n".join(report.failures)


# What the fuzzer found, pinned as plain regression tests (each was a 500 or a wrong answer).


def test_series_name_with_a_trailing_newline_is_rejected(client: TestClient) -> None:
    response = client.post("/v1/series", json={"name": "prod/chat\n"})
    assert response.status_code == 422 and "invalid series name" in response.json()["detail"]


def test_json_body_that_is_not_utf8_is_a_422(client: TestClient) -> None:
    response = client.post(
        "/v1/series", content=b'{"name": "\xff"}', headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422
    assert response.json()["detail"] == "request body is not valid UTF-8 JSON (byte 10)"


@pytest.mark.parametrize("value", ["95587", "5.9e-08", "-1"])
def test_numeric_time_bounds_are_rejected(client: TestClient, value: str) -> None:
    assert client.post("/v1/series", json={"name": "svc"}).status_code == 201
    response = client.get("/v1/series/svc/observations", params={"end": value})
    assert response.status_code == 422 and "ISO 8601" in response.text


def test_failed_forecast_run_is_reported_not_a_500(
    client: TestClient, database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    with database.transaction() as session:
        ingest.store(session, _history(days=3), create_series=True)

    def failing(item: WorkItem) -> ItemResult:
        return ItemResult(item.series, item.metric, "failed", horizon=24, error="ValueError: x")

    monkeypatch.setattr(forecast_routes, "run_item", failing)
    response = client.post(f"/v1/series/{SERIES}/forecast")
    assert response.status_code == 200, response.text
    runs = response.json()["runs"]
    assert len(runs) == 2 and all(r["status"] == "failed" and r["points"] == [] for r in runs)


def test_overflowing_gpu_count_is_a_422() -> None:
    with pytest.raises(capacity.CapacityError, match="not a finite number"):
        capacity.round_up_count(float("inf"))
    # a per-GPU rate so small that rate x target underflows to 0 (a fuzzed profile did this)
    with pytest.raises(capacity.CapacityError, match="not a finite number"):
        capacity.gpus_for_load(np.array([0.0, 5.0]), 5e-324, utilization_target=0.01)
    with pytest.raises(capacity.CapacityError, match="not a finite number"):
        capacity.gpus_for_load(np.array([1e17]), 1.0, utilization_target=0.5)


def test_csv_header_with_a_bare_carriage_return_is_a_422(client: TestClient) -> None:
    assert client.post("/v1/series", json={"name": "svc"}).status_code == 201
    response = client.post(
        "/v1/series/svc/observations",
        content=b"timestamp,re\rquests\n2026-10-01T00:00:00Z,1\n",
        headers={"Content-Type": "text/csv"},
    )
    assert response.status_code == 422
    assert response.json()["detail"].startswith("malformed CSV header: new-line character")


@pytest.mark.parametrize(
    "field, value", [("usd_per_hour_spot", True), ("tokens_per_s_per_gpu", "1e3")]
)
def test_gpu_profile_numbers_are_not_coerced(client: TestClient, field: str, value: object) -> None:
    profile = {"name": "h100", "gpu_type": "H100-80G", "model": "m", "tokens_per_s_per_gpu": 2400}
    response = client.post("/v1/gpu-profiles", json=profile | {field: value})
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == ["body", field]
