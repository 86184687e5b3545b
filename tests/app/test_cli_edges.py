"""What a new user trips over first: a pipe closed early, options after the command, a port
already taken, the demo and the user's own database, a --load file too short, help that says
what the code does, and counted nouns."""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import insert, text

from app.cli import EXIT_BROKEN_PIPE, global_options_first, main
from app.db import open_database
from app.db.models import Series
from app.settings import normalize_database_url
from tests.app.conftest import POSTGRES_URL
from tests.capacity.loadtest_fixtures import synthetic_csv, synthetic_rows

ROOT = Path(__file__).resolve().parents[2]
DEMO = "demo/servegen-m-small"
DEMO_PROFILE = "demo-small-h100"


@pytest.fixture
def db(tmp_path: Path) -> list[str]:
    return ["--database-url", f"sqlite:///{tmp_path / 'cli.db'}"]


def gpucast(*args: str, reader_gone: bool = False, env: dict | None = None) -> tuple[int, str]:
    """Run the CLI in a process of its own; with ``reader_gone`` its output's reader closes
    the pipe before anything is written (``| head -1`` once it has its line)."""
    command = [sys.executable, "-m", "app.cli", *args]
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    assert process.stdout is not None and process.stderr is not None
    if not reader_gone:
        _, err_bytes = process.communicate(timeout=120)
        return process.returncode, err_bytes.decode()
    process.stdout.close()
    with process.stderr:
        err = process.stderr.read().decode()
    return process.wait(timeout=120), err


# -- a reader that stops early ----------------------------------------------------------------


def test_a_reader_that_stops_early_ends_quietly(db: list[str], tmp_path: Path) -> None:
    """``gpucast series list | head -1`` and ``gpucast profile capacity … | head -2``."""
    database = open_database(db[1])
    database.upgrade()
    with database.transaction() as session:
        session.execute(
            insert(Series), [{"name": f"svc-{i:05d}", "labels": {}} for i in range(3000)]
        )
    database.dispose()
    csv = tmp_path / "toy.csv"
    csv.write_text(synthetic_csv())
    importing = ["profile", "import", str(csv), "--name", "toy", "--gpu-type", "TOY"]
    assert main([*db, *importing, "--model", "toy-7b", "--gpus-per-replica", "2"]) == 0
    capacity = ["profile", "capacity", "toy", "--prompt-tokens", "500"]
    slo = ["--completion-tokens", "100", "--ttft-p95-s", "1", "--tpot-p95-s", "0.05"]
    for command in (["series", "list"], [*capacity, *slo]):
        code, err = gpucast(*db, *command, reader_gone=True)
        assert (code, err) == (EXIT_BROKEN_PIPE, ""), (command, err)
        code, err = gpucast(*db, *command)  # read to the end: the whole output, exit 0
        assert (code, err) == (0, ""), err


# -- global options after the command ---------------------------------------------------------


def test_global_options_follow_the_command_too(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{home / 'named.db'}"
    assert main(["demo", "--no-serve", "--no-forecast", "--database-url", url]) == 0
    capsys.readouterr()
    assert main(["series", "list", f"--database-url={url}", "-v"]) == 0
    assert DEMO in capsys.readouterr().out
    assert main(["series", "show", DEMO, "--json", "--database-url", url]) == 0
    assert not (home / ".local" / "share" / "gpucast" / "demo.db").exists()


def test_moving_global_options_keeps_everything_else() -> None:
    assert global_options_first(["series", "list", "--database-url", "x", "-v"]) == [
        "--database-url",
        "x",
        "-v",
        "series",
        "list",
    ]
    unchanged = ["ingest", "hourly", "f.csv", "--series", "s", "--", "--database-url", "y"]
    assert global_options_first(unchanged) == unchanged
    assert global_options_first(["--database-url", "x", "plan", "s"]) == [
        "--database-url",
        "x",
        "plan",
        "s",
    ]
    assert global_options_first(["--help"]) == ["--help"]


# -- a port already taken ---------------------------------------------------------------------


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.mark.parametrize("command", [["serve"], ["demo", "--no-forecast"]])
def test_a_taken_port_is_said_at_once_with_the_option_that_changes_it(
    home: Path, taken_port: int, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*command, "--port", str(taken_port)]) == 1
    captured = capsys.readouterr()
    assert captured.err == (
        f"gpucast: error: port {taken_port} on 127.0.0.1 is already in use (another gpucast or "
        f"server?); choose another with --port, e.g. gpucast {command[0]} --port "
        f"{taken_port + 1}\n"
    )
    assert "gpucast API on" not in captured.out
    # the demo checks before it loads anything
    assert not (home / ".local" / "share" / "gpucast" / "demo.db").exists()


def test_an_unknown_host_is_bad_input(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--host", "no-such-host.invalid", "--port", "8000"]) == 2
    assert capsys.readouterr().err.startswith("gpucast: error: --host 'no-such-host.invalid'")


# -- the demo and the user's own database -----------------------------------------------------


def test_an_exported_database_url_never_receives_the_demo(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = f"sqlite:///{home / 'mine.db'}"
    monkeypatch.setenv("GPUCAST_DATABASE_URL", mine)
    (home / "mine.csv").write_text("timestamp,requests\n2026-11-01T00:00:00Z,100\n")
    assert main(["ingest", "hourly", "mine.csv", "--series", "prod/chat"]) == 0
    capsys.readouterr()
    assert main(["demo", "--no-serve", "--no-forecast"]) == 0
    out = capsys.readouterr().out
    demo_db = home / ".local" / "share" / "gpucast" / "demo.db"
    assert f"GPUCAST_DATABASE_URL is set: the demo leaves {mine} alone" in out
    assert f"(look at it with: gpucast --database-url sqlite:///{demo_db} series list)" in out
    assert main(["series", "list"]) == 0  # the exported database: the user's series only
    listed = capsys.readouterr().out
    assert "prod/chat" in listed and DEMO not in listed


@pytest.mark.skipif(not POSTGRES_URL, reason="needs GPUCAST_TEST_POSTGRES_URL (CI sets it)")
def test_the_demo_on_postgresql_prints_a_command_that_runs_without_showing_the_password(
    home: Path, postgres_migrated: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from sqlalchemy.engine import make_url

    url = make_url(normalize_database_url(str(POSTGRES_URL))).set(password="s3cr3t-pw")
    given = url.render_as_string(hide_password=False)
    try:
        assert main(["--database-url", given, "demo", "--no-serve", "--no-forecast"]) == 0
        out = capsys.readouterr().out
        assert "s3cr3t-pw" not in out and "***" not in out.split("database:", 1)[1]
        [command] = re.findall(r"\(look at it with: (gpucast .*)\)", out)
        assert "export PGPASSWORD=" in out
        args = shlex.split(command)[1:]
        assert main(args) == 0  # as pasted (this server trusts the test user)
        assert DEMO in capsys.readouterr().out
    finally:
        database = open_database(postgres_migrated)
        with database.engine.begin() as connection:
            from tests.app.conftest import TABLES

            connection.execute(text(f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY CASCADE"))
        database.dispose()


# -- a --load file too short for the replay ---------------------------------------------------


def load_file(path: Path, start: pd.Timestamp, end: pd.Timestamp) -> Path:
    stamps = pd.date_range(start.floor("min"), end, freq="1min", inclusive="left")
    wave = 40_000 + 20_000 * np.sin(np.arange(len(stamps)) / 300)
    frame = pd.DataFrame({"timestamp": stamps.strftime("%Y-%m-%dT%H:%M:%SZ"), "tokens_per_s": wave})
    frame.to_csv(path, index=False)
    return path


def test_a_load_file_too_short_says_what_it_must_cover(
    db: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*db, "demo", "--no-serve", "--no-forecast"]) == 0
    end = pd.Timestamp.now(tz="UTC").floor("h")
    short = load_file(tmp_path / "load_1min.csv", end - pd.Timedelta(days=9), end)
    capsys.readouterr()
    replay = [*db, "backtest", DEMO, "--profile", DEMO_PROFILE, "--days", "7"]
    fast = ["--models", "seasonal_naive"]
    assert main([*replay, "--load", str(short), *fast]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    needed = re.search(r"needs load from (\S+ \S+Z)", err)
    covers = re.search(r"give a file that covers (\S+ \S+Z) \.\. (\S+ \S+Z)", err)
    assert needed and covers and needed[1] == covers[1], err
    assert "up to 7 days before them" in err
    # a file from exactly there on is enough
    start = pd.Timestamp(needed[1].replace("Z", "+00:00"))
    enough = load_file(tmp_path / "enough.csv", start, end)
    assert main([*replay, "--load", str(enough), *fast]) == 0, capsys.readouterr().err


# -- help that says what the code does --------------------------------------------------------


def test_required_slo_options_are_shown_as_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["profile", "capacity", "--help"])
    shown = capsys.readouterr().out
    usage = shown.split("\n\n")[0]
    assert "--ttft-p95-s S --tpot-p95-s S" in usage and "[--ttft-p95-s" not in usage
    required = shown.split("the SLO (required):")[1]
    assert "--ttft-p95-s S" in required and "--tpot-p95-s S" in required
    assert main(["profile", "capacity", "toy", "--prompt-tokens", "1", "--completion-tokens", "1"])
    assert "an SLO is needed: give --ttft-p95-s and --tpot-p95-s" in capsys.readouterr().err


def test_profile_show_prints_the_load_test_table(
    db: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = tmp_path / "toy.csv"
    csv.write_text(synthetic_csv())
    args = ["--gpu-type", "TOY", "--model", "toy-7b", "--gpus-per-replica", "2"]
    assert main([*db, "profile", "import", str(csv), "--name", "toy", *args]) == 0
    capsys.readouterr()
    assert main([*db, "profile", "show", "toy"]) == 0
    out = capsys.readouterr().out
    assert "measured rows (10 rows; latencies in seconds):" in out
    header = next(line for line in out.splitlines() if "CONCURRENCY" in line)
    assert header.split() == [
        *("PROMPT", "COMPLETION", "CONCURRENCY", "REQ/S"),
        *("TTFT", "P95", "TTFT", "MEAN", "TPOT", "P95", "TPOT", "MEAN"),
    ]
    rows = [line.split() for line in out.splitlines()[-10:]]
    assert [(r[0], r[1], r[2]) for r in rows] == [
        (f"{p}", f"{c}", f"{n}") for p, c in ((500, 100), (500, 500)) for n in (1, 2, 4, 8, 16)
    ]


def test_capacity_text_says_each_thing_once(
    db: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = tmp_path / "toy.csv"
    csv.write_text(synthetic_csv(synthetic_rows(tp=1)))
    args = ["--gpu-type", "TOY", "--model", "toy-7b", "--gpus-per-replica", "1"]
    assert main([*db, "profile", "import", str(csv), "--name", "toy", *args]) == 0
    capsys.readouterr()
    for mix in (["500", "100"], ["800", "300"]):  # measured, and the fitted model
        query = ["--prompt-tokens", mix[0], "--completion-tokens", mix[1]]
        slo = ["--ttft-p95-s", "100", "--tpot-p95-s", "10"]  # holds at every measured load
        assert main([*db, "profile", "capacity", "toy", *query, *slo]) == 0
        out = capsys.readouterr().out
        assert out.count("at least this") == 1, out
        assert out.count("highest measured load") == 1, out
        assert "(1 GPU)" in out and "(1 GPUs)" not in out
        assert not re.search(r"\b(\w+): \1\b", out), out  # "extrapolated: extrapolated"


# -- counted nouns ----------------------------------------------------------------------------

ONE_PLURAL = re.compile(r"(?<![\d.,])1 (GPUs|mixes|members|nodes|rows|hours|days|gaps|replicas)\b")


def test_one_of_anything_is_singular(
    db: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A profile of 1 GPU per replica, a table of 1 mix, a pool of 1 member, a plan of 1 GPU,
    an ingest with 1 gap of 1 hour: what the commands print says so."""
    one_mix = synthetic_csv(synthetic_rows(mixes=((500, 100),), tp=1))
    (tmp_path / "one.csv").write_text(one_mix)
    args = ["--gpu-type", "TOY", "--model", "toy-7b", "--gpus-per-replica", "1"]
    printed = []
    assert main([*db, "profile", "import", str(tmp_path / "one.csv"), "--name", "toy", *args]) == 0
    assert main([*db, "profile", "show", "toy"]) == 0
    capacity = ["--prompt-tokens", "500", "--completion-tokens", "100"]
    slo = ["--ttft-p95-s", "1", "--tpot-p95-s", "0.05"]
    assert main([*db, "profile", "capacity", "toy", *capacity, *slo]) == 0
    hours = pd.date_range("2026-10-01", periods=10 * 24, freq="h", tz="UTC")
    history = pd.DataFrame(
        {"timestamp": hours.strftime("%Y-%m-%dT%H:%M:%SZ"), "requests": 10, "tokens": 1000}
    ).drop(index=[30])  # one missing hour
    history.to_csv(tmp_path / "h.csv", index=False)
    assert main([*db, "ingest", "hourly", str(tmp_path / "h.csv"), "--series", "tiny"]) == 0
    assert main([*db, "forecast", "tiny", "--models", "seasonal_naive"]) == 0
    plan = ["plan", "tiny", "--profile", "toy", "--band", "hi_80", "--max-gpus", "1"]
    assert main([*db, *plan]) == 0
    member = ["--member", "tiny:toy", "--node-price", "10", "--gpus-per-node", "1"]
    assert main([*db, "pool", "create", "solo", *member, "--quota", "1"]) == 0
    assert main([*db, "pool", "plan", "solo"]) == 0
    printed.append(capsys.readouterr().out)
    output = "\n".join(printed)
    assert "1 missing hour in 1 gap" in output
    assert "(1 GPU)" in output and "1 mix" in output and "1 member," in output
    assert ONE_PLURAL.findall(output) == [], ONE_PLURAL.findall(output)


def test_a_forecast_of_a_few_hours_prints_no_warnings(db: list[str], tmp_path: Path) -> None:
    """A first try with a tiny file: the table, no numpy warnings on stderr."""
    (tmp_path / "tiny.csv").write_text(
        "timestamp,requests\n2026-11-30T00:00:00Z,10\n2026-11-30T01:00:00Z,12\n"
    )
    assert main([*db, "ingest", "hourly", str(tmp_path / "tiny.csv"), "--series", "tiny"]) == 0
    code, err = gpucast(*db, "forecast", "tiny", "--models", "seasonal_naive")
    assert (code, err) == (0, "")


@pytest.mark.parametrize("command", [["series", "list"], ["serve", "--port", "0"]])
def test_a_database_url_naming_a_file_that_is_no_database_is_bad_input(
    tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped --database-url pointing at a CSV: one line, exit 2, and nothing served."""
    not_a_database = tmp_path / "hours.csv"
    not_a_database.write_text("timestamp,requests\n" + "2026-11-30T00:00:00Z,10\n" * 200)
    url = f"sqlite:///{not_a_database}"
    assert main(["--database-url", url, *command]) == 2
    captured = capsys.readouterr()
    assert captured.err == (
        "gpucast: error: --database-url names a file that is not a SQLite database "
        "(file is not a database)\n"
    )
    assert "gpucast API on" not in captured.out
    assert not_a_database.read_text().startswith("timestamp,requests\n")  # left as it was


def test_serve_against_an_unreachable_database_says_so_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = "postgresql://gpucast@127.0.0.1:1/gpucast"  # port 1: nothing listens
    assert main(["--database-url", url, "serve", "--port", "0"]) == 3
    captured = capsys.readouterr()
    assert captured.err.startswith("gpucast: error: database unavailable: ")
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert "gpucast API on" not in captured.out
