"""Plans at a latency SLO on a profile built from a real load-test table (a slice of the NIM
Llama-3-70B tables in ../shared/data/loadtests), and the cheapest-profile comparison — on
SQLite and PostgreSQL."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient

import capacity
from app.cli import main
from app.db import Database
from app.db.repository import get_gpu_profile
from app.jobs import ForecastOptions, run_forecasts
from app.profiles.loadtests import store_table
from tests.app.test_grafana import RANGE
from tests.app.test_jobs import daily_load, load

NIM_H100 = "meta-llama3-70b-instruct__H100-SXM-80GB-HBM3__nim-trtllm_genai-perf.csv"
NIM_A100 = "meta-llama3-70b-instruct__A100-SXM4-80GB__nim-trtllm_genai-perf.csv"
CHAT = "prod/chat-70b"
REASONING = "prod/reasoning-70b"
SLO = {"ttft_p95_s": 2.0, "tpot_p95_s": 0.05}
PROMPT, COMPLETION = 1000.0, 200.0
FAST = ForecastOptions(models=("seasonal_naive",), workers=1)
PLAN = {"band": "yhat", "utilization_target": 1.0, "safety_factor": 1.0}


def real_table(shared_data: Path, file_name: str, *, tp: int = 4) -> capacity.LoadTestTable:
    """The fp16 setup at tensor-parallel ``tp`` of a real NIM table, cut to 3 rows per mix."""
    text = (shared_data / "loadtests" / file_name).read_text()
    tables = capacity.read_loadtest_csv_setups(text, file_name=file_name)
    table = next(t for t in tables if t.tensor_parallel == tp and t.precision == "fp16")
    kept: list[dict[str, Any]] = []
    for record in table.to_records():  # sorted by mix, then load: the lowest loads of each
        mix = (record["prompt_tokens"], record["completion_tokens"])
        if sum((r["prompt_tokens"], r["completion_tokens"]) == mix for r in kept) < 6:
            kept.append(record)
    return capacity.LoadTestTable.from_records(kept, **table.meta())


def mix_load(completion_per_request: float, *, level: float = 3.6e6) -> pd.DataFrame:
    """Three weeks of hourly load at PROMPT / ``completion_per_request`` tokens per request."""
    frame = daily_load(level=level)
    requests = frame["requests"]
    return frame.assign(
        prompt_tokens=requests * PROMPT,
        completion_tokens=requests * completion_per_request,
        total_tokens=requests * (PROMPT + completion_per_request),
        peak_rps=np.nan,
    )


def add_profile(
    client: TestClient,
    database: Database,
    name: str,
    table: capacity.LoadTestTable | None,
    *,
    usd: float,
    gpus_per_replica: int = 4,
    model: str = "llama-3-70b",
) -> None:
    body = {
        "name": name,
        "gpu_type": table.gpu_type if table else "H100-80G",
        "model": model,
        "tokens_per_s_per_gpu": 1000.0,
        "gpus_per_replica": gpus_per_replica,
        "usd_per_hour_on_demand": usd,
    }
    assert client.post("/v1/gpu-profiles", json=body).status_code == 201
    if table is not None:
        with database.transaction() as session:
            profile = get_gpu_profile(session, name=name)
            store_table(session, profile=profile, table=table, sources=[NIM_H100])


@pytest.fixture
def h100(shared_data: Path) -> capacity.LoadTestTable:
    return real_table(shared_data, NIM_H100)


@pytest.fixture
def at_slo(client: TestClient, database: Database, h100: capacity.LoadTestTable) -> TestClient:
    """Two series of equal requests, the second's answers five times as long, both forecast
    on requests only (the mix is the recent measured one), deployed at SLO on the H100."""
    load(database, CHAT, mix_load(COMPLETION))
    load(database, REASONING, mix_load(5 * COMPLETION))
    assert not run_forecasts(database, replace(FAST, metrics=("requests",))).failed
    add_profile(client, database, "h100-nim", h100, usd=4 * 2.5)
    for series in (CHAT, REASONING):
        response = client.put(
            f"/v1/series/{series}/deployment", json={"profile": "h100-nim", **SLO}
        )
        assert response.status_code == 200, response.text
    return client


def plan(client: TestClient, series: str, **query: Any) -> dict[str, Any]:
    response = client.get(f"/v1/series/{series}/capacity", params={**PLAN, **query})
    assert response.status_code == 200, response.text
    return response.json()


def test_a_decode_heavy_mix_grows_by_the_ratio_of_slo_capacities(
    at_slo: TestClient, h100: capacity.LoadTestTable
) -> None:
    chat, reasoning = plan(at_slo, CHAT), plan(at_slo, REASONING)
    model = capacity.fit_slo_model(h100, gpus_per_replica=4)
    target = capacity.SloTarget(**SLO)
    short = model.capacity(prompt_tokens=PROMPT, completion_tokens=COMPLETION, slo=target)
    long = model.capacity(prompt_tokens=PROMPT, completion_tokens=5 * COMPLETION, slo=target)
    # unmeasured mixes: each hour is sized at the low edge of its answer's range
    slo_ratio = short.requests_per_s_per_replica_low / long.requests_per_s_per_replica_low
    token_ratio = (PROMPT + 5 * COMPLETION) / (PROMPT + COMPLETION)
    assert abs(slo_ratio - token_ratio) > 0.5  # the two rules disagree on this table
    for a, b in zip(chat["hours"], reasoning["hours"], strict=True):
        assert a["completion_tokens_per_request"] == pytest.approx(COMPLETION)
        assert b["completion_tokens_per_request"] == pytest.approx(5 * COMPLETION)
        assert a["basis"] == b["basis"] == "interpolated"
        assert a["requests_per_s_per_replica"] == pytest.approx(
            short.requests_per_s_per_replica_low, rel=1e-2
        )
        # whole replicas: the ratio holds within one replica of each count
        assert b["raw_gpus"] / a["raw_gpus"] == pytest.approx(slo_ratio, rel=8 / a["raw_gpus"])
    assert (
        chat["capacity_basis"] == reasoning["capacity_basis"] == "slo capacity at each hour's mix"
    )
    assert chat["mix_source"] == "recent measured"
    assert chat["slo"] == SLO


def test_slo_override_and_one_number_profiles(at_slo: TestClient, database: Database) -> None:
    strict = plan(at_slo, CHAT, ttft_p95_s=1.0, tpot_p95_s=0.05)
    loose = plan(at_slo, CHAT)
    assert strict["slo"] == {"ttft_p95_s": 1.0, "tpot_p95_s": 0.05}
    assert strict["peak_gpus"] > loose["peak_gpus"]
    # a one-number profile with the same SLO is sized exactly as without one
    add_profile(at_slo, database, "flat", None, usd=8.0)
    flat_slo = plan(at_slo, CHAT, profile="flat")
    flat = plan(at_slo, CHAT, profile="flat", ttft_p95_s=1.0, tpot_p95_s=0.05)
    assert [h["gpus"] for h in flat_slo["hours"]] == [h["gpus"] for h in flat["hours"]]
    assert flat_slo["hours"][0]["prompt_tokens_per_request"] is None
    assert flat_slo["hours"][0]["per_gpu_tokens_per_s"] == 1000.0
    assert "SLO not applied" in flat_slo["capacity_basis"]
    # KEDA polls the same SLO it was generated for
    yaml_text = at_slo.get(
        f"/v1/series/{CHAT}/kubernetes", params={**PLAN, "ttft_p95_s": 1.0, "tpot_p95_s": 0.05}
    ).text
    assert "ttft_p95_s=1.0" in yaml_text and "tpot_p95_s=0.05" in yaml_text
    desired = at_slo.get(
        f"/v1/series/{CHAT}/desired-replicas",
        params={**PLAN, "ttft_p95_s": 1.0, "tpot_p95_s": 0.05},
    )
    assert desired.status_code == 200


def test_unservable_mix_is_a_clear_422_and_exit_2(
    at_slo: TestClient, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    response = at_slo.get(
        f"/v1/series/{CHAT}/capacity", params={**PLAN, "ttft_p95_s": 0.01, "tpot_p95_s": 0.05}
    )
    assert response.status_code == 422
    assert "cannot meet the SLO" in response.json()["detail"]
    assert "TTFT" in response.json()["detail"]
    half = at_slo.get(f"/v1/series/{CHAT}/capacity", params={**PLAN, "ttft_p95_s": 1.0})
    assert half.status_code == 422 and "tpot_p95_s" in half.json()["detail"]
    db = ["--database-url", database_url]
    code = main(
        [*db, "plan", CHAT, "--band", "yhat", "--ttft-p95-s", "0.01", "--tpot-p95-s", "0.05"]
    )
    assert code == 2
    assert "cannot meet the SLO" in capsys.readouterr().err


def test_mix_forecasts_size_each_hour(
    client: TestClient, database: Database, h100: capacity.LoadTestTable
) -> None:
    frame = mix_load(COMPLETION)
    # the answers lengthen over the day: the forecast mix follows the hour
    hours = pd.DatetimeIndex(frame["hour"])
    frame["completion_tokens"] = frame["requests"] * (100 + 20 * hours.hour.to_numpy())
    frame["total_tokens"] = frame["prompt_tokens"] + frame["completion_tokens"]
    load(database, CHAT, frame)
    add_profile(client, database, "h100-nim", h100, usd=10.0)
    client.put(f"/v1/series/{CHAT}/deployment", json={"profile": "h100-nim", **SLO})
    report = run_forecasts(database, FAST)
    assert {r.metric for r in report.results} == {
        "requests",
        "tokens",
        "prompt_tokens",
        "completion_tokens",
    }
    body = plan(client, CHAT)
    assert body["mix_source"] == "forecast"
    by_hour = {pd.Timestamp(h["hour"]).hour: h for h in body["hours"]}
    assert by_hour[23]["completion_tokens_per_request"] == pytest.approx(560, rel=0.05)
    assert by_hour[0]["completion_tokens_per_request"] == pytest.approx(100, rel=0.05)
    assert by_hour[23]["requests_per_s_per_replica"] < by_hour[0]["requests_per_s_per_replica"]


# -- the cheapest GPU type ---------------------------------------------------------------------


@pytest.fixture
def three_profiles(at_slo: TestClient, database: Database, shared_data: Path) -> TestClient:
    a100 = real_table(shared_data, NIM_A100)
    add_profile(at_slo, database, "a100-nim", a100, usd=4 * 1.2)
    add_profile(at_slo, database, "flat", None, usd=8.0)
    return at_slo


def meets_slo(table: capacity.LoadTestTable | None, slo: dict[str, float]) -> bool | None:
    """Whether the SLO model of ``table`` serves the chat mix at ``slo`` at all (None: a
    one-number profile cannot say), straight from the model, not from the compare answer."""
    if table is None:
        return None
    model = capacity.fit_slo_model(table, gpus_per_replica=4)
    try:
        model.capacity(
            prompt_tokens=PROMPT, completion_tokens=COMPLETION, slo=capacity.SloTarget(**slo)
        )
    except capacity.SloUnreachableError:
        return False
    return True


def test_compare_marks_the_cheapest_that_meets_the_slo(
    three_profiles: TestClient, h100: capacity.LoadTestTable, shared_data: Path
) -> None:
    tables = {"h100-nim": h100, "a100-nim": real_table(shared_data, NIM_A100), "flat": None}
    url = f"/v1/series/{CHAT}/capacity/compare"
    body = three_profiles.get(url, params={**PLAN, "profiles": "h100-nim,a100-nim,flat"}).json()
    rows = {row["profile"]: row for row in body["profiles"]}
    assert body["slo"] == SLO
    for row in rows.values():
        assert row["gpu_hours"] == pytest.approx(
            sum(h["gpus"] for h in row["gpus_by_hour"]), rel=0.1
        )
    # expected apart from the compare answer: whether each table's SLO model serves the mix,
    # and each profile's own plan priced by the capacity endpoint
    met = {name: meets_slo(table, SLO) for name, table in tables.items()}
    assert met == {"h100-nim": True, "a100-nim": True, "flat": None}
    assert {name: row["slo_met"] for name, row in rows.items()} == met
    costs = {name: plan(three_profiles, CHAT, profile=name)["cost"]["total_usd"] for name in met}
    assert {name: row["cost_usd"] for name, row in rows.items()} == pytest.approx(costs)
    assert len(set(costs.values())) == 3  # no tie: the mark has one right answer
    # at an SLO only the profiles known to meet it are candidates: not the one-number one
    cheapest = min((name for name in met if met[name] is True), key=costs.__getitem__)
    assert [name for name, row in rows.items() if row["cheapest"]] == [cheapest]
    assert body["cheapest_profile"] == cheapest and body["cheapest_note"] is None
    assert body["model"] == "llama-3-70b"
    assert "one-number profile" in rows["flat"]["excluded"]
    assert [rows[name]["excluded"] for name in met if met[name]] == [None, None]
    # at an SLO the A100 cannot meet at this mix (by its own SLO model), only the H100 remains
    tight = {"ttft_p95_s": 2.0, "tpot_p95_s": 0.025}
    assert meets_slo(tables["a100-nim"], tight) is False and meets_slo(h100, tight) is True
    strict = three_profiles.get(
        url, params={**PLAN, "profiles": "h100-nim,a100-nim", **tight}
    ).json()
    rows = {row["profile"]: row for row in strict["profiles"]}
    assert rows["a100-nim"]["slo_met"] is False and rows["a100-nim"]["cost_usd"] is None
    assert "cannot meet the SLO" in rows["a100-nim"]["note"]
    assert rows["h100-nim"]["slo_met"] is True and rows["h100-nim"]["cheapest"] is True
    assert strict["cheapest_profile"] == "h100-nim"


def test_a_one_number_profile_is_never_the_cheapest_at_an_slo(
    three_profiles: TestClient, database: Database
) -> None:
    url = f"/v1/series/{CHAT}/capacity/compare"
    add_profile(three_profiles, database, "flat-cheap", None, usd=0.01)
    body = three_profiles.get(url, params={**PLAN, "profiles": "h100-nim,flat-cheap"}).json()
    rows = {row["profile"]: row for row in body["profiles"]}
    assert rows["flat-cheap"]["cost_usd"] < rows["h100-nim"]["cost_usd"]
    assert rows["flat-cheap"]["cheapest"] is False and rows["h100-nim"]["cheapest"] is True
    # none that meets the SLO: no cheapest, and why, profile by profile
    strict = {"ttft_p95_s": 2.0, "tpot_p95_s": 0.025}
    body = three_profiles.get(
        url, params={**PLAN, **strict, "profiles": "a100-nim,flat-cheap"}
    ).json()
    assert body["cheapest_profile"] is None
    assert not any(row["cheapest"] for row in body["profiles"])
    note = body["cheapest_note"]
    assert note.startswith("no compared profile of model llama-3-70b meets the SLO")
    assert "a100-nim cannot meet the SLO" in note and "flat-cheap a one-number profile" in note


def test_only_profiles_of_the_same_model_are_candidates(
    three_profiles: TestClient, database: Database, shared_data: Path
) -> None:
    """A cheaper profile of another model serves other answers: never the cheapest."""
    url = f"/v1/series/{CHAT}/capacity/compare"
    add_profile(
        three_profiles,
        database,
        "h100-8b",
        real_table(shared_data, NIM_H100),
        usd=0.5,
        model="llama-3-8b",
    )
    body = three_profiles.get(url, params={**PLAN, "profiles": "h100-8b,h100-nim"}).json()
    rows = {row["profile"]: row for row in body["profiles"]}
    assert rows["h100-8b"]["slo_met"] is True
    assert rows["h100-8b"]["cost_usd"] < rows["h100-nim"]["cost_usd"]
    assert body["model"] == "llama-3-70b"  # the deployed profile's, not the first compared
    assert rows["h100-8b"]["excluded"] == "serves model llama-3-8b, not llama-3-70b"
    assert body["cheapest_profile"] == "h100-nim" and rows["h100-nim"]["cheapest"] is True


def test_compare_refuses_bad_lists(three_profiles: TestClient) -> None:
    url = f"/v1/series/{CHAT}/capacity/compare"
    assert three_profiles.get(url, params={"profiles": "h100-nim,,a100-nim"}).status_code == 422
    assert three_profiles.get(url, params={"profiles": "h100-nim,h100-nim"}).status_code == 422
    assert three_profiles.get(url, params={"profiles": "h100-nim,nope"}).status_code == 404
    assert three_profiles.get(url).status_code == 422


def test_cli_compare_profiles(
    three_profiles: TestClient, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = ["--database-url", database_url]
    args = [*db, "plan", CHAT, "--band", "yhat", "--compare-profiles", "h100-nim,a100-nim,flat"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "<- cheapest" in out and "h100-nim" in out and "a100-nim" in out
    assert "not a candidate: a one-number profile" in out
    strict = [*db, "plan", CHAT, "--band", "yhat", "--ttft-p95-s", "2", "--tpot-p95-s", "0.025"]
    assert main([*strict, "--compare-profiles", "a100-nim,flat"]) == 0
    out = capsys.readouterr().out
    assert "<- cheapest" not in out
    assert "no cheapest: no compared profile of model llama-3-70b meets the SLO" in out
    assert main([*args, "--profile", "flat"]) == 2
    assert main([*db, "plan", CHAT, "--compare-profiles", "nope"]) != 0


def test_grafana_profile_compare_table(three_profiles: TestClient) -> None:
    target = {
        "refId": "A",
        "target": "profile_compare",
        "payload": {"series": CHAT, "profiles": ["h100-nim", "a100-nim", "flat"], **PLAN},
    }
    response = three_profiles.post("/grafana/query", json={"range": RANGE, "targets": [target]})
    assert response.status_code == 200, response.text
    (item,) = response.json()
    names = [c["text"] for c in item["columns"]]
    rows = [dict(zip(names, row, strict=True)) for row in item["rows"]]
    assert [r["profile"] for r in rows] == ["h100-nim", "a100-nim", "flat"]
    assert [r["profile"] for r in rows if r["cheapest"]] != ["flat"]
    assert sum(r["cheapest"] for r in rows) == 1
    assert {(r["ttft_p95_s"], r["tpot_p95_s"]) for r in rows} == {(2.0, 0.05)}
    rest = three_profiles.get(
        f"/v1/series/{CHAT}/capacity/compare",
        params={**PLAN, "profiles": "h100-nim,a100-nim,flat"},
    ).json()
    assert [r["cost_usd"] for r in rows] == [r["cost_usd"] for r in rest["profiles"]]
    # without profiles: those of the deployed profile's model (all three are llama-3-70b)
    target["payload"] = {"series": CHAT, **PLAN}
    response = three_profiles.post("/grafana/query", json={"range": RANGE, "targets": [target]})
    assert [row[1] for row in response.json()[0]["rows"]] == ["h100-nim", "a100-nim", "flat"]


def test_overview_card_compares_the_profiles_of_the_deployed_model(
    three_profiles: TestClient,
) -> None:
    page = three_profiles.get("/", params={"band": "yhat"})
    assert page.status_code == 200
    card = page.text.split(f'data-series="{CHAT}"')[1].split("</section>")[0]
    assert "GPU types" in card and card.count("(cheapest)") == 1
    assert "flat:" in card.split("(cheapest)")[1] and "a one-number profile" in card
    assert "h100-nim:" in card and "a100-nim:" in card and "flat:" in card
    assert "p95 TTFT 2 s / TPOT 0.05 s" in card


def test_cli_plan_shows_each_hours_mix_and_capacity(
    at_slo: TestClient, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = ["--database-url", database_url]
    assert main([*db, "plan", REASONING, "--band", "yhat"]) == 0
    out = capsys.readouterr().out
    assert "SLO p95 TTFT 2 s, TPOT 0.05 s: each hour at its SLO capacity" in out
    assert "1,000/1,000" in out and "REQ/S/REPL" in out
