"""Load-test imports are checked as physics, on every import path (CSV, vLLM and genai-perf
JSON; REST body and CLI file): every number finite and within physical ranges, no row implying
more tokens/s per GPU than any catalog GPU computes for the model, JSON inside a file's content
nested no deeper than a request body. A refusal is one line naming file, row and column (422 in
the API, exit 2 on the CLI) and stores nothing.

Rows come from the real NIM Llama-3-70B / H100 table (TP4 fp8; read from the shared data).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from fastapi.testclient import TestClient

from app.cli import main
from app.db import Database
from capacity.measured.loadtest_checks import fastest_tokens_per_s_per_gpu
from tests.app.test_loadtest_profiles import (
    PROFILE_URL,
    csv_text,
    import_body,
    nim_frame,
    profiles_stored,
)
from tests.capacity.loadtest_fixtures import NIM_70B_H100, genai_perf_export, vllm_result


@pytest.fixture(scope="module")
def nim_table(loadtests: Path) -> pd.DataFrame:
    """The real NIM Llama-3-70B H100 table, as text cells (skips when the data is absent)."""
    return pd.read_csv(loadtests / NIM_70B_H100, dtype=str, keep_default_na=False)


# Row 5 of the TP4 fp8 setup (index 4): 200/200 tokens at concurrency 5 (checked below).
ROW = 4


def _times(column: str, factor: float) -> Any:
    def change(frame: pd.DataFrame) -> pd.DataFrame:
        frame.loc[ROW, column] = repr(float(frame.loc[ROW, column]) * factor)
        return frame

    return change


def _set(column: str, value: str) -> Any:
    def change(frame: pd.DataFrame) -> pd.DataFrame:
        frame.loc[ROW, column] = value
        return frame

    return change


# (id, change, column named, words of the message)
HOSTILE_CSV = [
    ("subnormal TTFT", _set("ttft_p95_s", "5e-324"), "ttft_p95_s", "below 0.0001 s"),
    ("tiny TPOT", _set("itl_p95_s", "0.00005"), "tpot_p95_s", "below 0.0001 s"),
    ("rate x 1e300", _times("request_throughput_rps", 1e300), "request_throughput_rps", "tokens/s"),
    ("subnormal prompt", _set("isl", "5e-324"), "prompt_tokens", "outside [1,"),
    ("half a token", _set("osl", "0.5"), "completion_tokens", "outside [1,"),
    ("1e12 tokens", _set("isl", "1e12"), "prompt_tokens", "outside [1,"),
    ("concurrency 1e9", _set("concurrency", "1e9"), "concurrency", "requests in flight"),
]


def _physics_row(frame: pd.DataFrame) -> pd.DataFrame:
    """Row 5's throughput raised just past what 4 of the fastest catalog GPUs compute for a
    70.6e9-parameter model (llama-3-70b): 4 × 4500e12 / (2 × 70.6e9) ≈ 127,479 tokens/s."""
    tokens = float(frame.loc[ROW, "isl"]) + float(frame.loc[ROW, "osl"])
    limit = 4 * 4500e12 / (2 * 70.6e9)
    frame.loc[ROW, "request_throughput_rps"] = repr(1.01 * limit / tokens)
    return frame


def test_the_physics_bound_is_the_fastest_catalog_gpu() -> None:
    # B200 dense FP8: 4.5 PFLOPS; 2 FLOPs per parameter per token
    assert fastest_tokens_per_s_per_gpu(70.6e9) == pytest.approx(4500e12 / (2 * 70.6e9))
    assert fastest_tokens_per_s_per_gpu(None) == pytest.approx(4500e12 / 2e8)


def test_the_row_changed_is_the_one_named(nim_table: pd.DataFrame) -> None:
    frame = nim_frame(nim_table)
    assert (frame.loc[ROW, "isl"], frame.loc[ROW, "osl"]) == ("200", "200")
    # the real row is far inside physics: under a tenth of the bound
    tokens = 400 * float(frame.loc[ROW, "request_throughput_rps"]) / 4
    assert tokens < 0.1 * fastest_tokens_per_s_per_gpu(70.6e9)


@pytest.mark.parametrize(
    ("change", "column", "says"),
    [case[1:] for case in HOSTILE_CSV]
    + [(_physics_row, "request_throughput_rps", "4 GPU(s) serving a 7.06e+10-parameter model")],
    ids=[case[0] for case in HOSTILE_CSV] + ["beyond the 70B bound"],
)
def test_rest_refuses_unphysical_rows_naming_file_row_and_column(
    nim_table: pd.DataFrame,
    client: TestClient,
    database: Database,
    change: Any,
    column: str,
    says: str,
) -> None:
    frame = change(nim_frame(nim_table))
    response = client.put(
        PROFILE_URL.format(name="hostile"), json=import_body([("bad.csv", csv_text(frame))])
    )
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail.startswith(f"bad.csv, row {ROW + 1}, column {column}:"), detail
    assert says in detail and "\n" not in detail
    assert profiles_stored(database) == []
    assert client.get("/v1/gpu-profiles").status_code == 200


def test_the_physics_bound_follows_the_model(
    nim_table: pd.DataFrame,
    client: TestClient,
) -> None:
    """A row beyond the 70B bound is physical for a model of unknown size (bound: 1e8
    parameters: neither the profile's nor the file's model name is known), and refused again
    when the profile gives the 70B parameter count."""
    text = csv_text(_physics_row(nim_frame(nim_table)).drop(columns=["model"]))
    unknown = import_body([("t.csv", text)], model="house-model")
    ok = client.put(PROFILE_URL.format(name="unknown-size"), json=unknown)
    assert ok.status_code == 201, ok.text
    sized = import_body([("t.csv", text)], model="house-model", parameters=70.6e9)
    refused = client.put(PROFILE_URL.format(name="sized"), json=sized)
    assert refused.status_code == 422
    assert "row 5, column request_throughput_rps" in refused.json()["detail"]


def test_unknown_model_has_a_generous_absolute_bound(
    nim_table: pd.DataFrame,
    client: TestClient,
) -> None:
    frame = nim_frame(nim_table)
    # 4 GPUs × 4500e12 / (2 × 1e8) = 9e7 tokens/s; 400 tokens per request: 225,000 requests/s
    frame = frame.drop(columns=["model"])
    frame.loc[ROW, "request_throughput_rps"] = "230000"
    body = import_body([("t.csv", csv_text(frame))], model="house-model")
    response = client.put(PROFILE_URL.format(name="abs"), json=body)
    assert response.status_code == 422
    assert "model of unknown size" in response.json()["detail"]
    frame.loc[ROW, "request_throughput_rps"] = "220000"
    body = import_body([("t.csv", csv_text(frame))], model="house-model")
    # physical (if absurd for this model name, whose size gpucast does not know)
    assert client.put(PROFILE_URL.format(name="abs"), json=body).status_code == 201


JSON_HOSTILE = [
    (
        "vllm subnormal TTFT",
        [vllm_result(2), vllm_result(4, p95_ttft_ms=5e-321)],
        "rate4.json, column ttft_p95_s: ",
    ),
    (
        "vllm rate x 1e300",
        [vllm_result(2), vllm_result(4, request_throughput=1e300)],
        "rate4.json, column request_throughput_rps: ",
    ),
    (
        "vllm subnormal prompt tokens",
        [vllm_result(2), vllm_result(4, total_input_tokens=1e-321)],
        "rate4.json, column prompt_tokens: ",
    ),
]


def _files(documents: list[str]) -> list[tuple[str, str]]:
    return [(f"rate{2 ** (i + 1)}.json", text) for i, text in enumerate(documents)]


@pytest.mark.parametrize(
    ("documents", "says"), [c[1:] for c in JSON_HOSTILE], ids=[c[0] for c in JSON_HOSTILE]
)
def test_rest_and_cli_refuse_unphysical_json_rows(
    client: TestClient,
    database: Database,
    database_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    documents: list[str],
    says: str,
) -> None:
    files = _files(documents)
    body = import_body(files, model="toy-7b", gpus_per_replica=1)
    response = client.put(PROFILE_URL.format(name="j"), json=body)
    assert response.status_code == 422, response.text
    assert response.json()["detail"].startswith(says)
    paths = []
    for name, text in files:
        (tmp_path / name).write_text(text)
        paths.append(str(tmp_path / name))
    code = main(
        ["--database-url", database_url, "profile", "import", *paths, "--name", "j"]
        + ["--gpu-type", "TOY", "--model", "toy-7b", "--gpus-per-replica", "1"]
    )
    error = capsys.readouterr().err
    assert code == 2 and error.count("\n") == 1 and says.split(",")[0] in error, error
    assert profiles_stored(database) == []


def test_genai_perf_subnormal_latency_is_refused(client: TestClient, database: Database) -> None:
    hostile = json.loads(genai_perf_export(4))
    hostile["time_to_first_token"]["p95"] = 5e-321
    files = [("c1.json", genai_perf_export(1)), ("c4.json", json.dumps(hostile))]
    response = client.put(
        PROFILE_URL.format(name="g"), json=import_body(files, model="toy-7b", gpus_per_replica=1)
    )
    assert response.status_code == 422
    assert response.json()["detail"].startswith("c4.json, column ttft_p95_s: ")
    assert profiles_stored(database) == []


@pytest.mark.parametrize(
    "content",
    [
        "[" * 5000 + "]" * 5000,
        '{"a":' * 3000 + "1" + "}" * 3000,
        vllm_result(4)[:-1] + ', "extra": ' + "[" * 100_000 + "]" * 100_000 + "}",
    ],
    ids=["arrays", "objects", "inside a vllm result"],
)
def test_deep_json_inside_a_file_content_is_a_4xx(
    client: TestClient,
    database: Database,
    database_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: str,
) -> None:
    files = [("rate2.json", vllm_result(2)), ("deep.json", content)]
    response = client.put(
        PROFILE_URL.format(name="deep"), json=import_body(files, gpus_per_replica=1)
    )
    assert response.status_code == 422, response.text
    assert response.json()["detail"].startswith("'deep.json': the JSON nests ")
    path = tmp_path / "deep.json"
    path.write_text(content)
    (tmp_path / "rate2.json").write_text(vllm_result(2))
    code = main(
        ["--database-url", database_url, "profile", "import", str(tmp_path / "rate2.json")]
        + [str(path), "--name", "deep", "--gpu-type", "TOY", "--model", "toy-7b"]
        + ["--gpus-per-replica", "1"]
    )
    error = capsys.readouterr().err
    assert code == 2 and error.count("\n") == 1 and "nests" in error, error
    assert profiles_stored(database) == []


def test_more_rows_than_the_cap_are_refused_on_every_path(
    client: TestClient,
    database: Database,
    database_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = "isl,osl,concurrency\n" + "100,100,1\n" * 100_001
    response = client.put(
        PROFILE_URL.format(name="big"), json=import_body([("big.csv", text)], gpus_per_replica=1)
    )
    assert response.status_code == 422
    assert response.json()["detail"].startswith("big.csv: 100,001 rows; at most 100,000")
    path = tmp_path / "big.csv"
    path.write_text(text)
    code = main(
        ["--database-url", database_url, "profile", "import", str(path), "--name", "big"]
        + ["--gpu-type", "TOY", "--model", "toy-7b", "--gpus-per-replica", "1"]
    )
    error = capsys.readouterr().err
    assert code == 2 and error.count("\n") == 1 and "100,001 rows; at most 100,000" in error
    assert profiles_stored(database) == []
