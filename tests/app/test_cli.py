"""The gpucast command line: exit codes, one-line errors, the real traces, the demo."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import main
from tests.conformance import goyaml
from tests.conformance.kube_validation import problems


@pytest.fixture
def db_args(tmp_path: Path) -> list[str]:
    return ["--database-url", f"sqlite:///{tmp_path / 'cli.db'}"]


def test_db_upgrade(db_args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*db_args, "db", "upgrade"]) == 0
    # the newest migration file's revision (the numbered files are the migration history)
    versions = Path(__file__).resolve().parents[2] / "migrations" / "versions"
    newest = sorted(versions.glob("0*.py"))[-1].name.split("_")[0]
    assert f"database at revision {newest}\n" == capsys.readouterr().out


def test_ingest_hourly_then_list(
    db_args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "load.csv"
    path.write_text(
        "timestamp,requests,tokens\n2026-11-30T00:00:00Z,10,100\n2026-11-30T02:00:00Z,20,200\n"
    )
    assert main([*db_args, "ingest", "hourly", str(path), "--series", "prod/chat"]) == 0
    out = capsys.readouterr().out
    assert "wrote 2 hourly rows for 1 series" in out and "1 missing hour in 1 gap" in out
    assert main([*db_args, "series", "list"]) == 0
    listing = capsys.readouterr().out
    assert "prod/chat" in listing and "2026-11-30 02:00" in listing


def test_bad_file_exits_2_with_one_line(
    db_args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("timestamp,requests\n2026-11-30T00:15:00Z,10\n")
    assert main([*db_args, "ingest", "hourly", str(path), "--series", "s"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("gpucast: error: row 1 (line 2), column 'timestamp'")


def test_missing_file_exits_2(db_args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*db_args, "ingest", "hourly", "nope.csv", "--series", "s"]) == 2
    assert capsys.readouterr().err == "gpucast: error: file not found: nope.csv\n"


# Mars/Olympus is in no database; the others are files of the tz database that ZoneInfo reads
# but pandas (pytz) does not: each would fail later, half-way through a command
@pytest.mark.parametrize("zone", ["Mars/Olympus", "posix/Europe/Berlin", "right/UTC", "Factory"])
def test_unknown_timezone_exits_2(
    db_args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], zone: str
) -> None:
    path = tmp_path / "ok.csv"
    path.write_text("timestamp,requests\n2026-11-30T00:00:00,10\n")
    assert main([*db_args, "ingest", "hourly", str(path), "--series", "s", "--timezone", zone]) == 2
    err = capsys.readouterr().err
    assert f"unknown time zone '{zone}'" in err and err.count("\n") == 1, err
    assert main([*db_args, "series", "list"]) == 0
    assert capsys.readouterr().out.lower().startswith("no series yet")  # nothing written


def test_ingest_real_request_logs(
    db_args: list[str], shared_data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    azure = shared_data / "azure_llm_2023_conv_1h.csv"
    assert main([*db_args, "ingest", "requests", str(azure), "--series", "azure/conv"]) == 0
    assert "azure/conv: 2 hours 2023-11-16 18:00Z .. 2023-11-16 19:00Z" in capsys.readouterr().out
    mooncake = shared_data / "mooncake_fast25_conversation_1h.csv"
    assert (
        main(
            [
                *db_args,
                "ingest",
                "requests",
                str(mooncake),
                "--series",
                "kimi/chat",
                "--origin",
                "2026-11-30T10:00:00Z",
            ]
        )
        == 0
    )
    assert "kimi/chat: 1 hour 2026-11-30 10:00Z" in capsys.readouterr().out
    assert main([*db_args, "ingest", "requests", str(mooncake), "--series", "kimi/chat"]) == 2
    assert "pass --origin" in capsys.readouterr().err


def test_unreachable_database_exits_3(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "ok.csv"
    path.write_text("timestamp,requests\n2026-11-30T00:00:00Z,10\n")
    code = main(
        [
            "--database-url",
            "postgresql://nobody@127.0.0.1:1/none",
            "ingest",
            "hourly",
            str(path),
            "--series",
            "s",
        ]
    )
    assert code == 3
    assert capsys.readouterr().err.startswith("gpucast: error: database unavailable")


def test_demo_without_serving(db_args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*db_args, "demo", "--no-serve", "--no-forecast"]) == 0
    out = capsys.readouterr().out
    assert "demo/servegen-m-small: 336 hours" in out
    assert "ServeGen m-small, Apache-2.0" in out


def test_console_script_entry_point(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.cli",
            "--database-url",
            f"sqlite:///{tmp_path / 'x.db'}",
            "series",
            "list",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "no series yet" in result.stdout


def test_demo_forecasts_and_plans(db_args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*db_args, "demo", "--no-serve"]) == 0
    out = capsys.readouterr().out
    assert "2 forecasts in" in out and "0 failed" in out
    assert "GPU plan for demo/servegen-m-small" in out
    table_rows = [line for line in out.splitlines() if line.startswith("  20")]
    assert len(table_rows) == 24
    # the executed schedule never dips for a single hour: every drop lasts at least two hours
    gpus = [int(row.split()[5]) for row in table_rows]
    for i in range(1, len(gpus) - 1):
        assert not (gpus[i] < gpus[i - 1] and gpus[i + 1] > gpus[i]), gpus
    assert "peak factor = busiest-moment rate (peak_rps)" in out
    assert "executed" in out and "GPU-hours" in out
    assert "against a static fleet of" in out and "priced the same way" in out
    assert "last 7 days replayed: gpucast" in out and "static peak" in out
    assert (
        main(
            [
                *db_args,
                "plan",
                "demo/servegen-m-small",
                "--profile",
                "demo-small-h100",
                "--band",
                "hi_95",
            ]
        )
        == 0
    )
    assert "sized for hi_95" in capsys.readouterr().out
    assert main([*db_args, "plan", "demo/servegen-m-small", "--profile", "nope"]) == 2
    assert "GPU profile 'nope' not found" in capsys.readouterr().err
    kubernetes = [*db_args, "plan", "demo/servegen-m-small", "--profile", "demo-small-h100"]
    assert main([*kubernetes, "--kubernetes", "--hpa-tolerance", "none"]) == 0
    scaled = goyaml.load(capsys.readouterr().out)
    assert (
        problems(scaled) == [] and scaled["metadata"]["name"] == "demo-servegen-m-small-7f6cc9b242"
    )
    assert (
        "tolerance"
        not in scaled["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleUp"]
    )
    assert main([*kubernetes, "--hpa-tolerance", "none", "--json"]) == 0
    planned = json.loads(capsys.readouterr().out)  # the same plan: its expected fleet
    expected_peak = -(-planned["expected_fleet"]["peak_gpus_p99"] // planned["gpus_per_replica"])
    assert scaled["spec"]["fallback"]["replicas"] == max(planned["peak_replicas"], expected_peak)
    assert main([*kubernetes, "--kubernetes", "--hpa-tolerance", "5"]) == 2
    assert "hpa_tolerance must be a number in [0, 1]" in capsys.readouterr().err


def test_forecast_command_exit_codes(
    db_args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*db_args, "forecast"]) == 2
    assert "name at least one series, or pass --all" in capsys.readouterr().err
    assert main([*db_args, "forecast", "ghost"]) == 2
    assert "series 'ghost' not found" in capsys.readouterr().err
    assert main([*db_args, "schedule", "--cron", "not a cron"]) == 2
    assert "invalid cron expression" in capsys.readouterr().err
    # croniter reads a sixth field as seconds (due every second), wraps a reversed range and
    # fails at its first step on a date that never is: each refused before anything runs
    for cron, message in (
        ("* * * * * *", "invalid cron expression '* * * * * *' (five fields"),
        ("5-1 * * * *", "the range 5-1 runs backwards"),
        ("0 2 31 2 *", "cron expression '0 2 31 2 *' never fires: no such date"),
    ):
        assert main([*db_args, "schedule", "--cron", cron]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    assert main([*db_args, "forecast", "ghost", "--models", ",,"]) == 2
    assert "models names no candidate" in capsys.readouterr().err


def test_invalid_settings_exit_2_with_one_line_naming_the_setting(
    db_args: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "ok.csv"
    path.write_text("timestamp,requests\n2026-11-30T00:00:00Z,10\n")
    commands = [
        ["series", "list"],
        ["db", "upgrade"],
        ["ingest", "hourly", str(path), "--series", "s"],
        ["forecast", "--all"],
        ["demo", "--no-serve", "--no-forecast"],
        ["serve", "--port", "1"],
    ]
    bad = [
        ("GPUCAST_DB_STATEMENT_TIMEOUT_S", "abc", "valid number"),
        ("GPUCAST_DB_JOB_STATEMENT_TIMEOUT_S", "-1", "greater than or equal to 0"),
        ("GPUCAST_DB_CONNECT_TIMEOUT_S", "1", "greater than or equal to 2"),
        ("GPUCAST_DB_TCP_TIMEOUT_S", "2.5", "valid integer"),
        ("GPUCAST_DB_POOL_TIMEOUT_S", "nan", "less than or equal to 300"),
        ("GPUCAST_DB_IDLE_IN_TRANSACTION_TIMEOUT_S", "1e9", "less than or equal to 86400"),
        ("GPUCAST_AUTO_MIGRATE", "maybe", "valid boolean"),
        ("GPUCAST_READ_REQUIRES_KEY", "yes please", "valid boolean"),
        ("GPUCAST_MAX_BODY_BYTES", "0", "greater than 0"),
        ("GPUCAST_READ_CACHE_TTL_S", "p4ssw0rd", "valid number"),
        ("GPUCAST_PORT", "70000", "less than or equal to 65535"),
        ("GPUCAST_DATABASE_URL", "  ", "must not be empty"),
    ]
    for variable, value, reason in bad:
        monkeypatch.setenv(variable, value)
        for command in commands:
            # GPUCAST_DATABASE_URL is read only without --database-url
            args = command if variable == "GPUCAST_DATABASE_URL" else [*db_args, *command]
            assert main(args) == 2, (variable, command)
            err = capsys.readouterr().err
            assert err.startswith(f"gpucast: error: invalid setting {variable}: "), err
            assert reason in err and err.count("\n") == 1 and "Traceback" not in err, err
            assert "p4ssw0rd" not in err  # values are never shown
        monkeypatch.delenv(variable)

    # several at once: each named, still one line
    monkeypatch.setenv("GPUCAST_DB_CONNECT_TIMEOUT_S", "x")
    monkeypatch.setenv("GPUCAST_PORT", "0")
    assert main([*db_args, "series", "list"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("gpucast: error: invalid setting GPUCAST_PORT: input should be greater")
    assert "; invalid setting GPUCAST_DB_CONNECT_TIMEOUT_S: input should be a valid integer" in err
    monkeypatch.delenv("GPUCAST_DB_CONNECT_TIMEOUT_S")
    monkeypatch.delenv("GPUCAST_PORT")

    assert main(["--database-url", " ", "series", "list"]) == 2
    assert capsys.readouterr().err == (
        "gpucast: error: invalid setting --database-url: must not be empty\n"
    )

    # from a .env file, and a .env file that is not UTF-8
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("GPUCAST_DB_STATEMENT_TIMEOUT_S=soon\n")
    assert main([*db_args, "series", "list"]) == 2
    assert capsys.readouterr().err.startswith(
        "gpucast: error: invalid setting GPUCAST_DB_STATEMENT_TIMEOUT_S: input should be a valid"
    )
    (tmp_path / ".env").write_bytes(b"GPUCAST_PORT=\xff\n")
    assert main([*db_args, "series", "list"]) == 2
    assert capsys.readouterr().err == (
        "gpucast: error: invalid settings file .env: byte 13 is not UTF-8; save it as UTF-8\n"
    )
    (tmp_path / ".env").unlink()

    # the console script itself: exit 2, one line on stderr, no traceback
    result = subprocess.run(
        [sys.executable, "-m", "app.cli", *db_args, "series", "list"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "GPUCAST_DB_STATEMENT_TIMEOUT_S": "abc"},
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        "gpucast: error: invalid setting GPUCAST_DB_STATEMENT_TIMEOUT_S: input should be a "
        "valid number, unable to parse string as a number\n"
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--nightly-hour", "24"], "--nightly-hour must be 0..23, got 24"),
        (["--days", "0"], "--days must be 1..90, got 0"),
        (["--max-over-capacity", "0.9"], "--max-over-capacity must be a share in (0, 0.5]"),
    ],
)
def test_backtest_flags_out_of_range_are_named_as_flags(
    db_args: list[str], capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    """The CLI names what the user typed, not the API's field (nightly_hour_utc)."""
    assert main([*db_args, "backtest", "s", "--profile", "p", *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gpucast: error: {message}") and err.count("\n") == 1, err
