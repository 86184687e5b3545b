"""A plan at an SLO follows the model learned from the running fleet: each hour sizes on the
answer ``GET /v1/gpu-profiles/{name}/slo-capacity`` gives at its mix, production hours folded
in — on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

import capacity
from app.cli import main
from tests.app.test_slo_plans import CHAT, COMPLETION, PLAN, PROMPT, SLO, at_slo, h100, plan
from tests.support.fallback import fallback_of

__all__ = ["at_slo", "h100"]  # fixtures

MIX = {"prompt_tokens": PROMPT, "completion_tokens": COMPLETION}


def answer(client: TestClient) -> dict[str, Any]:
    response = client.get("/v1/gpu-profiles/h100-nim/slo-capacity", params={**MIX, **SLO})
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def hours_at(
    h100: capacity.LoadTestTable, shares: list[float], *, slower: float, age_days: float = 0.0
) -> list[dict[str, Any]]:
    """One replica's hours at the chat series' mix at ``shares`` of the lab's answer, serving
    ``slower`` times the p95 TTFT and TPOT the lab's model expects at each load."""
    model = capacity.fit_slo_model(h100, gpus_per_replica=4)
    lab = model.capacity(
        prompt_tokens=PROMPT, completion_tokens=COMPLETION, slo=capacity.SloTarget(**SLO)
    ).requests_per_s_per_replica
    loads = [share * lab for share in shares]
    served = [capacity.ProductionHour(load, PROMPT, COMPLETION, 1.0, 1.0) for load in loads]
    expected = capacity.expected_p95(model, served)
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    rows = []
    for i, (load, p95) in enumerate(zip(loads, expected, strict=True)):
        assert p95 is not None  # below the share of saturation the model judges
        requests = load * 3600
        rows.append(
            {
                "hour": (now - timedelta(days=age_days, hours=2 + i)).isoformat(),
                "replicas": 1,
                "requests": requests,
                "prompt_tokens": requests * PROMPT,
                "completion_tokens": requests * COMPLETION,
                "ttft_p95_s": slower * p95[0],
                "tpot_p95_s": slower * p95[1],
            }
        )
    return rows


def post(client: TestClient, rows: list[dict[str, Any]]) -> None:
    response = client.post("/v1/gpu-profiles/h100-nim/observations", json=rows)
    assert response.status_code == 200, response.text


def capacities(plan_: dict[str, Any]) -> list[float]:
    return [hour["requests_per_s_per_replica"] for hour in plan_["hours"]]


def sized_as_the_endpoint_says(
    before: dict[str, Any], after: dict[str, Any], lab: dict[str, Any], learned: dict[str, Any]
) -> None:
    """Each hour moved by the answer's ratio (the lab's hedge kept), never below the learned
    range's low edge (what production sustained), as the endpoint answers."""
    ratio = learned["requests_per_s_per_replica"] / lab["requests_per_s_per_replica"]
    floor = min(learned["requests_per_s_per_replica_low"], learned["requests_per_s_per_replica"])
    for old, new in zip(capacities(before), capacities(after), strict=True):
        assert new == pytest.approx(max(old * ratio, floor), rel=1e-6)


def test_a_fleet_slower_than_the_lab_grows_the_plan(
    at_slo: TestClient,
    h100: capacity.LoadTestTable,
    database_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    before, lab = plan(at_slo, CHAT), answer(at_slo)
    assert before["production_hours"] == 0
    assert {hour["production_hours"] for hour in before["hours"]} == {0}
    post(at_slo, hours_at(h100, [0.3, 0.45, 0.6], slower=1.3))
    after, learned = plan(at_slo, CHAT), answer(at_slo)  # the cached plan was refreshed
    assert learned["production_hours"] == 3
    assert learned["requests_per_s_per_replica"] < 0.95 * lab["requests_per_s_per_replica"]
    assert after["production_hours"] == 3
    assert {hour["production_hours"] for hour in after["hours"]} == {3}
    sized_as_the_endpoint_says(before, after, lab, learned)
    assert all(new < old for old, new in zip(capacities(before), capacities(after), strict=True))
    assert after["gpu_hours"] > before["gpu_hours"]
    assert after["peak_gpus"] > before["peak_gpus"]
    assert all(
        new["raw_gpus"] >= old["raw_gpus"]
        for old, new in zip(before["hours"], after["hours"], strict=True)
    )
    # every surface reads the same plan: what KEDA polls (a stale plan: its fallback), the
    # profile comparison and the CLI
    desired = at_slo.get(f"/v1/series/{CHAT}/desired-replicas", params=PLAN).json()
    assert desired["fallback_replicas"] == fallback_of(after) >= after["peak_replicas"]
    assert after["peak_replicas"] > before["peak_replicas"]
    url = f"/v1/series/{CHAT}/capacity/compare"
    row = at_slo.get(url, params={**PLAN, "profiles": "h100-nim"}).json()["profiles"][0]
    assert row["gpu_hours"] == pytest.approx(after["gpu_hours"])
    assert "learned from up to 3 production hours" in row["note"]
    assert main(["--database-url", database_url, "plan", CHAT, "--band", "yhat"]) == 0
    assert "learned from up to 3 production hours" in capsys.readouterr().out


def test_a_fleet_that_agrees_with_the_lab_leaves_the_plan(
    at_slo: TestClient, h100: capacity.LoadTestTable
) -> None:
    before = plan(at_slo, CHAT)
    # low load only, as the lab expects: within the SLO, far below the knee
    post(at_slo, hours_at(h100, [0.2, 0.3, 0.4], slower=1.0))
    after = plan(at_slo, CHAT)
    assert after["production_hours"] == 3
    assert capacities(after) == pytest.approx(capacities(before), rel=1e-12)
    assert [h["gpus"] for h in after["hours"]] == [h["gpus"] for h in before["hours"]]


def test_low_load_hours_shrink_the_plan_no_further_than_the_endpoint(
    at_slo: TestClient, h100: capacity.LoadTestTable
) -> None:
    before, lab = plan(at_slo, CHAT), answer(at_slo)
    # within the SLO but slower than the lab's model at those loads
    post(at_slo, hours_at(h100, [0.2, 0.3, 0.4], slower=1.25))
    after, learned = plan(at_slo, CHAT), answer(at_slo)
    ratio = learned["requests_per_s_per_replica"] / lab["requests_per_s_per_replica"]
    assert ratio < 0.95
    sized_as_the_endpoint_says(before, after, lab, learned)
    for old, new in zip(capacities(before), capacities(after), strict=True):
        assert old * ratio * (1 - 1e-6) <= new < old


def test_hours_older_than_the_window_have_no_effect(
    at_slo: TestClient, h100: capacity.LoadTestTable
) -> None:
    before = plan(at_slo, CHAT)
    post(at_slo, hours_at(h100, [0.3, 0.45, 0.6], slower=1.5, age_days=15))
    after = plan(at_slo, CHAT)
    assert after["production_hours"] == 0
    assert answer(at_slo)["production_hours"] == 0
    assert capacities(after) == capacities(before)
    assert [h["gpus"] for h in after["hours"]] == [h["gpus"] for h in before["hours"]]
