"""A profile's physical ceilings: the model's parameters and context length and the GPU's
peak TFLOPS and bandwidth, known by name or given as profile fields and flags."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from fastapi.testclient import TestClient

from app.cli import main
from tests.app.test_loadtest_profiles import PROFILE_URL, csv_text, import_body, nim_frame
from tests.capacity.loadtest_fixtures import NIM_70B_H100

SLO = {"ttft_p95_s": 2.0, "tpot_p95_s": 0.05}


@pytest.fixture(scope="module")
def nim_csv(loadtests: Path) -> str:
    """The NIM Llama-3-70B H100 table's TP4 fp8 setup as CSV text."""
    table = pd.read_csv(loadtests / NIM_70B_H100, dtype=str, keep_default_na=False)
    return csv_text(nim_frame(table))


def ask(client: TestClient, prompt: float, completion: float) -> Any:
    return client.get(
        "/v1/gpu-profiles/h/slo-capacity",
        params={"prompt_tokens": prompt, "completion_tokens": completion, **SLO},
    )


def test_the_profile_names_give_the_context_length(nim_csv: str, client: TestClient) -> None:
    client.put(PROFILE_URL.format(name="h"), json=import_body([("t.csv", nim_csv)]))
    assert ask(client, 7000, 1000).status_code == 200
    refused = ask(client, 8000, 500)
    assert refused.status_code == 422
    assert (
        "8000 prompt + 500 completion tokens exceed the model's context length of 8,192"
        in (refused.json()["detail"])
    )


def test_profile_fields_override_the_catalog(nim_csv: str, client: TestClient) -> None:
    fields = {"context_length_tokens": 4096, "parameters": 70.6e9, "peak_tflops": 5.0}
    put = client.put(
        PROFILE_URL.format(name="h"),
        json=import_body([("t.csv", nim_csv)], model="my-model", **fields),
    )
    assert put.status_code == 201, put.text
    assert {k: put.json()[k] for k in fields} == fields
    shown = client.get("/v1/gpu-profiles/h").json()
    assert shown["context_length_tokens"] == 4096 and shown["memory_bandwidth_gb_per_s"] is None
    assert "context length of 4,096 tokens" in ask(client, 4000, 200).json()["detail"]
    capped = ask(client, 2000, 200).json()
    # 4 GPUs x 5 TFLOPS / (2 x 70.6e9 parameters) = 141.6 tokens/s
    assert capped["binding"] == "physics"
    assert capped["requests_per_s_per_replica"] == pytest.approx(4 * 5e12 / (2 * 70.6e9) / 2200)
    assert "physical ceiling" in capped["note"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("context_length_tokens", 0),
        ("parameters", -1.0),
        ("peak_tflops", "9"),
        ("parameters", 1e20),
    ],
)
def test_bad_ceiling_fields_are_refused(client: TestClient, field: str, value: Any) -> None:
    body = {"name": "p", "gpu_type": "L4", "model": "m", "tokens_per_s_per_gpu": 9.0, field: value}
    response = client.post("/v1/gpu-profiles", json=body)
    assert response.status_code == 422 and field in response.text


def test_cli_takes_the_ceilings_as_flags(
    nim_csv: str, database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "nim.csv"
    path.write_text(nim_csv)
    db = ["--database-url", database_url]
    profile = ["--name", "h", "--gpu-type", "H100", "--model", "m", "--gpus-per-replica", "4"]
    bad = main([*db, "profile", "import", str(path), *profile, "--context-length", "1.5"])
    assert bad == 2 and "--context-length" in capsys.readouterr().err
    assert main([*db, "profile", "import", str(path), *profile, "--context-length", "4096"]) == 0
    capsys.readouterr()
    mix = ["--prompt-tokens", "4000", "--completion-tokens", "200"]
    slo = ["--ttft-p95-s", "2", "--tpot-p95-s", "0.05"]
    assert main([*db, "profile", "capacity", "h", *mix, *slo]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "context length of 4,096 tokens" in error
    far = ["--prompt-tokens", "122", "--completion-tokens", "15"]
    assert main([*db, "profile", "capacity", "h", *far, *slo]) == 2
    error = capsys.readouterr().err  # one line, naming the flag that asks anyway
    assert error.count("\n") == 1 and error.rstrip().endswith("(--allow-extrapolation)")


def test_answers_carry_their_range_and_basis_and_far_mixes_need_asking(
    nim_csv: str,
    client: TestClient,
) -> None:
    client.put(PROFILE_URL.format(name="h"), json=import_body([("t.csv", nim_csv)]))
    measured = ask(client, 2000, 200).json()
    assert measured["basis"] == "measured"
    assert measured["requests_per_s_per_replica_low"] == measured["requests_per_s_per_replica"]
    inside = ask(client, 1000, 500).json()
    assert inside["basis"] == "interpolated"
    assert (
        inside["requests_per_s_per_replica_low"]
        < inside["requests_per_s_per_replica"]
        < inside["requests_per_s_per_replica_high"]
    )
    far = ask(client, 122, 15)
    assert far.status_code == 422
    assert "beyond the measured range (prompt 200–7000, completion 200–2000" in far.json()["detail"]
    assert far.json()["detail"].endswith("(allow_extrapolation=true)")  # how to ask anyway
    allowed = client.get(
        "/v1/gpu-profiles/h/slo-capacity",
        params={
            "prompt_tokens": 122,
            "completion_tokens": 15,
            "allow_extrapolation": "true",
            **SLO,
        },
    )
    assert allowed.status_code == 200, allowed.text
    assert allowed.json()["basis"] == "extrapolated"
