"""GPU profiles imported from load tests (CLI and REST) and their SLO capacity at any mix.

Real tables are read from the shared data directory (never copied into the package): slices
of the NIM Llama-3-70B / H100 table and the vLLM result files behind the H100-PCIe table. The
small vLLM and genai-perf JSON files are made up here (tests/capacity/loadtest_fixtures.py).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from fastapi.testclient import TestClient

import capacity as cap
from app.cli import main
from app.db import Database, repository
from tests.capacity.loadtest_fixtures import (
    NIM_70B_H100,
    genai_perf_export,
    synthetic_csv,
    vllm_result,
)

PROFILE_URL = "/v1/gpu-profiles/{name}/loadtest"
SLO = {"ttft_p95_s": 1.0, "tpot_p95_s": 0.03}


@pytest.fixture(scope="module")
def nim_table(loadtests: Path) -> pd.DataFrame:
    """The real NIM Llama-3-70B H100 table, as text cells (skips when the data is absent)."""
    return pd.read_csv(loadtests / NIM_70B_H100, dtype=str, keep_default_na=False)


def nim_frame(table: pd.DataFrame, tp: int = 4, precision: str = "fp8") -> pd.DataFrame:
    """One setup of the NIM table, as a new frame the caller may change."""
    return table[(table["tp"] == str(tp)) & (table["precision"] == precision)].reset_index(
        drop=True
    )


def csv_text(frame: pd.DataFrame) -> str:
    buffer = io.StringIO()
    frame.to_csv(buffer, index=False)
    return buffer.getvalue()


def import_body(files: list[tuple[str, str]], **extra: Any) -> dict[str, Any]:
    return {
        "gpu_type": "H100-SXM",
        "model": "llama-3-70b",
        "gpus_per_replica": 4,
        "usd_per_hour_on_demand": 4.5,
        "files": [{"name": name, "content": text} for name, text in files],
        **extra,
    }


def profiles_stored(database: Database) -> list[str]:
    with database.transaction() as session:
        return [p.name for p in repository.list_gpu_profiles(session)]


# -- REST ------------------------------------------------------------------------------------


def test_rest_import_reads_back_the_table_and_replaces_it(
    nim_table: pd.DataFrame, client: TestClient
) -> None:
    text = csv_text(nim_frame(nim_table))
    response = client.put(PROFILE_URL.format(name="h100-70b"), json=import_body([("t.csv", text)]))
    assert response.status_code == 201, response.text
    created = response.json()
    expected = cap.read_loadtest_csv(text, file_name="t.csv")
    assert created["loadtest"]["rows"] == len(expected.frame) == 60
    assert created["loadtest"]["tensor_parallel"] == 4
    assert created["loadtest"]["precision"] == "fp8"
    assert [tuple(m.values()) for m in created["loadtest"]["mixes"]] == expected.mixes()
    # one figure for plans without an SLO: the median over mixes of the saturation tokens/s
    frame = expected.frame
    tokens = frame.request_throughput_rps * (frame.prompt_tokens + frame.completion_tokens)
    per_mix = tokens.groupby([frame.prompt_tokens, frame.completion_tokens]).max()
    assert created["tokens_per_s_per_gpu"] == pytest.approx(per_mix.median() / 4)

    table = client.get(PROFILE_URL.format(name="h100-70b"))
    assert table.status_code == 200
    assert table.json()["records"] == expected.to_records()
    assert table.json()["sources"] == ["t.csv"]

    fewer = csv_text(nim_frame(nim_table)[lambda f: f["isl"] == "200"])
    again = client.put(PROFILE_URL.format(name="h100-70b"), json=import_body([("u.csv", fewer)]))
    assert again.status_code == 200
    assert again.json()["loadtest"]["rows"] == 30
    assert client.get("/v1/gpu-profiles/h100-70b").json()["usd_per_hour_on_demand"] == 4.5


def test_rest_csv_with_several_setups_needs_one_selected(
    loadtests: Path, client: TestClient
) -> None:
    whole = (loadtests / NIM_70B_H100).read_text()
    url = PROFILE_URL.format(name="h100-70b")
    refused = client.put(url, json=import_body([(NIM_70B_H100, whole)]))
    assert refused.status_code == 422
    detail = refused.json()["detail"]
    assert "tensor-parallel degrees 4, 8" in detail and "precisions fp16, fp8" in detail
    assert "select one with tensor_parallel and precision" in detail
    chosen = client.put(
        url,
        json=import_body(
            [(NIM_70B_H100, whole)], tensor_parallel=8, precision="fp16", gpus_per_replica=8
        ),
    )
    assert chosen.status_code == 201, chosen.text
    assert chosen.json()["loadtest"]["tensor_parallel"] == 8
    missing = client.put(url, json=import_body([(NIM_70B_H100, whole)], tensor_parallel=2))
    assert missing.status_code == 422
    assert "the file holds TP4 fp16, TP4 fp8, TP8 fp16, TP8 fp8" in missing.json()["detail"]


def test_slo_capacity_at_a_measured_mix_is_the_measured_knee(
    nim_table: pd.DataFrame, client: TestClient
) -> None:
    text = csv_text(nim_frame(nim_table))
    client.put(PROFILE_URL.format(name="h100-70b"), json=import_body([("t.csv", text)]))
    table = cap.read_loadtest_csv(text, file_name="t.csv")
    for prompt, completion in table.mixes():
        knee = cap.measured_knee(table, prompt_tokens=prompt, completion_tokens=completion, **SLO)
        assert knee is not None
        got = client.get(
            "/v1/gpu-profiles/h100-70b/slo-capacity",
            params={"prompt_tokens": prompt, "completion_tokens": completion, **SLO},
        ).json()
        assert got["method"] == "measured"
        assert got["requests_per_s_per_replica"] == pytest.approx(knee.requests_per_s)
        assert got["binding"] == knee.binding
        assert got["tokens_per_s_per_gpu"] == pytest.approx(
            knee.requests_per_s * (prompt + completion) / 4
        )


def test_slo_capacity_says_how_it_was_obtained_and_refuses_unservable_mixes(
    nim_table: pd.DataFrame,
    client: TestClient,
) -> None:
    client.put(
        PROFILE_URL.format(name="h100-70b"),
        json=import_body([("t", csv_text(nim_frame(nim_table)))]),
    )
    url = "/v1/gpu-profiles/h100-70b/slo-capacity"

    def ask(prompt: float, completion: float, **slo: float) -> Any:
        return client.get(
            url, params={"prompt_tokens": prompt, "completion_tokens": completion, **(slo or SLO)}
        )

    inside = ask(1000, 500)
    assert inside.status_code == 200 and inside.json()["method"] == "interpolated"
    assert inside.json()["binding"] in ("ttft", "tpot")
    outside = ask(4000, 3000)
    assert outside.json()["method"] == "extrapolated"
    decode_heavy, prefill_heavy = ask(200, 2000).json(), ask(2000, 200).json()
    assert decode_heavy["requests_per_s_per_replica"] > 0
    assert prefill_heavy["binding"] == "ttft"
    assert prefill_heavy["sensitivity"]["limit"] == "ttft"
    assert not prefill_heavy["sensitivity"]["flat"]
    assert "flat stretch" not in prefill_heavy["note"]
    near_idle_tpot = ask(200, 2000, ttft_p95_s=2.0, tpot_p95_s=0.0185).json()
    assert near_idle_tpot["binding"] == "tpot" and near_idle_tpot["sensitivity"]["flat"]
    assert "the p95 TPOT limit sits on a flat stretch" in near_idle_tpot["note"]
    refused = ask(7000, 1000, ttft_p95_s=0.2, tpot_p95_s=0.03)
    assert refused.status_code == 422
    assert (
        "p95 TTFT is" in refused.json()["detail"]
        and "above the 0.2 s limit" in refused.json()["detail"]
    )
    beyond_context = ask(30000, 500)
    assert beyond_context.status_code == 422
    assert "exceed the model's context length of 8,192 tokens" in beyond_context.json()["detail"]
    for odd in (5e-324, 0.5):
        tiny = ask(odd, 100)
        assert tiny.status_code == 422 and "prompt_tokens" in str(tiny.json()["detail"]), tiny.text
    too_tight = ask(200, 200, ttft_p95_s=5.0, tpot_p95_s=0.001)
    assert too_tight.status_code == 422 and "p95 TPOT" in too_tight.json()["detail"]


def test_slo_capacity_needs_a_load_test_profile(client: TestClient) -> None:
    client.post(
        "/v1/gpu-profiles",
        json={"name": "plain", "gpu_type": "L4", "model": "m", "tokens_per_s_per_gpu": 900.0},
    )
    params = {"prompt_tokens": 100, "completion_tokens": 100, **SLO}
    plain = client.get("/v1/gpu-profiles/plain/slo-capacity", params=params)
    assert plain.status_code == 404 and "no load-test table" in plain.json()["detail"]
    assert client.get(PROFILE_URL.format(name="plain")).status_code == 404
    assert client.get("/v1/gpu-profiles/nope/slo-capacity", params=params).status_code == 404
    bad = client.get("/v1/gpu-profiles/plain/slo-capacity", params={**params, "ttft_p95_s": 0})
    assert bad.status_code == 422


def test_rest_refuses_a_bad_file_and_stores_nothing(
    nim_table: pd.DataFrame, client: TestClient, database: Database
) -> None:
    frame = nim_frame(nim_table)
    frame.loc[4, "ttft_p95_s"] = "NaN"
    response = client.put(
        PROFILE_URL.format(name="h100-70b"), json=import_body([("bad.csv", csv_text(frame))])
    )
    assert response.status_code == 422
    assert response.json()["detail"].startswith("bad.csv, row 5, column ttft_p95_s:")
    assert profiles_stored(database) == []


# -- vLLM and genai-perf JSON -----------------------------------------------------------------


def test_real_vllm_bench_files_import_as_one_table(loadtests: Path, client: TestClient) -> None:
    paths = sorted((loadtests / "vllm-bench-json").glob("*.json"))
    files = [(p.name, p.read_text()) for p in paths]
    body = import_body(files, gpus_per_replica=1, model="llama-3-8b")
    response = client.put(PROFILE_URL.format(name="pcie-8b"), json=body)
    assert response.status_code == 201, response.text
    summary = response.json()["loadtest"]
    assert summary["source_format"] == "vllm-bench-json" and summary["rows"] == len(paths) == 5
    rows = client.get(PROFILE_URL.format(name="pcie-8b")).json()["records"]
    assert [r["request_rate"] for r in rows] == [1.0, 4.0, 8.0, 16.0, 32.0]
    first = json.loads((loadtests / "vllm-bench-json" / paths[1].name).read_text())
    assert first["request_rate"] == 1.0
    assert rows[0]["request_throughput_rps"] == pytest.approx(first["request_throughput"])
    assert rows[0]["ttft_p99_s"] == pytest.approx(first["p99_ttft_ms"] / 1000)


def test_cli_imports_vllm_and_genai_perf_files(
    database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = ["--database-url", database_url]
    vllm = []
    for rate in (1, 2, 4, 8):
        path = tmp_path / f"rate{rate}.json"
        path.write_text(vllm_result(rate))
        vllm.append(str(path))
    args = ["--gpu-type", "TOY", "--model", "toy-7b", "--gpus-per-replica", "1"]
    assert main([*db, "profile", "import", *vllm, "--name", "toy-vllm", *args]) == 0
    out = capsys.readouterr().out
    assert "GPU profile toy-vllm imported" in out and "4 rows at 1 mix" in out
    genai = []
    for concurrency in (1, 4, 16):
        path = tmp_path / f"c{concurrency}" / "profile_export_genai_perf.json"
        path.parent.mkdir()
        path.write_text(genai_perf_export(concurrency))
        genai.append(str(path))
    assert main([*db, "profile", "import", *genai, "--name", "toy-genai", *args]) == 0
    capsys.readouterr()
    slo = ["--ttft-p95-s", "0.5", "--tpot-p95-s", "0.02"]
    mix = ["--prompt-tokens", "1000", "--completion-tokens", "250"]
    assert main([*db, "profile", "capacity", "toy-genai", *mix, *slo, "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["method"] == "measured" and answer["binding"] == "ttft"
    assert main([*db, "profile", "capacity", "toy-genai", *mix, *slo]) == 0
    assert "requests/s per replica" in capsys.readouterr().out


def test_cli_import_refuses_an_existing_name_unless_replacing(
    nim_table: pd.DataFrame, database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "nim.csv"
    path.write_text(csv_text(nim_frame(nim_table)))
    command = [
        "--database-url",
        database_url,
        "profile",
        "import",
        str(path),
        "--name",
        "h",
        "--gpu-type",
        "H100",
        "--model",
        "m",
        "--gpus-per-replica",
        "4",
    ]
    assert main(command) == 0
    capsys.readouterr()
    assert main(command) == 2
    assert "already exists; pass --replace" in capsys.readouterr().err
    assert main([*command, "--replace", "--usd-per-hour-spot", "2"]) == 0
    assert "GPU profile h replaced" in capsys.readouterr().out


# -- malformed files: one line naming file (row, column), exit 2, nothing stored -------------


def _cell(row: int, column: str, value: str) -> Any:
    def change(frame: pd.DataFrame) -> pd.DataFrame:
        frame.loc[row, column] = value
        return frame

    return change


def _setup_of(row: int, column: str, value: str) -> Any:
    def change(frame: pd.DataFrame) -> pd.DataFrame:
        frame.loc[row:, column] = value
        return frame

    return change


MALFORMED_CSV = [
    (
        "ms as seconds",
        _cell(2, "ttft_p95_s", "850"),
        "row 3, column ttft_p95_s: 850 s is implausible",
    ),
    ("ms TPOT at the lowest load", _cell(0, "itl_p95_s", "19.1"), "row 1, column tpot_p95_s"),
    (
        "missing column",
        lambda f: f.drop(columns=["request_throughput_rps"]),
        "missing required column(s): request_throughput_rps",
    ),
    (
        "no latency columns",
        lambda f: f.drop(columns=[c for c in f if c.startswith("ttft_")]),
        "missing required column(s): ttft_p95_s",
    ),
    (
        "non-monotone concurrency",
        _cell(3, "concurrency", "1"),
        "row 4, column concurrency: 1 after",
    ),
    (
        "NaN",
        _cell(6, "request_throughput_rps", "nan"),
        "row 7, column request_throughput_rps: 'nan' is not a finite number",
    ),
    (
        "a unit in the cell",
        _cell(1, "ttft_p95_s", "0.06 s"),
        "row 2, column ttft_p95_s: '0.06 s' is not a number",
    ),
    (
        "negative throughput",
        _cell(5, "request_throughput_rps", "-2.5"),
        "row 6, column request_throughput_rps: -2.5 must be > 0",
    ),
    ("one row only", lambda f: f.iloc[:1], "a single load level"),
    ("mixed tensor-parallel degrees", _setup_of(30, "tp", "8"), "tensor-parallel degrees 4, 8"),
    ("mixed precisions", _setup_of(30, "precision", "fp16"), "precisions fp16, fp8"),
    (
        "a mix measured at one load",
        lambda f: f.drop(index=range(1, 11)),
        "mix 200/200 has a single concurrency level",
    ),
    ("missing load", _cell(8, "concurrency", ""), "row 9, column concurrency"),
]


@pytest.mark.parametrize(
    ("change", "says"), [case[1:] for case in MALFORMED_CSV], ids=[c[0] for c in MALFORMED_CSV]
)
def test_cli_refuses_malformed_csv_in_one_line_and_stores_nothing(
    nim_table: pd.DataFrame,
    database: Database,
    database_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    change: Any,
    says: str,
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(csv_text(change(nim_frame(nim_table))))
    code = main(
        [
            "--database-url",
            database_url,
            "profile",
            "import",
            str(path),
            "--name",
            "x",
            "--gpu-type",
            "H100",
            "--model",
            "m",
            "--gpus-per-replica",
            "4",
        ]
    )
    error = capsys.readouterr().err
    assert code == 2, error
    assert error.count("\n") == 1 and str(path) in error and says in error
    assert profiles_stored(database) == []


MALFORMED_OTHER = [
    (
        "infinite rate without max concurrency",
        [vllm_result(2), vllm_result("inf")],
        "rate_inf.json, column request_rate: an infinite rate",
    ),
    ("not JSON", [vllm_result(2), '{"request_throughput": 1,'], "not valid JSON"),
    ("one JSON file", [vllm_result(2)], "a single load level"),
    ("mixed formats", [vllm_result(2), synthetic_csv()], "one format per import"),
    (
        "ms latency as text",
        [vllm_result(2), vllm_result(4, p95_ttft_ms="fast")],
        "column p95_ttft_ms: 'fast' is not a number",
    ),
    ("empty file", [vllm_result(2), ""], "empty file"),
]


@pytest.mark.parametrize(
    ("documents", "says"),
    [case[1:] for case in MALFORMED_OTHER],
    ids=[c[0] for c in MALFORMED_OTHER],
)
def test_cli_refuses_malformed_json_imports(
    database: Database,
    database_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    documents: list[str],
    says: str,
) -> None:
    paths = []
    for i, text in enumerate(documents):
        name = "rate_inf.json" if '"request_rate": "inf"' in text else f"file{i}.json"
        paths.append(tmp_path / name)
        paths[-1].write_text(text)
    code = main(
        [
            "--database-url",
            database_url,
            "profile",
            "import",
            *map(str, paths),
            "--name",
            "x",
            "--gpu-type",
            "T",
            "--model",
            "m",
            "--gpus-per-replica",
            "1",
        ]
    )
    error = capsys.readouterr().err
    assert code == 2, error
    assert error.count("\n") == 1 and says in error
    assert profiles_stored(database) == []


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--gpus-per-replica", "8"], "measured at tensor-parallel degree 4"),
        (["--gpus-per-replica", "4", "--tp", "four"], "--tp must be a whole number"),
        (["--gpus-per-replica", "0"], "--gpus-per-replica"),
        (["--gpus-per-replica", "4", "--usd-per-hour-spot", "-1"], "--usd-per-hour-spot"),
    ],
)
def test_cli_refuses_bad_profile_flags(
    nim_table: pd.DataFrame,
    database: Database,
    database_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    says: str,
) -> None:
    path = tmp_path / "nim.csv"
    path.write_text(csv_text(nim_frame(nim_table)))
    code = main(
        [
            "--database-url",
            database_url,
            "profile",
            "import",
            str(path),
            "--name",
            "x",
            "--gpu-type",
            "H100",
            "--model",
            "m",
            *args,
        ]
    )
    error = capsys.readouterr().err
    assert code == 2 and error.count("\n") == 1 and says in error, error
    assert profiles_stored(database) == []


def test_cli_capacity_refuses_bad_input_in_one_line(
    nim_table: pd.DataFrame, database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "nim.csv"
    path.write_text(csv_text(nim_frame(nim_table)))
    db = ["--database-url", database_url]
    assert (
        main(
            [
                *db,
                "profile",
                "import",
                str(path),
                "--name",
                "h",
                "--gpu-type",
                "H100",
                "--model",
                "m",
                "--gpus-per-replica",
                "4",
            ]
        )
        == 0
    )
    capsys.readouterr()
    mix = ["--prompt-tokens", "7000", "--completion-tokens", "1000"]
    slo = ["--ttft-p95-s", "1", "--tpot-p95-s", "0.03"]
    for args, says in (
        ([*mix, "--ttft-p95-s", "0.2", "--tpot-p95-s", "0.03"], "cannot meet the SLO on this"),
        (
            ["--prompt-tokens", "30000", "--completion-tokens", "500", *slo],
            "exceed the model's context length of 8,192 tokens",
        ),
        (["--prompt-tokens", "5e-324", "--completion-tokens", "5", *slo], "--prompt-tokens must"),
        (["--prompt-tokens", "5", "--completion-tokens", "0.5", *slo], "--completion-tokens must"),
        ([*mix], "an SLO is needed"),
        ([*mix, "--ttft-p95-s", "1"], "--tpot-p95-s is missing"),
        (["--prompt-tokens", "-5", "--completion-tokens", "5", *slo], "--prompt-tokens must be"),
        (["--prompt-tokens", "nan", "--completion-tokens", "5", *slo], "--prompt-tokens must be"),
    ):
        assert main([*db, "profile", "capacity", "h", *args]) == 2
        error = capsys.readouterr().err
        assert error.count("\n") == 1 and says in error, error


@pytest.mark.parametrize(
    ("column", "value", "says"),
    [
        ("model", "llama\x1b[31m", "the model value contains the control character U+001B"),
        ("gpu", "H" * 101, "the gpu_type value is 101 characters long"),
    ],
)
def test_cli_refuses_setup_text_a_database_cannot_keep(
    nim_table: pd.DataFrame,
    database: Database,
    database_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    column: str,
    value: str,
    says: str,
) -> None:
    frame = nim_frame(nim_table)
    frame[column] = value
    path = tmp_path / "t.csv"
    path.write_text(csv_text(frame))
    code = main(
        [
            "--database-url",
            database_url,
            "profile",
            "import",
            str(path),
            "--name",
            "x",
            "--gpu-type",
            "H100",
            "--model",
            "m",
            "--gpus-per-replica",
            "4",
        ]
    )
    error = capsys.readouterr().err
    assert code == 2 and error.count("\n") == 1 and says in error, error
    assert profiles_stored(database) == []


def test_a_load_test_profile_keeps_its_measured_replica_size(
    nim_table: pd.DataFrame, client: TestClient
) -> None:
    client.put(
        PROFILE_URL.format(name="h100-70b"),
        json=import_body([("t", csv_text(nim_frame(nim_table)))]),
    )
    figures = {"gpu_type": "H100", "model": "m", "tokens_per_s_per_gpu": 2000.0}
    refused = client.put("/v1/gpu-profiles/h100-70b", json={**figures, "gpus_per_replica": 8})
    assert refused.status_code == 422
    assert "measured at tensor-parallel degree 4" in refused.json()["detail"]
    assert client.get("/v1/gpu-profiles/h100-70b").json()["gpus_per_replica"] == 4
    kept = client.put("/v1/gpu-profiles/h100-70b", json={**figures, "gpus_per_replica": 4})
    assert kept.status_code == 200 and kept.json()["tokens_per_s_per_gpu"] == 2000.0
    assert client.get(PROFILE_URL.format(name="h100-70b")).json()["rows"] == 60


def test_every_setup_of_every_published_table_imports(loadtests: Path, client: TestClient) -> None:
    """Each CSV in the shared load-test folder, one setup at a time (selected by TP degree and
    precision), stores exactly the rows the library reads."""
    imported = 0
    for path in sorted(loadtests.glob("*.csv")):
        text = path.read_text()
        for table in cap.read_loadtest_csv_setups(text, file_name=path.name):
            name = f"t{imported}"
            body = import_body(
                [(path.name, text)],
                model=table.model or "llama-3-70b",
                gpus_per_replica=table.tensor_parallel,
                tensor_parallel=table.tensor_parallel,
                precision=table.precision,
            )
            response = client.put(PROFILE_URL.format(name=name), json=body)
            assert response.status_code == 201, (path.name, response.text)
            stored = client.get(PROFILE_URL.format(name=name)).json()
            assert stored["records"] == table.to_records(), path.name
            assert stored["latency_statistic"] == table.latency_statistic
            imported += 1
    assert imported >= 20


def test_slo_capacity_follows_a_replaced_table(nim_table: pd.DataFrame, client: TestClient) -> None:
    """Fitted models are cached per stored table: a replaced table is refitted."""
    url = PROFILE_URL.format(name="h100-70b")
    params = {"prompt_tokens": 1000, "completion_tokens": 500, **SLO}
    answers = []
    for precision in ("fp8", "fp16"):
        text = csv_text(nim_frame(nim_table, precision=precision))
        assert client.put(url, json=import_body([("t.csv", text)])).status_code in (200, 201)
        fresh = cap.fit_slo_model(cap.read_loadtest_csv(text, file_name="t.csv")).capacity(
            prompt_tokens=1000, completion_tokens=500, slo=cap.SloTarget(**SLO)
        )
        got = client.get("/v1/gpu-profiles/h100-70b/slo-capacity", params=params).json()
        assert got["method"] == "interpolated"
        assert got["requests_per_s_per_replica"] == pytest.approx(fresh.requests_per_s_per_replica)
        answers.append(got["requests_per_s_per_replica"])
    assert answers[0] != pytest.approx(answers[1], rel=0.02)
