"""Numbers too large for the arithmetic behind them (10**400, 1e400) are a clear 4xx or a CLI
exit 2 on every surface: Grafana payloads, REST query parameters and bodies, CLI flags."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.cli import build_parser, main

HUGE_INT = "1" + "0" * 400
HUGE_TEXTS = [HUGE_INT, "-" + HUGE_INT, "1e400", "1e309"]
PLAN_KEYS = [
    "min_gpus",
    "max_gpus",
    "safety_factor",
    "utilization_target",
    "cold_start_s",
    "scale_down_hold_s",
    "max_over_capacity",
    "hpa_tolerance",
]
GRAFANA_TARGETS = ["gpus", "cost", "plan_backtest", "plan_status", "pool_nodes"]


def _raw_json(document: dict, raw: str) -> str:
    """``document`` as JSON with the value ``"RAW"`` replaced by the literal ``raw``."""
    return json.dumps(document).replace('"RAW"', raw)


def _grafana(client: TestClient, target: str, key: str, raw_value: str) -> tuple[int, dict]:
    query = {
        "targets": [{"target": target, "payload": {key: "RAW"}}],
        "range": {"from": "2026-11-29T00:00:00Z", "to": "2026-11-30T00:00:00Z"},
    }
    body = _raw_json(query, raw_value)
    response = client.post(
        "/grafana/query", content=body, headers={"content-type": "application/json"}
    )
    return response.status_code, response.json()


@pytest.mark.parametrize("target", GRAFANA_TARGETS)
def test_grafana_payload_numbers_too_large_are_400(client: TestClient, target: str) -> None:
    keys = [*PLAN_KEYS, "hours", "days"]
    for key in keys:
        for text in HUGE_TEXTS:
            for raw in (text if text.lstrip("-").isdigit() else json.dumps(text), json.dumps(text)):
                status, body = _grafana(client, target, key, raw)
                assert status < 500, (target, key, raw[:20], body)
                if key in PLAN_KEYS and target in ("gpus", "cost"):
                    assert status == 400, (key, raw[:20], body)
                    assert f"payload.{key}" in body["detail"]


def _numeric_query_operations(client: TestClient) -> Iterator[tuple[str, str, str]]:
    schema = client.get("/openapi.json").json()
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                types = json.dumps(parameter.get("schema", {}))
                if parameter["in"] == "query" and ('"integer"' in types or '"number"' in types):
                    yield method.upper(), path, parameter["name"]


def test_every_numeric_query_parameter_refuses_huge_values(client: TestClient) -> None:
    assert client.post("/v1/series", json={"name": "svc"}).status_code == 201
    checked = 0
    for method, path, name in _numeric_query_operations(client):
        url = path.replace("{name}", "svc").replace("{event_id}", "1")
        for text in HUGE_TEXTS:
            response = client.request(method, url, params={name: text})
            assert response.status_code < 500, (method, path, name, response.text)
            checked += 1
    assert checked > 40


def test_body_numbers_too_large_are_422(client: TestClient) -> None:
    profile = _raw_json(
        {"name": "p", "gpu_type": "A100", "model": "m", "tokens_per_s_per_gpu": "RAW"}, HUGE_INT
    )
    response = client.post(
        "/v1/gpu-profiles", content=profile, headers={"content-type": "application/json"}
    )
    assert response.status_code == 422, response.text
    event = {"name": "e", "start": "2026-12-01T00:00:00Z", "end": "2026-12-01T06:00:00Z"}
    body = _raw_json({**event, "multiplier": "RAW"}, HUGE_INT)
    response = client.post("/v1/events", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text


def _numeric_flags(parser: argparse.ArgumentParser, prefix: list[str]) -> Iterator[list[str]]:
    """Every option that takes a number, with the command words and dummy positionals before
    it."""
    positionals = [
        "x"
        for action in parser._actions
        if not action.option_strings
        and not isinstance(action, argparse._SubParsersAction)
        and action.nargs not in ("?", "*")
    ]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for word, child in action.choices.items():
                yield from _numeric_flags(child, [*prefix, word])
        elif action.option_strings and (
            action.type in (float, int)
            or getattr(action.type, "__name__", "") in ("finite_float", "whole_number")
        ):
            yield [*prefix, *positionals, action.option_strings[0]]


def test_every_numeric_cli_flag_refuses_huge_values(capsys: pytest.CaptureFixture[str]) -> None:
    flags = list(_numeric_flags(build_parser(), []))
    assert len(flags) > 20
    for words in flags:
        for text in HUGE_TEXTS:
            with pytest.raises(SystemExit) as exited:
                build_parser().parse_args([*words, text])
            assert exited.value.code == 2, words
            assert "between" in capsys.readouterr().err, words


def test_cli_number_text_flags_refuse_huge_values(
    capsys: pytest.CaptureFixture[str], settings: object
) -> None:
    url = settings.database_url  # type: ignore[attr-defined]
    code = main(
        [
            "--database-url",
            url,
            "profile",
            "create",
            "--name",
            "p",
            "--gpu-type",
            "A100",
            "--model",
            "m",
            "--tokens-per-s-per-gpu",
            HUGE_INT,
        ]
    )
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and ("between" in err or "finite" in err), err
