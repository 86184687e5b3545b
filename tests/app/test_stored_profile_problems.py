"""A stored GPU profile can never make a list or a plan 500: profiles stored before the import
checked rows as physics (an infinite tokens/s figure, a subnormal TTFT, a request rate × 1e300)
are listed with their problem, and every plan, capacity or comparison on them is a 409 naming
the profile — on SQLite and PostgreSQL, the bad values written into the database directly."""

from __future__ import annotations

import math
from urllib.parse import urlencode

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.cli import main
from app.db import Database
from app.db.models import GpuProfile, GpuProfileLoadTest
from app.profiles import slo_capacity
from tests.app.conftest import BACKENDS
from tests.app.test_slo_plans import CHAT, PLAN, SLO, at_slo, h100  # noqa: F401 - fixtures

PROFILE = "h100-nim"


def poison(database: Database, *, tokens_per_s: float | None = None, **cells: float) -> None:
    """Write values the import refuses into the stored profile and its table (row 3)."""
    with database.transaction() as session:
        profile = session.scalar(select(GpuProfile).where(GpuProfile.name == PROFILE))
        assert profile is not None
        if tokens_per_s is not None:
            profile.tokens_per_s_per_gpu = tokens_per_s
        row = session.scalar(
            select(GpuProfileLoadTest).where(GpuProfileLoadTest.gpu_profile_id == profile.id)
        )
        assert row is not None
        records = [dict(r) for r in row.records]
        records[2].update(cells)
        row.records = records


def restart(client: TestClient) -> None:
    """Forget what the process computed before (as after a restart): fitted models, answers."""
    slo_capacity._models.clear()
    client.app.state.response_cache.clear()  # type: ignore[attr-defined]


SURFACES = [
    "/v1/gpu-profiles/h100-nim/slo-capacity?prompt_tokens=1000&completion_tokens=200"
    "&ttft_p95_s=2&tpot_p95_s=0.05",
    f"/v1/series/{CHAT}/capacity?" + urlencode(PLAN),
    f"/v1/series/{CHAT}/capacity/compare?profiles=h100-nim&" + urlencode(PLAN),
    f"/v1/series/{CHAT}/kubernetes",
    f"/v1/series/{CHAT}/desired-replicas",
]

# (id, what is written, words of the problem, backends it can be stored on)
BAD = [
    ("inf figure", {"tokens_per_s": math.inf}, "its tokens_per_s_per_gpu is inf", BACKENDS),
    (
        "subnormal TTFT",
        {"ttft_p95_s": 5e-324},
        "its load test: records, row 3, column ttft_p95_s: 4.94066e-324 s is below 0.0001 s",
        BACKENDS,
    ),
    (
        "rate 1e300",
        {"request_throughput_rps": 1e300},
        "its load test: records, row 3, column request_throughput_rps: 1e+300 requests/s",
        BACKENDS,
    ),
    (
        "subnormal prompt",
        {"prompt_tokens": 5e-324},
        "its load test: records, row 3, column prompt_tokens: 4.94066e-324 is outside [1,",
        BACKENDS,
    ),
    # JSON has no infinity: only SQLite's JSON text keeps one (as Infinity)
    (
        "inf TTFT",
        {"ttft_p95_s": math.inf},
        "its load test: records, row 3, column ttft_p95_s: inf is not a finite number",
        ("sqlite",),
    ),
]


@pytest.mark.parametrize(
    ("bad", "says", "backends"), [case[1:] for case in BAD], ids=[case[0] for case in BAD]
)
def test_a_profile_stored_unusable_is_listed_with_its_problem_and_never_planned(
    at_slo: TestClient,  # noqa: F811 - the fixture, by name
    database: Database,
    database_url: str,
    capsys: pytest.CaptureFixture[str],
    bad: dict[str, float],
    says: str,
    backends: tuple[str, ...],
) -> None:
    if ("sqlite" if database_url.startswith("sqlite") else "postgres") not in backends:
        pytest.skip("PostgreSQL's JSON cannot hold this value, so no profile can carry it")
    plain = {"name": "plain", "gpu_type": "L4", "model": "m", "tokens_per_s_per_gpu": 900.0}
    assert at_slo.post("/v1/gpu-profiles", json=plain).status_code == 201
    poison(database, **bad)
    restart(at_slo)
    listed = at_slo.get("/v1/gpu-profiles")
    assert listed.status_code == 200, listed.text
    problems = {p["name"]: p["problem"] for p in listed.json()}
    assert problems["plain"] is None and says in problems[PROFILE]
    one = at_slo.get(f"/v1/gpu-profiles/{PROFILE}").json()
    assert says in one["problem"]
    assert one["tokens_per_s_per_gpu"] == (None if "tokens_per_s" in bad else 1000.0)
    page = at_slo.get("/")
    assert page.status_code == 200 and "cannot use" in page.text
    for url in SURFACES:
        response = at_slo.get(url)
        assert response.status_code == 409, (url, response.text)
        detail = response.json()["detail"]
        assert (
            detail.startswith(f"GPU profile '{PROFILE}' is stored with values gpucast cannot use (")
            and says in detail
        ), detail
    # the CLI lists it and refuses to compute with it, in one line
    cli_db = ["--database-url", database_url]
    assert main([*cli_db, "profile", "list"]) == 0
    assert PROFILE in capsys.readouterr().out
    code = main(
        [*cli_db, "profile", "capacity", PROFILE, "--prompt-tokens", "1000"]
        + ["--completion-tokens", "200", "--ttft-p95-s", "2", "--tpot-p95-s", "0.05"]
    )
    error = capsys.readouterr().err
    assert code != 0 and error.count("\n") == 1 and says in error, error
    # replaced by a good import, it plans again
    good = at_slo.put(
        f"/v1/gpu-profiles/{PROFILE}",
        json={
            "gpu_type": "H100-SXM-80GB-HBM3",
            "model": "llama-3-70b",
            "tokens_per_s_per_gpu": 1000.0,
            "gpus_per_replica": 4,
            "usd_per_hour_on_demand": 10.0,
        },
    )
    assert good.status_code == 200
    if "tokens_per_s" in bad:
        assert at_slo.get(SURFACES[1]).status_code == 200
