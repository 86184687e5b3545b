"""A load file with empty cells (load the autoscaler could not see) replays as the ScaledObject
runs it: failed reads, then the fallback; those minutes unscored, and the replay says so."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from app.cli import main
from tests.app.test_plan_surfaces import FAST, SERIES, _create_profile, history_rows


@pytest.fixture()
def db_args(tmp_path: Path) -> list[str]:
    return ["--database-url", f"sqlite:///{tmp_path / 'gaps.db'}"]


def _load_lines(rows: list[dict[str, object]], gap: tuple[pd.Timestamp, pd.Timestamp]) -> str:
    """The stored history as a 10-minute requests_per_s file, empty cells inside ``gap``."""
    lines = ["timestamp,requests_per_s"]
    for row in rows:
        hour = pd.Timestamp(row["timestamp"])
        for minute in range(0, 60, 10):
            stamp = hour + pd.Timedelta(minutes=minute)
            value = "" if gap[0] <= stamp < gap[1] else f"{float(row['requests']) / 3600:.6f}"
            lines.append(f"{stamp.isoformat()},{value}")
    return "\n".join(lines) + "\n"


def _backtest(db_args, tmp_path, capsys, content: str) -> tuple[int, str, str]:
    load = tmp_path / "load.csv"
    load.write_text(content)
    capsys.readouterr()
    args = [*db_args, "backtest", SERIES, "--profile", "l4-small", "--days", "2"]
    code = main([*args, "--models", FAST, "--load", str(load), "--json"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture()
def stored(db_args: list[str], tmp_path: Path) -> list[dict[str, object]]:
    rows = history_rows(pd.Timestamp("2026-11-20T00:00Z"))
    hourly = tmp_path / "hourly.csv"
    pd.DataFrame(rows).to_csv(hourly, index=False)
    assert main([*db_args, "ingest", "hourly", str(hourly), "--series", SERIES]) == 0
    _create_profile(db_args)
    return rows


def test_an_unobserved_stretch_is_unscored_and_said(
    db_args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], stored
) -> None:
    gap = (pd.Timestamp("2026-11-19T02:00Z"), pd.Timestamp("2026-11-19T04:00Z"))
    code, out, err = _backtest(db_args, tmp_path, capsys, _load_lines(stored, gap))
    assert code == 0, err
    body = json.loads(out)
    assert body["unobserved_share"] == pytest.approx(2 / 48)
    assert any("not observed" in note and "fallback" in note for note in body["notes"])
    # the same file observed throughout: nothing unobserved, no note
    code, out, err = _backtest(db_args, tmp_path, capsys, _load_lines(stored, (gap[0], gap[0])))
    assert code == 0, err
    full = json.loads(out)
    assert full["unobserved_share"] == 0.0
    assert not any("not observed" in note for note in full["notes"])


@pytest.mark.parametrize(
    ("cells", "message"),
    [
        (["", ""], "every requests_per_s cell is empty: no load was observed"),
        (["1", "nan"], "row 3: requests_per_s 'nan' must be a finite number >= 0"),
    ],
)
def test_a_load_file_of_gaps_only_or_with_a_nan_word_is_refused_in_one_line(
    db_args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], stored, cells, message
) -> None:
    content = "timestamp,requests_per_s\n" + "".join(
        f"2026-11-19T00:{minute:02d}Z,{cell}\n" for minute, cell in enumerate(cells)
    )
    code, _, err = _backtest(db_args, tmp_path, capsys, content)
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1


def test_each_night_falls_back_to_its_expected_p99_peak_never_below_its_floor() -> None:
    from app.plans.replay.daily import nightly_fallbacks

    at = pd.Timestamp("2026-11-19T02:00Z")
    floor = [4] * 10 + [10] * 4 + [4] * 10
    ratios = {"p50": 1.5, "p90": 2.0, "p99": 3.1, "total": 1.6, "hours": 96, "base": "floor"}
    measured = {"at": at, "gpus": floor, "calibration": {"fleet_ratios": ratios}}
    unmeasured = {"at": at + pd.Timedelta(days=1), "gpus": floor, "calibration": None}
    pairs = nightly_fallbacks([measured, unmeasured], gpus_per_replica=2, max_gpus=None)
    # 10 GPUs x 3.1 = 31 GPUs at the P99 peak: 16 replicas of 2; unmeasured: the floor's 5
    assert pairs == ((at, 16), (at + pd.Timedelta(days=1), 5))
    capped = nightly_fallbacks([measured], gpus_per_replica=2, max_gpus=24)
    assert capped == ((at, 12),)
    assert nightly_fallbacks([], gpus_per_replica=1, max_gpus=None) is None


def test_the_fallback_behaviors_offered_are_the_ones_the_replay_and_the_object_know() -> None:
    import typing

    import capacity
    from app.api.routes.capacity import FallbackBehaviorParam
    from app.common.options import FALLBACK_BEHAVIORS

    assert ("auto", *capacity.FALLBACK_BEHAVIORS) == FALLBACK_BEHAVIORS
    assert typing.get_args(typing.get_args(FallbackBehaviorParam)[0]) == FALLBACK_BEHAVIORS


def test_auto_holds_the_fleet_beside_a_reactive_trigger_and_is_static_without() -> None:
    from app.common.options import resolved_fallback_behavior

    assert resolved_fallback_behavior("auto", reactive=True) == "currentReplicas"
    assert resolved_fallback_behavior("auto", reactive=False) == "static"
    for explicit in ("static", "currentReplicas", "currentReplicasIfHigher"):
        assert resolved_fallback_behavior(explicit, reactive=True) == explicit
        assert resolved_fallback_behavior(explicit, reactive=False) == explicit


def test_the_backtest_runs_and_says_the_fallback_behavior_it_was_asked(
    db_args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], stored
) -> None:
    gap = (pd.Timestamp("2026-11-19T02:00Z"), pd.Timestamp("2026-11-19T04:00Z"))
    load = tmp_path / "load.csv"
    load.write_text(_load_lines(stored, gap))
    args = [*db_args, "backtest", SERIES, "--profile", "l4-small", "--days", "2"]
    args += ["--models", FAST, "--load", str(load), "--json"]
    runs = {}
    for behavior in ("static", "currentReplicas", "auto"):
        capsys.readouterr()
        assert main([*args, "--fallback-behavior", behavior]) == 0
        runs[behavior] = json.loads(capsys.readouterr().out)
    assert runs["static"]["fallback_behavior"] == "static"
    # auto beside the reactive trigger the replay runs by default: currentReplicas
    assert runs["auto"]["fallback_behavior"] == runs["currentReplicas"]["fallback_behavior"]
    assert runs["auto"]["fallback_behavior"] == "currentReplicas"
    assert runs["auto"]["policies"] == runs["currentReplicas"]["policies"]
    runs.pop("auto")
    notes = {b: " ".join(r["notes"]) for b, r in runs.items()}
    assert "expected P99 peak" in notes["static"]
    assert "fallback.behavior currentReplicas" in notes["currentReplicas"]
    gpu_hours = {b: r["policies"][0]["gpu_hours"] for b, r in runs.items()}
    # a two-hour gap: the static fallback scales out to the night's P99 peak, the other holds
    assert gpu_hours["currentReplicas"] < gpu_hours["static"]
    capsys.readouterr()
    with pytest.raises(SystemExit) as refused:
        main([*args, "--fallback-behavior", "sometimes"])
    assert refused.value.code == 2
    assert "invalid choice: 'sometimes'" in capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.parametrize("behavior", ["static", "currentReplicasIfHigher"])
def test_the_tradeoff_row_at_the_default_target_runs_as_the_gpucast_row_across_a_gap(
    db_args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], stored, behavior
) -> None:
    """Each trade-off row is the deployment at that risk target, so at the default target
    (1 %) it must replay as the gpucast row does, its nights' fallbacks included."""
    gap = (pd.Timestamp("2026-11-19T02:00Z"), pd.Timestamp("2026-11-19T04:00Z"))
    load = tmp_path / "load.csv"
    load.write_text(_load_lines(stored, gap))
    args = [*db_args, "backtest", SERIES, "--profile", "l4-small", "--days", "2"]
    args += ["--models", FAST, "--load", str(load), "--json", "--tradeoff"]
    capsys.readouterr()
    assert main([*args, "--fallback-behavior", behavior]) == 0
    body = json.loads(capsys.readouterr().out)
    gpucast = body["policies"][0]
    assert gpucast["policy"] == "gpucast"
    at_default = {row["max_over_capacity"]: row for row in body["tradeoff"]}[0.01]
    assert at_default["bands"] == [night["label"] for night in body["gpucast_plans"]]
    for kpi in ("gpu_hours", "cost_usd", "time_over_capacity_share"):
        assert at_default[kpi] == pytest.approx(gpucast[kpi], rel=1e-12), kpi


def test_a_load_observed_only_at_its_ends_replays_and_says_so(
    db_args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], stored
) -> None:
    """Two observed cells, everything between them lost: the static peak reads the stored
    hours where no load was observed before a night, and the replay runs (no NaN sizing)."""
    lines = _load_lines(stored, (pd.Timestamp("2000-01-01T00:00Z"),) * 2).splitlines()
    header, cells = lines[0], lines[1:]
    kept = [cells[0], *(c.split(",")[0] + "," for c in cells[1:-1]), cells[-1]]
    code, out, err = _backtest(db_args, tmp_path, capsys, "\n".join([header, *kept]) + "\n")
    assert code == 0, err
    body = json.loads(out)
    assert body["unobserved_share"] > 0.9
    static = next(p for p in body["policies"] if p["policy"] == "static-peak")
    assert static["gpu_hours"] > 0
