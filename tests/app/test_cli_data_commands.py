"""The demo keeps to its own database unless told otherwise, and the CLI covers the series and
events operations of the REST API (show, delete; list, add, delete)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main

CSV = "timestamp,requests\n2026-11-01T00:00:00Z,100\n2026-11-01T01:00:00Z,120\n"


def test_the_demo_writes_its_own_database_not_the_default(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (home / "mine.csv").write_text(CSV)
    assert main(["ingest", "hourly", str(home / "mine.csv"), "--series", "prod/chat"]) == 0
    assert main(["demo", "--no-serve", "--no-forecast"]) == 0
    out = capsys.readouterr().out
    demo_db = home / ".local" / "share" / "gpucast" / "demo.db"
    assert demo_db.exists()
    assert f"--database-url sqlite:///{demo_db} series list" in out
    assert main(["series", "list"]) == 0
    listed = capsys.readouterr().out
    assert "prod/chat" in listed and "demo/" not in listed


def test_the_demo_uses_the_named_database(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    named = f"sqlite:///{home / 'named.db'}"
    assert main(["--database-url", named, "demo", "--no-serve", "--no-forecast"]) == 0
    capsys.readouterr()
    assert main(["--database-url", named, "series", "list"]) == 0
    assert "demo/servegen-m-small" in capsys.readouterr().out
    assert not (home / ".local" / "share" / "gpucast" / "demo.db").exists()


def test_series_show_and_delete(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = ["--database-url", f"sqlite:///{tmp_path / 'g.db'}"]
    (tmp_path / "h.csv").write_text(CSV)
    assert main([*db, "ingest", "hourly", str(tmp_path / "h.csv"), "--series", "prod/chat"]) == 0
    capsys.readouterr()
    assert main([*db, "series", "show", "prod/chat", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["name"], shown["observations"]) == ("prod/chat", 2)
    assert main([*db, "series", "delete", "prod/chat"]) == 0
    capsys.readouterr()
    assert main([*db, "series", "show", "prod/chat"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert main([*db, "series", "delete", "prod/chat"]) == 2


def test_events_add_list_delete(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = ["--database-url", f"sqlite:///{tmp_path / 'g.db'}"]
    window = ["--start", "2026-11-27T00:00Z", "--end", "2026-11-28T00:00Z"]
    assert main([*db, "events", "add", "black friday", *window, "--multiplier", "2.5"]) == 0
    assert "event 1 added" in capsys.readouterr().out
    assert main([*db, "events", "list", "--json"]) == 0
    (event,) = json.loads(capsys.readouterr().out)
    assert (event["name"], event["multiplier"], event["series"]) == ("black friday", 2.5, None)
    assert main([*db, "events", "list"]) == 0
    assert "black friday" in capsys.readouterr().out
    assert main([*db, "events", "delete", "1"]) == 0
    assert main([*db, "events", "delete", "1"]) == 2


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--start", "2026-11-28T00:00Z", "--end", "2026-11-27T00:00Z"], "end must be after"),
        (["--start", "tomorrow", "--end", "2026-11-27T00:00Z"], "--start"),
        (
            ["--start", "2026-11-27T00:00Z", "--end", "2026-11-28T00:00Z", "--multiplier", "0"],
            "--multiplier",
        ),
        (
            ["--start", "2026-11-27T00:00Z", "--end", "2026-11-28T00:00Z", "--series", "nope"],
            "nope",
        ),
    ],
)
def test_a_bad_event_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    db = ["--database-url", f"sqlite:///{tmp_path / 'g.db'}"]
    assert main([*db, "events", "add", "promo", *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
