"""guidellm, inference-perf and genai-bench results imported as GPU profiles through REST and
the CLI, and the setup the files state (GPU count, model) held against the caller's: a
disagreement is refused naming both values, with nothing stored; an absent replica size is
the files'. The files are tests/capacity/loadtest_files (made-up numbers, the tools' schemas).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import capacity as cap
from app.cli import main
from app.db import Database, repository
from app.profiles.loadtests import stored_table
from tests.capacity.loadtest_fixtures import vllm_result
from tests.capacity.test_loadtest_tools import (
    DEEP_YAML,
    GUIDELLM_SWEEP,
    GUIDELLM_YAML,
    genai_bench_files,
    inference_perf_stages,
)

PROFILE_URL = "/v1/gpu-profiles/{name}/loadtest"
TOOL_FILES = {
    "guidellm-json": ([GUIDELLM_SWEEP], "llama-3.1-8b", 1),
    "guidellm-yaml": ([GUIDELLM_YAML], "llama-3.1-8b", 1),
    "inference-perf": (inference_perf_stages(), "llama-3.1-8b", 1),
    "genai-bench": (genai_bench_files(), "llama-3.1-70b", 4),
}


def body(paths: list[Path], **fields: Any) -> dict[str, Any]:
    return {
        "gpu_type": "H100-SXM",
        "model": "llama-3.1-8b",
        "files": [{"name": p.name, "content": p.read_text()} for p in paths],
        **fields,
    }


def stored(database: Database) -> list[str]:
    with database.transaction() as session:
        return [p.name for p in repository.list_gpu_profiles(session)]


@pytest.mark.parametrize("tool", TOOL_FILES)
def test_rest_import_reads_back_the_files_numbers(tool: str, client: TestClient) -> None:
    paths, model, gpus = TOOL_FILES[tool]
    expected = cap.read_loadtest_files([(p.name, p.read_text()) for p in paths])
    response = client.put(
        PROFILE_URL.format(name="p"), json=body(paths, model=model, gpus_per_replica=gpus)
    )
    assert response.status_code == 201, response.text
    assert response.json()["gpus_per_replica"] == gpus
    table = client.get(PROFILE_URL.format(name="p")).json()
    assert table["source_format"] == expected.source_format
    assert table["records"] == expected.to_records() and len(table["records"]) == 3
    assert table["tensor_parallel"] == expected.tensor_parallel
    assert table["model"] == expected.model


def test_without_gpus_per_replica_the_files_gpu_count_is_taken(client: TestClient) -> None:
    paths = genai_bench_files()
    response = client.put(PROFILE_URL.format(name="sg"), json=body(paths, model="llama-3.1-70b"))
    assert response.status_code == 201, response.text
    assert response.json()["gpus_per_replica"] == 4
    unstated = client.put(PROFILE_URL.format(name="gl"), json=body([GUIDELLM_SWEEP]))
    assert unstated.status_code == 422
    assert "gpus_per_replica is required" in unstated.json()["detail"]


def test_without_a_model_the_files_model_is_taken(client: TestClient) -> None:
    paths = genai_bench_files()
    response = client.put(PROFILE_URL.format(name="sg"), json=body(paths) | {"model": None})
    assert response.status_code == 201, response.text
    assert response.json()["model"] == "meta-llama/Llama-3.1-70B-Instruct"
    unnamed = {**body(inference_perf_stages(), gpus_per_replica=1), "model": None}
    refused = client.put(PROFILE_URL.format(name="ip"), json=unnamed)
    assert refused.status_code == 422
    assert "model is required" in refused.json()["detail"]


def test_rest_refuses_a_setup_the_files_contradict(client: TestClient, database: Database) -> None:
    paths = genai_bench_files()
    wrong_size = client.put(
        PROFILE_URL.format(name="sg"), json=body(paths, model="llama-3.1-70b", gpus_per_replica=8)
    )
    assert wrong_size.status_code == 422
    detail = wrong_size.json()["detail"]
    assert "tensor-parallel degree 4" in detail and "gpus_per_replica is 8" in detail
    wrong_model = client.put(PROFILE_URL.format(name="sg"), json=body(paths, model="llama-3-8b"))
    assert wrong_model.status_code == 422
    detail = wrong_model.json()["detail"]
    assert "Llama-3.1-70B-Instruct" in detail and "'llama-3-8b'" in detail
    wrong_tp = client.put(
        PROFILE_URL.format(name="sg"),
        json=body(paths, model="llama-3.1-70b", tensor_parallel=2),
    )
    assert wrong_tp.status_code == 422
    assert "tensor-parallel degree 4 but tensor-parallel degree 2" in wrong_tp.json()["detail"]
    assert stored(database) == []


def test_rest_refuses_a_model_the_inference_perf_config_contradicts(
    client: TestClient, database: Database
) -> None:
    paths = [*inference_perf_stages(), GUIDELLM_SWEEP.parent / "inference_perf" / "config.yaml"]
    refused = client.put(
        PROFILE_URL.format(name="ip"), json=body(paths, model="llama-3-70b", gpus_per_replica=1)
    )
    assert refused.status_code == 422
    assert "measured model 'meta-llama/Llama-3.1-8B-Instruct'" in refused.json()["detail"]
    assert stored(database) == []
    taken = client.put(PROFILE_URL.format(name="ip"), json=body(paths, gpus_per_replica=1))
    assert taken.status_code == 201, taken.text
    assert taken.json()["loadtest"]["model"] == "meta-llama/Llama-3.1-8B-Instruct"


def _cli(database_url: str, paths: list[str], *flags: str) -> int:
    return main(
        [
            "--database-url",
            database_url,
            "profile",
            "import",
            *paths,
            "--name",
            "cli",
            "--gpu-type",
            "H100",
            *flags,
        ]
    )


@pytest.mark.parametrize("tool", TOOL_FILES)
def test_cli_import_reads_back_the_files_numbers(
    tool: str, database: Database, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    paths, model, _ = TOOL_FILES[tool]
    gpus = [] if tool == "genai-bench" else ["--gpus-per-replica", "1"]
    code = _cli(database_url, [str(p) for p in paths], "--model", model, *gpus)
    assert code == 0, capsys.readouterr().err
    assert "GPU profile cli imported" in capsys.readouterr().out
    argv = ["--database-url", database_url, "profile", "show", "cli", "--json"]
    assert main(argv) == 0
    shown = json.loads(capsys.readouterr().out)
    expected = cap.read_loadtest_files([(p.name, p.read_text()) for p in paths])
    assert shown["loadtest"]["source_format"] == expected.source_format
    assert shown["loadtest"]["rows"] == len(expected.frame)
    assert shown["gpus_per_replica"] == (4 if tool == "genai-bench" else 1)
    with database.transaction() as session:
        profile = repository.get_gpu_profile(session, name="cli")
        row = stored_table(session, profile_id=profile.id)
        assert row is not None and row.records == expected.to_records()


def test_cli_takes_model_and_replica_size_from_the_files(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _cli(database_url, [str(p) for p in genai_bench_files()]) == 0
    out = capsys.readouterr().out
    assert "meta-llama/Llama-3.1-70B-Instruct" in out
    argv = ["--database-url", database_url, "profile", "show", "cli", "--json"]
    assert main(argv) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["model"], shown["gpus_per_replica"]) == ("meta-llama/Llama-3.1-70B-Instruct", 4)
    stages = [str(p) for p in inference_perf_stages()]
    assert _cli(database_url, stages, "--gpus-per-replica", "1") == 2
    assert "model is required" in capsys.readouterr().err
    create = ["--database-url", database_url, "profile", "create", "--name", "c", "--gpu-type"]
    with pytest.raises(SystemExit) as usage:
        main([*create, "H100", "--tokens-per-s-per-gpu", "100"])
    assert usage.value.code == 2
    assert "--model" in capsys.readouterr().err


def test_cli_refuses_vllm_files_of_another_gpu_count(
    database: Database, database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = []
    for rate in (1, 2, 4):
        paths.append(tmp_path / f"rate{rate}.json")
        paths[-1].write_text(vllm_result(rate, gpu_count="1"))
    code = _cli(database_url, list(map(str, paths)), "--model", "m", "--gpus-per-replica", "4")
    error = capsys.readouterr().err
    assert code == 2 and error.count("\n") == 1
    assert "tensor-parallel degree 1" in error and "gpus_per_replica is 4" in error
    assert stored(database) == []
    assert _cli(database_url, list(map(str, paths)), "--model", "m") == 0
    assert "gpus per replica" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--model", "llama-3-8b"], "measured model 'meta-llama/Llama-3.1-70B-Instruct'"),
        (["--model", "llama-3.1-70b", "--gpus-per-replica", "2"], "gpus_per_replica is 2"),
        (["--model", "llama-3.1-70b", "--tp", "8"], "tensor-parallel degree 8 was selected"),
    ],
)
def test_cli_refuses_genai_bench_flags_the_files_contradict(
    database: Database,
    database_url: str,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    says: str,
) -> None:
    code = _cli(database_url, [str(p) for p in genai_bench_files()], *flags)
    error = capsys.readouterr().err
    assert code == 2 and error.count("\n") == 1 and says in error, error
    assert stored(database) == []


def test_rest_refuses_a_deeply_nested_yaml_report(client: TestClient, database: Database) -> None:
    files = [{"name": "r.yaml", "content": "benchmarks: " + "[" * 5000}]
    response = client.put(PROFILE_URL.format(name="deep"), json=body([], files=files))
    assert response.status_code == 422
    assert re.match(DEEP_YAML, response.json()["detail"])
    assert stored(database) == []


def test_cli_refuses_a_malformed_report_in_one_line(
    database: Database, database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = json.loads(GUIDELLM_SWEEP.read_text())
    report["benchmarks"] = []
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps(report))
    code = _cli(database_url, [str(path)], "--model", "m", "--gpus-per-replica", "1")
    error = capsys.readouterr().err
    assert code == 2 and error.count("\n") == 1 and "no benchmarks in the report" in error
    assert stored(database) == []
