"""Hourly forecast refresh vs a full refit: CPU per series x metric, wall time, rows stored.

    python bench/refresh_speed.py [--series 1000] [--repeat 3] [--database-url URL] [--all-models]

Generates N synthetic hourly series with bench/nightly.py's generator (same seed; 30 days of
history plus the hours that arrive later, held back), loads the 30 days into a fresh database (a
temporary SQLite file unless ``--database-url`` names an empty one) and runs the nightly job
(``run_forecasts``, requests and tokens, a process pool of ``--workers``): that fit of every
series x metric is the "full refit" side of the comparison. Its default candidates are every
default model but Prophet (seasonal_naive, seasonal_ma, seasonal_ma_weekly, arima, ensemble):
with Prophet the fit of 2,000 items takes well over half an hour on two cores. ``--all-models``
fits with every default candidate; either way a sample of items is also refitted in-process
with every default candidate, Prophet included, to quote the nightly's real per-item cost.

Then, ``--repeat`` times: one new hour is appended to every series (one ingest transaction, as
the hourly import writes it) and ``refresh_forecasts`` conditions every series x metric's
nightly fit on it without refitting and stores a run of kind "refresh" (wall and CPU of this
process; the per-item compute CPU each outcome reports). One more hour is refreshed with the
refresh module's steps timed (latest-run queries, history read, compute, write, commit) to show
where the time goes. Finally the rows and bytes of the forecast tables per run kind, per series
per day at 24 refreshes and one nightly fit, and a check of ``apply_retention``.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # before numpy loads: one BLAS thread (the refresh runs in-process)

import argparse  # noqa: E402
import contextlib  # noqa: E402
import cProfile  # noqa: E402
import logging  # noqa: E402
import pstats  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections import Counter, defaultdict  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from datetime import UTC, datetime, timedelta  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from nightly import load, synthetic_fleet  # noqa: E402  (bench/nightly.py)
from sqlalchemy import func, insert, select, text  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from app import ingest  # noqa: E402
from app.db import Database, open_database  # noqa: E402
from app.db.models import ForecastPoint, ForecastRun  # noqa: E402
from app.jobs import ForecastOptions, run_forecasts, run_item  # noqa: E402
from app.jobs import refresh as refresh_module  # noqa: E402
from app.jobs.nightly import build_items  # noqa: E402
from app.jobs.refresh import RefreshReport, apply_retention, refresh_forecasts  # noqa: E402

BENCH_MODELS = ("seasonal_naive", "seasonal_ma", "seasonal_ma_weekly", "arima", "ensemble")
BUDGET_ITEM_CPU_S = 0.020
BUDGET_WALL_S = 60.0  # for 1,000 series x 2 metrics
RETENTION_DAYS = 15
METRICS = ("requests", "tokens")


def proc_loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def code_version() -> str:
    """The commit measured, and how many files under app/, forecasting/, capacity/ differ."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
        )
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--", "app", "forecasting", "capacity"],
            cwd=root,
            capture_output=True,
            text=True,
        ).stdout.splitlines()
    except OSError:
        head = None
    if head is None or head.returncode != 0:
        return "gpucast outside a git checkout: commit unknown"
    head, where = head.stdout.strip(), "app/ forecasting/ capacity/"
    return f"gpucast at commit {head}, {len(changed)} files changed under {where}"


def stamp() -> str:
    return f"[{datetime.now(UTC):%H:%M:%S}Z]"


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


# -- the nightly fit --------------------------------------------------------------------------


def kind_of(result) -> str:  # result: an ItemResult
    """The winner's model, ensembles with their members (their refresh cost differs)."""
    model = result.model or result.status
    state = result.state or {}
    if state.get("kind") == "ensemble":
        members = "+".join(sorted(m.get("kind", "?") for m in state.get("members", [])))
        return f"ensemble({members})"
    return model


def nightly_fit(database: Database, models: tuple[str, ...] | None, workers: int) -> dict:
    print(f"{stamp()} nightly fit: running, load {proc_loadavg()}", flush=True)
    cpu, children = time.process_time(), children_cpu()
    report = run_forecasts(database, ForecastOptions(models=models, workers=workers))
    parent_cpu = time.process_time() - cpu
    worker_cpu = children_cpu() - children
    items = len(report.results)
    kinds = {(r.series, r.metric): kind_of(r) for r in report.results}
    print(
        f"{stamp()} nightly fit: {items} forecasts in {report.wall_s:.1f}s wall, "
        f"{len(report.failed)} failed, CPU {parent_cpu:.1f}s parent + {worker_cpu:.1f}s workers, "
        f"load {proc_loadavg()}",
        flush=True,
    )
    for r in report.failed:
        print(f"  FAILED {r.series} {r.metric}: {r.error}")
    without_state = [r for r in report.results if r.status == "complete" and not r.state]
    durations = [r.duration_s for r in report.results]
    return {
        "report": report,
        "kinds": kinds,
        "winners": Counter(r.model or r.status for r in report.results),
        "mix": Counter(kinds.values()),
        "cpu_per_item": (parent_cpu + worker_cpu) / max(items, 1),
        "wall_per_item_median": statistics.median(durations) if durations else float("nan"),
        "without_state": len(without_state),
    }


def sample_refits(database: Database, series: list[str], models: tuple[str, ...] | None) -> dict:
    """In-process refits of a sample, CPU per item (this process + children: Prophet's cmdstan)
    with the bench's candidates and with every default candidate."""
    items, _ = build_items(database, ForecastOptions(series=tuple(series), workers=1))
    out: dict[str, list[float]] = {"bench": [], "all": []}
    winners: dict[str, Counter] = {"bench": Counter(), "all": Counter()}
    with threadpool_limits(limits=1):
        run_item(_with_models(items[0], None))  # warm-up: Prophet's import and first compile
        for item in items:
            for name, candidates in (("bench", models), ("all", None)):
                cpu, children = time.process_time(), children_cpu()
                result = run_item(_with_models(item, candidates))
                out[name].append(time.process_time() - cpu + children_cpu() - children)
                winners[name][result.model or result.status] += 1
    return {"cpu": out, "winners": winners, "items": len(items)}


def _with_models(item, models):
    from dataclasses import replace

    return replace(item, models=models)


# -- appending hours and refreshing -------------------------------------------------------------


def append_hour(database: Database, frame: pd.DataFrame) -> float:
    started = time.perf_counter()
    with database.transaction() as session:
        ingest.store(session, frame, create_series=False)
    return time.perf_counter() - started


def backend_cpu(database: Database) -> float | None:
    """CPU seconds of the PostgreSQL backends connected to the bench database (None: SQLite)."""
    if database.engine.dialect.name != "postgresql":
        return None
    with database.engine.connect() as connection:
        pids = connection.execute(
            text("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
        ).scalars()
        total = 0.0
        tick = os.sysconf("SC_CLK_TCK")
        for pid in pids:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def timed_refresh(database: Database, expected: int, kinds: dict) -> dict:
    load_before = proc_loadavg()
    server = backend_cpu(database)
    cpu = time.process_time()
    report = refresh_forecasts(database)
    process_cpu = time.process_time() - cpu
    server_cpu = None if server is None else backend_cpu(database) - server
    problems = check_report(report, expected)
    by_kind: dict[str, list[float]] = defaultdict(list)
    for o in report.refreshed:
        by_kind[kinds.get((o.series, o.metric), "?")].append(o.cpu_s)
    return {
        "report": report,
        "wall": report.wall_s,
        "process_cpu": process_cpu,
        "server_cpu": server_cpu,
        "by_kind": by_kind,
        "item_cpu": [o.cpu_s for o in report.refreshed],
        "problems": problems,
        "load": f"{load_before} -> {proc_loadavg()}",
    }


def check_report(report: RefreshReport, expected: int) -> list[str]:
    problems = [f"{o.series} {o.metric}: {o.error}" for o in report.failed]
    problems += [f"not refreshable: {note}" for note in report.without_state]
    if len(report.refreshed) != expected:
        problems.append(f"{len(report.refreshed)} refreshed, expected {expected}")
    if report.up_to_date:
        problems.append(f"{report.up_to_date} already current, expected 0")
    return problems


STEPS = {
    "_parents": "latest nightly runs + newest trained_until (2 queries, once)",
    "_recent_history": "history read (last 30 days, per series)",
    "event_records": "events read (per series)",
    "_refresh_item": "compute: filter / recompute, quantiles (per item)",
    "save_run": "write run + 24 points (per item)",
}


@contextlib.contextmanager
def instrumented(database: Database) -> Iterator[dict[str, list[float]]]:
    """Wrap the refresh module's steps (and the commits) with wall and CPU timers."""
    spent: dict[str, list[float]] = {name: [0.0, 0.0, 0] for name in [*STEPS, "commit"]}
    originals = {name: getattr(refresh_module, name) for name in STEPS}

    def wrap(name, fn):
        def timed(*args, **kwargs):
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name][0] += time.perf_counter() - wall
                spent[name][1] += time.process_time() - cpu
                spent[name][2] += 1

        return timed

    transaction = database.transaction

    @contextlib.contextmanager
    def timed_transaction():
        with database.sessions() as session:
            try:
                yield session
                wall, cpu = time.perf_counter(), time.process_time()
                session.commit()
                spent["commit"][0] += time.perf_counter() - wall
                spent["commit"][1] += time.process_time() - cpu
                spent["commit"][2] += 1
            except BaseException:
                session.rollback()
                raise

    for name, fn in originals.items():
        setattr(refresh_module, name, wrap(name, fn))
    database.transaction = timed_transaction  # type: ignore[method-assign]
    try:
        yield spent
    finally:
        for name, fn in originals.items():
            setattr(refresh_module, name, fn)
        database.transaction = transaction  # type: ignore[method-assign]


# -- storage -------------------------------------------------------------------------------------


def table_bytes(database: Database) -> dict[str, int]:
    """Bytes of forecast_runs and forecast_points, indexes (and TOAST) included."""
    tables = ("forecast_runs", "forecast_points")
    with database.engine.connect() as connection:
        if database.engine.dialect.name == "sqlite":
            rows = connection.execute(
                text(
                    "SELECT s.tbl_name, SUM(d.pgsize) FROM dbstat d "
                    "JOIN sqlite_schema s ON s.name = d.name GROUP BY s.tbl_name"
                )
            ).all()
            sizes = dict(rows)
            return {t: int(sizes.get(t, 0)) for t in tables}
        return {
            t: int(connection.scalar(text(f"SELECT pg_total_relation_size('{t}')"))) for t in tables
        }


def rows_by_kind(database: Database) -> dict[str, tuple[int, int]]:
    with database.transaction() as session:
        runs = dict(
            session.execute(select(ForecastRun.kind, func.count()).group_by(ForecastRun.kind)).all()
        )
        points = dict(
            session.execute(
                select(ForecastRun.kind, func.count())
                .select_from(ForecastPoint)
                .join(ForecastRun, ForecastRun.id == ForecastPoint.run_id)
                .group_by(ForecastRun.kind)
            ).all()
        )
    return {k: (runs.get(k, 0), points.get(k, 0)) for k in ("nightly", "refresh")}


def at_the_bound(database, args, expected, kinds, later, hour) -> dict:
    """A refresh and the hourly retention with ``--backlog-days`` of refresh runs stored."""
    inserted, took = add_backlog(database, args.backlog_days)
    print(
        f"{stamp()} backlog: {inserted} refresh run rows ({args.backlog_days} days x 24 h x "
        f"{expected} items) stored in {took:.0f}s, load {proc_loadavg()}",
        flush=True,
    )
    append_hour(database, later[later["hour"] == hour])
    with instrumented(database) as spent:
        outcome = timed_refresh(database, expected, kinds)
    started = time.perf_counter()
    retained = apply_retention(database, refresh_days=RETENTION_DAYS)
    outcome["retention_s"] = time.perf_counter() - started
    outcome["retention_deleted"] = retained.refresh_deleted
    outcome["spent"] = spent
    outcome["backlog"] = inserted
    problems = [f"refresh at the bound: {p}" for p in outcome["problems"]]
    due = expected * max(0, (args.backlog_days - RETENTION_DAYS) * 24 + 1)  # k >= 360 h
    if retained.refresh_deleted != due:
        problems.append(
            f"hourly retention at the bound deleted {retained.refresh_deleted}, expected {due}"
        )
    outcome["problems"] = problems
    print(
        f"{stamp()} refresh at the bound: {outcome['wall']:.1f}s wall, CPU "
        f"{outcome['process_cpu']:.1f}s; hourly retention deleted {retained.refresh_deleted} "
        f"runs in {outcome['retention_s']:.1f}s, load {outcome['load']}",
        flush=True,
    )
    return outcome


def json_bytes(database: Database) -> dict[str, dict[str, float]]:
    """Mean stored length of the JSON columns of a run, per kind (what a run row holds)."""
    columns = ("scores", "notes", "anomalies", "state")
    cast = "{}" if database.engine.dialect.name == "sqlite" else "CAST({} AS TEXT)"
    parts = ", ".join(f"AVG(COALESCE(LENGTH({cast.format(c)}), 0))" for c in columns)
    with database.engine.connect() as connection:
        rows = connection.execute(
            text(f"SELECT kind, {parts} FROM forecast_runs GROUP BY kind")
        ).all()
    return {row[0]: dict(zip(columns, map(float, row[1:]), strict=True)) for row in rows}


def add_backlog(database: Database, days: int) -> tuple[int, float]:
    """The refresh runs ``days`` days of hourly refreshes leave within the retention window:
    copies of each item's newest refresh run, one per hour back (trained_until and created_at
    k hours earlier, k = 1 .. days x 24; the oldest hour is due for deletion). Run rows only: a
    refresh reads no stored points."""
    started = time.perf_counter()
    now = datetime.now(UTC)
    copied = (
        "series_id", "metric", "status", "horizon", "model", "backtest_metric",
        "backtest_error", "scores", "notes", "anomalies", "reason", "error", "duration_s",
        "kind", "parent_id",
    )  # fmt: skip
    with database.transaction() as session:
        newest = (
            select(func.max(ForecastRun.id))
            .where(ForecastRun.kind == "refresh")
            .group_by(ForecastRun.series_id, ForecastRun.metric)
        )
        runs = session.scalars(select(ForecastRun).where(ForecastRun.id.in_(newest))).all()
        templates = [({c: getattr(r, c) for c in copied}, r.trained_until) for r in runs]
    inserted = 0
    for k in range(1, days * 24 + 1):
        back = timedelta(hours=k)
        rows = [
            {**values, "trained_until": trained - back, "created_at": now - back, "state": None}
            for values, trained in templates
        ]
        with database.transaction() as session:
            session.execute(insert(ForecastRun), rows)
        inserted += len(rows)
    return inserted, time.perf_counter() - started


def refresh_runs(database: Database) -> int:
    with database.transaction() as session:
        return session.scalar(
            select(func.count()).select_from(ForecastRun).where(ForecastRun.kind == "refresh")
        )


def retention_check(database: Database, expected: int) -> list[str]:
    """apply_retention now (nothing is 15 days old), then 16 days ahead: every refresh run
    but the newest of each series x metric goes; nightly parents of kept refreshes stay."""
    lines, problems = [], []
    now = datetime.now(UTC)
    first = apply_retention(database, refresh_days=RETENTION_DAYS, now=now)
    lines.append(
        f"apply_retention(now): deleted {first.refresh_deleted} refresh / "
        f"{first.nightly_deleted} nightly runs (expected 0 / 0)"
    )
    if first.refresh_deleted or first.nightly_deleted:
        problems.append("retention deleted runs younger than 15 days")
    want = refresh_runs(database) - expected
    started = time.perf_counter()
    ahead = apply_retention(database, refresh_days=RETENTION_DAYS, now=now + timedelta(days=16))
    took = time.perf_counter() - started
    lines.append(
        f"apply_retention(now + 16 d): deleted {ahead.refresh_deleted} refresh runs in "
        f"{took:.1f}s (expected {want}: all but the newest of each of {expected} items)"
    )
    if ahead.refresh_deleted != want:
        problems.append(f"retention deleted {ahead.refresh_deleted} refresh runs, expected {want}")
    both = apply_retention(
        database, refresh_days=RETENTION_DAYS, nightly_days=1, now=now + timedelta(days=16)
    )
    lines.append(
        f"apply_retention(now + 16 d, nightly_days=1): deleted {both.refresh_deleted} refresh / "
        f"{both.nightly_deleted} nightly runs (expected 0 / 0: each nightly is a kept parent)"
    )
    if both.refresh_deleted or both.nightly_deleted:
        problems.append("retention deleted a kept run or the parent of one")
    with database.transaction() as session:
        newest = (
            select(func.max(ForecastRun.id))
            .where(ForecastRun.status == "complete")
            .group_by(ForecastRun.series_id, ForecastRun.metric)
        )
        kept = session.execute(
            select(ForecastRun.kind, func.count())
            .where(ForecastRun.id.in_(newest))
            .group_by(ForecastRun.kind)
        ).all()
        orphans = session.scalar(
            select(func.count())
            .select_from(ForecastPoint)
            .outerjoin(ForecastRun, ForecastRun.id == ForecastPoint.run_id)
            .where(ForecastRun.id.is_(None))
        )
    left = rows_by_kind(database)
    sizes = table_bytes(database)
    lines.append(
        f"tables after retention: forecast_runs {sizes['forecast_runs'] / 1e6:.1f} MB, "
        f"forecast_points {sizes['forecast_points'] / 1e6:.1f} MB"
        + ("" if database.engine.dialect.name == "sqlite" else " (before VACUUM)")
    )
    lines.append(
        f"left: {left['refresh'][0]} refresh runs ({left['refresh'][1]} points), "
        f"{left['nightly'][0]} nightly runs ({left['nightly'][1]} points); newest run of each "
        f"series x metric by kind: {dict(kept)}; points without a run: {orphans}"
    )
    if left["refresh"][0] != expected or dict(kept) != {"refresh": expected} or orphans:
        problems.append("after retention the newest run of every item is not its refresh")
    return lines + [f"RETENTION PROBLEM: {p}" for p in problems]


# -- main ------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=1000, help="number of series (1000)")
    parser.add_argument("--days", type=int, default=30, help="days of hourly history (30)")
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--repeat", type=int, default=3, help="timed refreshes, one hour each")
    parser.add_argument("--workers", type=int, default=2, help="nightly fit processes (2)")
    parser.add_argument("--sample", type=int, default=10, help="series refitted in-process (10)")
    parser.add_argument("--database-url", help="an empty database (default: temp SQLite file)")
    parser.add_argument(
        "--all-models", action="store_true", help="nightly fit with every default candidate"
    )
    parser.add_argument("--profile", action="store_true", help="cProfile one more refresh")
    parser.add_argument(
        "--backlog-days",
        type=int,
        default=0,
        help="then refresh once more with this many days of refresh runs stored (0: skip)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    warnings.simplefilter("ignore")
    models = None if args.all_models else BENCH_MODELS
    # timed repeats, the step timing, the profile, the refresh at the backlog
    extra = args.repeat + 1 + int(args.profile) + int(args.backlog_days > 0)
    print(
        f"{datetime.now(UTC):%Y-%m-%d %H:%M}Z, {os.cpu_count()} cores, "
        f"load average at start {proc_loadavg()}"
    )
    print(code_version())
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="gpucast-bench-") as tmp:
        url = args.database_url or f"sqlite:///{Path(tmp) / 'refresh.db'}"
        database = open_database(url)
        database.ensure_schema(auto_migrate=True)
        fleet = synthetic_fleet(args.series, days=args.days, seed=args.seed, extra_hours=extra)
        cut = fleet["hour"].max() - pd.Timedelta(hours=extra - 1)
        history, later = fleet[fleet["hour"] < cut], fleet[fleet["hour"] >= cut]
        started = time.perf_counter()
        load(database, history)
        print(
            f"loaded {args.series} series x {args.days * 24} h ({len(history)} rows) on "
            f"{database.engine.dialect.name} in {time.perf_counter() - started:.1f}s; "
            f"{extra} more hours held back"
        )
        expected = args.series * len(METRICS)
        with threadpool_limits(limits=1):  # warm-up: imports out of every timing
            items, _ = build_items(database, ForecastOptions(series=(history["series"].iloc[0],)))
            run_item(_with_models(items[0], models))

        fit = nightly_fit(database, models, args.workers)
        if len(fit["report"].results) != expected or fit["report"].failed:
            problems.append(f"nightly: {len(fit['report'].results)} results, expected {expected}")
        if fit["without_state"]:
            problems.append(f"nightly: {fit['without_state']} complete runs without state")
        bytes_nightly, rows_nightly = table_bytes(database), rows_by_kind(database)

        names = sorted(history["series"].unique())
        sample = names[:: max(len(names) // max(args.sample, 1), 1)][: args.sample]
        print(f"{stamp()} sample refits ({len(sample)} series), load {proc_loadavg()}", flush=True)
        refits = sample_refits(database, sample, models)

        hours = sorted(later["hour"].unique())
        repeats = []
        for i in range(args.repeat):
            ingest_s = append_hour(database, later[later["hour"] == hours[i]])
            outcome = timed_refresh(database, expected, fit["kinds"])
            outcome["ingest"] = ingest_s
            repeats.append(outcome)
            problems += [f"refresh {i + 1}: {p}" for p in outcome["problems"]]
            server = (
                "" if outcome["server_cpu"] is None else f", server {outcome['server_cpu']:.1f}s"
            )
            print(
                f"{stamp()} refresh {i + 1}: hour {pd.Timestamp(hours[i]):%m-%d %H:%M} appended in "
                f"{ingest_s:.2f}s; {len(outcome['item_cpu'])} refreshed in {outcome['wall']:.1f}s "
                f"wall, CPU {outcome['process_cpu']:.1f}s{server}, item compute median "
                f"{ms(statistics.median(outcome['item_cpu']))} ms, load {outcome['load']}",
                flush=True,
            )

        append_hour(database, later[later["hour"] == hours[args.repeat]])
        with instrumented(database) as spent:
            steps = timed_refresh(database, expected, fit["kinds"])
        problems += [f"step-timed refresh: {p}" for p in steps["problems"]]
        profile = None
        if args.profile:
            append_hour(database, later[later["hour"] == hours[args.repeat + 1]])
            profile = cProfile.Profile()
            profile.enable()
            profiled = timed_refresh(database, expected, fit["kinds"])
            profile.disable()
            problems += [f"profiled refresh: {p}" for p in profiled["problems"]]

        bytes_after, rows_after = table_bytes(database), rows_by_kind(database)
        row_json = json_bytes(database)
        refreshes = extra - int(args.backlog_days > 0)
        bound = None
        if args.backlog_days > 0:
            bound = at_the_bound(database, args, expected, fit["kinds"], later, hours[-1])
            problems += bound["problems"]
        retention = retention_check(database, expected)
        problems += [line for line in retention if line.startswith("RETENTION PROBLEM")]
        database.dispose()

    storage = (bytes_nightly, rows_nightly, bytes_after, rows_after, row_json)
    print_results(args, fit, refits, repeats, (steps, spent), expected, refreshes, storage)
    if bound is not None:
        print()
        print_bound(bound, args.backlog_days, expected)
    print()
    for line in retention:
        print(line)
    if profile is not None:
        print("\ncProfile of one more refresh (top 30 by cumulative time):")
        pstats.Stats(profile, stream=sys.stdout).sort_stats("cumulative").print_stats(30)
    for problem in problems:
        print(f"PROBLEM: {problem}")
    print(f"load average at end {proc_loadavg()}")
    return 1 if problems else 0


def print_results(args, fit, refits, repeats, timed, expected, refreshes, storage) -> None:
    steps, spent = timed
    n = args.series
    print()
    print(f"## {n} series x 2 metrics = {expected} items")
    print()
    winners = ", ".join(f"{k} {v}" for k, v in fit["winners"].most_common())
    print(f"nightly winners: {winners}")
    mix = ", ".join(f"{k} {v}" for k, v in fit["mix"].most_common())
    print(f"refresh kinds (ensembles by members): {mix}")
    print()
    walls = [r["wall"] for r in repeats]
    cpus = [r["process_cpu"] for r in repeats]
    items = [c for r in repeats for c in r["item_cpu"]]
    refit_cpu = fit["cpu_per_item"]
    print("| what | wall | CPU | CPU per item |")
    print("|---|---:|---:|---:|")
    report = fit["report"]
    print(
        f"| nightly fit ({'all default candidates' if args.all_models else 'no Prophet'}, "
        f"{args.workers} workers) | {report.wall_s:.1f} s "
        f"| {refit_cpu * len(report.results):.1f} s | {ms(refit_cpu)} ms |"
    )
    server = [r["server_cpu"] for r in repeats if r["server_cpu"] is not None]
    extra = f" (+ {statistics.median(server):.1f} s PostgreSQL backend)" if server else ""
    print(
        f"| refresh, median of {len(repeats)} ({', '.join(f'{w:.1f}' for w in walls)} s wall) "
        f"| {statistics.median(walls):.1f} s | {statistics.median(cpus):.1f} s{extra} "
        f"| {ms(statistics.median(cpus) / expected)} ms |"
    )
    print(
        "| refresh compute only (RefreshOutcome.cpu_s), all repeats | "
        f"| {sum(items) / len(repeats):.1f} s | median {ms(statistics.median(items))}, "
        f"p95 {ms(pct(items, 95))}, max {ms(max(items))} ms |"
    )
    print()
    print("| refresh compute CPU by kind | items | median ms | p95 ms | max ms |")
    print("|---|---:|---:|---:|---:|")
    pooled: dict[str, list[float]] = defaultdict(list)
    for r in repeats:
        for kind, values in r["by_kind"].items():
            pooled[kind] += values
    for kind, values in sorted(pooled.items(), key=lambda kv: -len(kv[1])):
        print(
            f"| {kind} | {len(values) // len(repeats)} | {ms(statistics.median(values))} "
            f"| {ms(pct(values, 95))} | {ms(max(values))} |"
        )
    print()
    ingests = ", ".join(f"{r['ingest']:.2f}" for r in repeats)
    print(f"ingest of one new hour for {n} series (one transaction): {ingests} s")
    bench_cpu, all_cpu = refits["cpu"]["bench"], refits["cpu"]["all"]
    print(
        f"in-process refit of {refits['items']} sample items: bench candidates median "
        f"{statistics.median(bench_cpu):.2f} s CPU (p90 {pct(bench_cpu, 90):.2f}), every default "
        f"candidate incl. Prophet median {statistics.median(all_cpu):.2f} s "
        f"(p90 {pct(all_cpu, 90):.2f}); winners with Prophet: "
        + ", ".join(f"{k} {v}" for k, v in refits["winners"]["all"].most_common())
    )
    median_item = statistics.median(items)
    print(
        f"ratios: refresh compute / refit CPU per item = 1 : {refit_cpu / median_item:.0f} "
        f"(bench candidates, pool), 1 : {statistics.median(all_cpu) / median_item:.0f} (with "
        f"Prophet, sample); end-to-end refresh CPU per item / refit = "
        f"1 : {refit_cpu / (statistics.median(cpus) / expected):.0f}"
    )
    print()
    print(
        f"where a refresh's time goes (one more refresh, steps timed; {steps['wall']:.1f} s "
        f"wall, {steps['process_cpu']:.1f} s CPU):"
    )
    print_steps(spent, steps["wall"], expected)
    print()
    print_storage(refreshes, *storage)
    print()
    cpu_ok = pct(items, 95) <= BUDGET_ITEM_CPU_S
    scale = 2000 / expected
    wall_at_2000 = statistics.median(walls) * scale
    print(
        f"budget <= 20 ms CPU per item: compute p95 {ms(pct(items, 95))} ms -> "
        f"{'met' if cpu_ok else 'MISSED'}; end-to-end CPU per item "
        f"{ms(statistics.median(cpus) / expected)} ms -> "
        f"{'met' if statistics.median(cpus) / expected <= BUDGET_ITEM_CPU_S else 'MISSED'}"
    )
    print(
        f"budget <= 60 s wall for 1,000 x 2: {statistics.median(walls):.1f} s for {expected} items"
        + (f" (x{scale:.1f} -> {wall_at_2000:.1f} s)" if expected != 2000 else "")
        + f" -> {'met' if wall_at_2000 <= BUDGET_WALL_S else 'MISSED'}"
    )


def print_bound(bound: dict, days: int, expected: int) -> None:
    server = "" if bound["server_cpu"] is None else f" + {bound['server_cpu']:.1f} s server"
    print(
        f"at the retention bound ({bound['backlog']} refresh runs stored, {days} days): refresh "
        f"{bound['wall']:.1f} s wall, {bound['process_cpu']:.1f} s CPU{server} "
        f"({ms(bound['process_cpu'] / expected)} ms per item), compute median "
        f"{ms(statistics.median(bound['item_cpu']))} ms; the hourly apply_retention deleted "
        f"{bound['retention_deleted']} runs in {bound['retention_s']:.1f} s"
    )
    print_steps(bound["spent"], bound["wall"], expected)


def print_steps(spent: dict, wall_s: float, expected: int) -> None:
    print("| step | calls | wall s | CPU s | wall ms per item |")
    print("|---|---:|---:|---:|---:|")
    accounted = 0.0
    for name, (wall, cpu, calls) in spent.items():
        accounted += wall  # the steps do not nest
        label = STEPS.get(name, "commit (per series)")
        print(f"| {label} | {calls} | {wall:.2f} | {cpu:.2f} | {ms(wall / expected)} |")
    rest = wall_s - accounted
    print(f"| the rest (sessions, outcome bookkeeping) | | {rest:.2f} | | {ms(rest / expected)} |")


def print_storage(refreshes, bytes_nightly, rows_nightly, bytes_after, rows_after, row_json):
    nightly_runs, nightly_points = rows_nightly["nightly"]
    refresh_runs, refresh_points = rows_after["refresh"]
    b_night = {t: v / nightly_runs for t, v in bytes_nightly.items()}
    b_ref = {t: (bytes_after[t] - bytes_nightly[t]) / refresh_runs for t in bytes_after}
    night_run = sum(b_night.values())
    ref_run = sum(b_ref.values())
    print(
        f"stored after the nightly fit and {refreshes} refreshes: nightly {nightly_runs} runs / "
        f"{nightly_points} points, refresh {refresh_runs} runs / {refresh_points} points; "
        f"forecast_runs {bytes_after['forecast_runs'] / 1e6:.1f} MB, forecast_points "
        f"{bytes_after['forecast_points'] / 1e6:.1f} MB (indexes included)"
    )
    print(
        f"bytes per run incl. its points and indexes: nightly {night_run:,.0f} "
        f"(run row {b_night['forecast_runs']:,.0f} + points {b_night['forecast_points']:,.0f}), "
        f"refresh {ref_run:,.0f} (run row {b_ref['forecast_runs']:,.0f} + points "
        f"{b_ref['forecast_points']:,.0f})"
    )
    for kind, lengths in sorted(row_json.items()):
        print(
            f"mean JSON text in a {kind} run row: "
            + ", ".join(f"{c} {v:,.0f}" for c, v in lengths.items())
            + " bytes"
        )
    points_per_run = refresh_points / max(refresh_runs, 1)
    day_runs = 2 * (24 + 1)
    day_points = day_runs * points_per_run
    day_bytes = 2 * 24 * ref_run + 2 * night_run
    print(
        f"per series per day (2 metrics, 24 refreshes + 1 nightly): {day_runs} runs + "
        f"{day_points:,.0f} points = {day_bytes / 1e3:,.0f} kB (nightly alone: 2 runs + "
        f"{2 * points_per_run:.0f} points = {2 * night_run / 1e3:.0f} kB; "
        f"x{day_bytes / (2 * night_run):.0f})"
    )
    kept_runs = RETENTION_DAYS * 24 * 2
    kept_bytes = kept_runs * ref_run
    print(
        f"15-day refresh retention bounds refreshes to {kept_runs} runs + "
        f"{kept_runs * points_per_run:,.0f} points = {kept_bytes / 1e6:.1f} MB per series "
        f"({kept_bytes * 1000 / 1e9:.1f} GB per 1,000 series); nightly runs stay unless "
        f"nightly_days is set: +{2 * night_run / 1e3:.0f} kB per series per day "
        f"({2 * night_run * 1000 * 365 / 1e9:.1f} GB per 1,000 series per year)"
    )


if __name__ == "__main__":
    sys.exit(main())
