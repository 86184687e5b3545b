"""A write that races another write on the same unique key is a 409, never a 500."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from threading import Barrier

import httpx
import pytest

from app.settings import Settings
from tests.support.server import LiveServer

CLIENTS = 12
PROFILE = {
    "gpu_type": "A100",
    "model": "llama",
    "tokens_per_s_per_gpu": 2000.0,
    "gpus_per_replica": 1,
}


@pytest.fixture
def base_url(settings: Settings) -> Iterator[str]:
    with LiveServer(settings) as url:
        yield url


def _all_at_once(base_url: str, method: str, path: str, body: dict) -> list:
    barrier = Barrier(CLIENTS)

    def one(_: int) -> tuple[int, str]:
        with httpx.Client(base_url=base_url, timeout=60) as client:
            client.get("/healthz")  # connected before the race starts
            barrier.wait()
            response = client.request(method, path, json=body)
            return response.status_code, response.text

    with ThreadPoolExecutor(CLIENTS) as pool:
        return list(pool.map(one, range(CLIENTS)))


def _check(answers: list, created: int) -> None:
    statuses = sorted(status for status, _ in answers)
    assert all(status < 500 for status in statuses), answers
    assert statuses.count(created) >= 1, answers
    assert set(statuses) <= {created, 409}, answers


def test_parallel_creates_of_one_name_are_one_success_and_409s(base_url: str) -> None:
    for round_ in range(4):
        profile = {**PROFILE, "name": f"gpu-{round_}"}
        answers = _all_at_once(base_url, "POST", "/v1/gpu-profiles", profile)
        _check(answers, 201)
        assert sorted(s for s, _ in answers).count(201) == 1
        series = {"name": f"svc-{round_}"}
        answers = _all_at_once(base_url, "POST", "/v1/series", series)
        _check(answers, 201)
        assert sorted(s for s, _ in answers).count(201) == 1


def test_parallel_first_puts_of_one_key_never_answer_500(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=60) as client:
        assert client.post("/v1/gpu-profiles", json={**PROFILE, "name": "gpu"}).status_code == 201
        for round_ in range(4):
            assert client.post("/v1/series", json={"name": f"svc-{round_}"}).status_code == 201
    for round_ in range(4):
        path = f"/v1/series/svc-{round_}"
        deploy = _all_at_once(base_url, "PUT", f"{path}/deployment", {"profile": "gpu"})
        _check(deploy, 200)
        source = {"url": "http://prometheus:9090", "requests_query": "sum(rate(x[1h]))"}
        sourced = _all_at_once(base_url, "PUT", f"{path}/source", source)
        _check(sourced, 200)
