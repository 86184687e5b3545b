"""The README as a user reads it: every ``gpucast`` command of its code blocks runs as written,
and its tables name every REST route, every command and every Grafana target there is.

The commands run in their order in a shell, in a folder that holds the files they name, against
a database that holds what they take for granted (the series, forecasts and the one profile the
README never creates). A command that reaches a host of the README's examples
(``prometheus:9090``, ``dask.internal``) meets none here: it must fail as documented, in one
line. ``gpucast serve`` and ``gpucast demo`` serve until stopped: they must answer, then stop.
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
# commands that reach an example host this test has not: the exit code the README documents
# (Prometheus unreachable: 3; no Dask scheduler at that address: 2)
FAILS_AS_DOCUMENTED = {"gpucast ingest prometheus --url http://prometheus:9090": 3}
FAILS_AS_DOCUMENTED |= {"--scheduler tcp://dask.internal:8786": 2}
LONG_RUNNING = ("serve", "demo")  # serve until stopped


def logical_lines(block: str) -> list[str]:
    """A shell block's command lines: newlines inside quotes and after a backslash joined,
    comments left out."""
    lines, current, quote, index = [], [], "", 0
    while index < len(block):
        char = block[index]
        if char == "\\" and not quote and block[index + 1 : index + 2] == "\n":
            index += 2
            continue
        if quote:
            quote = "" if char == quote else quote
        elif char == "#" and (index == 0 or block[index - 1] in " \t\n"):  # a comment
            while index < len(block) and block[index] != "\n":
                index += 1
            continue
        elif char in "'\"":
            quote = char
        elif char == "\n":
            lines.append("".join(current))
            current = []
            index += 1
            continue
        current.append(char)
        index += 1
    return [line for line in [*lines, "".join(current)] if line.strip()]


def readme_commands() -> list[str]:
    """Every ``gpucast`` command line of the README's bash blocks, as written (a ``&&`` chain
    reduced to its gpucast part)."""
    found = []
    for block in re.findall(r"```bash\n(.*?)```", README, re.S):
        for line in logical_lines(block):
            for part in line.split(" && "):
                words = shlex.split(part, comments=True)
                if words and Path(words[0]).name == "gpucast":
                    found.append(part.strip())
    return found


COMMANDS = readme_commands()


def test_the_readme_has_the_commands_a_user_copies() -> None:
    """What the checks below run: the quickstart, each ingest path, the plan, pools, KEDA."""
    assert len(COMMANDS) >= 30
    for expected in ("gpucast demo", "gpucast profile create --name", "gpucast pool plan"):
        assert any(expected in c for c in COMMANDS), expected


# -- the world the commands take for granted --------------------------------------------------

NOW = pd.Timestamp.now(tz="UTC").floor("h")
LLAMA = "prod-us/llama-3.1-70b"


def hourly(days: int, *, level: float, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    hours = pd.date_range(NOW - pd.Timedelta(days=days), NOW, freq="h", inclusive="left")
    shape = 1.0 + 0.5 * np.sin(2 * np.pi * (hours.hour.to_numpy() - 6) / 24)
    requests = np.round(level * shape * rng.lognormal(0, 0.05, len(hours)))
    return pd.DataFrame(
        {
            "hour": hours,
            "requests": requests,
            "prompt_tokens": requests * 400,
            "completion_tokens": requests * 120,
            "total_tokens": requests * 520,
            "peak_rps": requests / 3600 * 1.6,
        }
    )


def write_files(folder: Path) -> None:
    """Every file a README command reads, small and made up, in the format it documents."""
    llama = hourly(18, level=90_000, seed=1)
    stamps = llama["hour"].dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    columns = ["requests", "prompt_tokens", "completion_tokens", "peak_rps"]
    llama[columns].assign(timestamp=stamps)[["timestamp", *columns]].to_csv(
        folder / "load.csv", index=False
    )
    fleet = pd.concat(
        [hourly(3, level=500, seed=s).assign(series=f"prod-eu/svc-{s}") for s in (2, 3)]
    )
    fleet.assign(timestamp=fleet["hour"].dt.strftime("%Y-%m-%dT%H:%M:%SZ"))[
        ["series", "timestamp", "requests"]
    ].to_csv(folder / "fleet.csv", index=False)
    local = pd.date_range("2026-11-10", periods=48, freq="h")  # naive Berlin times, no DST
    pd.DataFrame({"timestamp": local.strftime("%Y-%m-%d %H:%M:%S"), "requests": 100}).to_csv(
        folder / "local.csv", index=False
    )
    moments = pd.Timestamp("2023-11-16 18:00") + pd.to_timedelta(np.arange(0, 7200, 3), unit="s")
    pd.DataFrame(
        {
            "TIMESTAMP": moments.strftime("%Y-%m-%d %H:%M:%S.%f"),
            "ContextTokens": 374,
            "GeneratedTokens": 44,
        }
    ).to_csv(folder / "AzureLLMInferenceTrace_conv.csv", index=False)
    offsets = np.arange(0, 3_600_000, 500)
    pd.DataFrame({"timestamp_ms": offsets, "input_length": 6758, "output_length": 500}).to_csv(
        folder / "conversation_trace.csv", index=False
    )
    unix_ms = int(pd.Timestamp("2026-11-29T00:00Z").value // 10**6) + offsets
    pd.DataFrame({"ts": unix_ms, "in": 900, "out": 200}).to_csv(folder / "log.csv", index=False)
    (folder / "results").mkdir()
    for rate in (1, 2, 4, 8):
        (folder / "results" / f"rate{rate}.json").write_text(vllm_result(rate))
    minutes = pd.date_range(NOW - pd.Timedelta(days=15), NOW, freq="min", inclusive="left")
    wave = 90_000 * 520 / 3600 * (1 + 0.5 * np.sin(2 * np.pi * (minutes.hour - 6) / 24))
    pd.DataFrame(
        {"timestamp": minutes.strftime("%Y-%m-%dT%H:%M:%SZ"), "tokens_per_s": np.round(wave)}
    ).to_csv(folder / "load_1min.csv", index=False)
    ended = pd.date_range(end=NOW.floor("h") - pd.Timedelta(hours=1), periods=3, freq="h")
    pd.DataFrame(
        {
            "hour": ended.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "replicas": 3,
            "requests": 21_600,
            "prompt_tokens": 4_320_000,
            "completion_tokens": 4_320_000,
            "ttft_p95_s": 0.42,
            "tpot_p95_s": 0.028,
        }
    ).to_csv(folder / "hours.csv", index=False)


def vllm_result(rate: int) -> str:
    from tests.capacity.loadtest_fixtures import vllm_result as made_up

    return made_up(rate)


def seed_database(url: str, folder: Path) -> None:
    """What the README takes for granted: the series it plans and pools, with history and a
    forecast each, and the pool member's profile ``h100-8b``."""
    from app import ingest
    from app.db import open_database, repository
    from app.jobs import ForecastOptions, run_forecasts

    database = open_database(url)
    database.upgrade()
    frames = [
        hourly(18, level=90_000, seed=1).assign(series=LLAMA),
        hourly(10, level=20_000, seed=4).assign(series="prod-us/chat"),
        hourly(10, level=5_000, seed=5).assign(series="prod-us/summaries"),
    ]
    with database.transaction() as session:
        ingest.store(session, pd.concat(frames), create_series=True)
        repository.create_gpu_profile(
            session,
            name="h100-8b",
            gpu_type="H100-80G",
            model="llama-3.1-8b",
            tokens_per_s_per_gpu=9000.0,
            gpus_per_replica=1,
            usd_per_hour_on_demand=2.5,
            usd_per_hour_reserved=None,
            usd_per_hour_spot=1.2,
        )
    models = ("seasonal_naive", "seasonal_ma")
    assert not run_forecasts(database, ForecastOptions(models=models, workers=1)).failed
    database.dispose()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    folder = tmp_path_factory.mktemp("readme")
    write_files(folder)
    url = f"sqlite:///{folder / 'gpucast.db'}"
    seed_database(url, folder)
    for place in ("bin", ".venv/bin"):  # `gpucast` and `.venv/bin/gpucast`, as installed
        shim = folder / place / "gpucast"
        shim.parent.mkdir(parents=True, exist_ok=True)
        shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m app.cli "$@"\n')
        shim.chmod(0o755)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("GPUCAST_")},
        "PATH": f"{folder / 'bin'}:{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "HOME": str(folder),
        "GPUCAST_DATABASE_URL": url,
    }
    return folder, env


# -- every command, as written ----------------------------------------------------------------


@pytest.mark.slow
def test_every_readme_command_runs_as_written(world: tuple[Path, dict[str, str]]) -> None:
    folder, env = world
    for command in COMMANDS:
        words = shlex.split(command, comments=True)
        if words[1] in LONG_RUNNING:
            serves(command, folder, env)
            continue
        done = subprocess.run(
            ["bash", "-c", command], cwd=folder, env=env, capture_output=True, text=True
        )
        expected = next((c for part, c in FAILS_AS_DOCUMENTED.items() if part in command), 0)
        assert done.returncode == expected, (command, done.stderr[-2000:])
        if expected:
            assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
        else:
            assert "Traceback" not in done.stderr, (command, done.stderr[-2000:])


def serves(command: str, folder: Path, env: dict[str, str]) -> None:
    """Start a command that serves until stopped; it must answer /healthz, then stop."""
    port = free_port()
    process = subprocess.Popen(
        ["bash", "-c", f"exec {command}"],
        cwd=folder,
        env={**env, "GPUCAST_PORT": str(port)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 900  # the demo forecasts and replays first
        while time.monotonic() < deadline:
            assert process.poll() is None, (command, process.communicate()[1][-2000:])
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(1)
        else:
            pytest.fail(f"{command!r} did not answer on :{port}")
    finally:
        process.terminate()
        out, err = process.communicate(timeout=60)
    assert "gpucast API on http://" in out and "Traceback" not in err, (command, err[-2000:])


# -- the tables name everything there is ------------------------------------------------------


def table_rows(section: str) -> list[list[str]]:
    start = README.index(f"\n## {section}\n")
    end = README.index("\n## ", start + 1)
    rows = []
    for line in README[start:end].splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows


def test_the_rest_table_names_every_route() -> None:
    from app.api import create_app

    def shape(path: str) -> str:
        return re.sub(r"\{[^}]+\}", "{}", path.split("?")[0])

    named = set()
    for row in table_rows("REST API") + table_rows("Charts and overview page"):
        for code in re.findall(r"`([^`]+)`", " ".join(row[1:2])):
            named |= {
                shape(code.replace("[/{name}]", "")),
                shape(code.replace("[/{name}]", "/{x}")),
            }
    routes = create_app().openapi()["paths"]
    missing = [path for path in routes if shape(path) not in named and "/grafana" not in path]
    assert missing == []


def test_the_command_table_names_every_command() -> None:
    from app.cli import build_parser
    from tests.app.test_options_documented import parsers

    table = " ".join(row[0] for row in table_rows("Command line"))
    commands = [path for path, parser in parsers(build_parser()) if path != "gpucast"]
    leaves = [c for c in commands if not any(o.startswith(c + " ") for o in commands)]
    missing = []
    for command in leaves:
        *group, last = command.split()[1:]
        # "series deploy", or one of alternatives: "pool create\|update"
        pattern = rf"\b{re.escape(' '.join(group))} (\S*\\\|)?{re.escape(last)}\b"
        if not re.search(pattern, table):
            missing.append(command)
    assert missing == []
    for flag in ("--compare-profiles", "--name", "--port"):  # what users missed in it
        assert flag in table, flag


def test_the_grafana_table_names_every_target() -> None:
    from app.grafana import TARGETS

    listed = {row[0].strip("`") for row in table_rows("Grafana")}
    assert [name for name in TARGETS if name not in listed] == []


def test_the_table_example_profile_create_names_its_required_options() -> None:
    """``profile create`` without ``--name`` is refused: the README never shows it without."""
    from app.cli import build_parser

    for command in [c for c in COMMANDS if "profile create" in c]:
        build_parser(shlex.split(command)[1:]).parse_args(shlex.split(command)[1:])
    rows = [" ".join(row) for row in table_rows("Command line")]
    [create] = [row for row in rows if "gpucast profile create" in row]
    assert all(flag in create for flag in ("--name", "--gpu-type", "--model", "--tokens-per-s"))
