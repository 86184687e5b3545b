"""Load benchmark: the gpucast server on PostgreSQL under concurrent clients, with a bare FastAPI
endpoint served the same way as the ceiling.

For each worker count it (re)creates the database, seeds one series with 30 days of hourly
history, a GPU profile and a stored forecast, starts ``uvicorn --factory app.api:create_app
--workers N`` on loopback and drives, with ``wrk`` (Debian package ``wrk``):

- ``GET /v1/series/{name}/capacity?profile=…`` (the GPU plan of the stored forecast),
- ``POST /grafana/query`` for the 24 h forecast range (forecast band + GPU plan targets) as a
  dashboard posts it: the range moves by one millisecond on every request, as a range that
  ends at ``now`` does (every refresh, every viewer), so no two bodies are equal;
- the same query with one identical body (what a response cache keyed by the body serves),
- ``GET /ping`` of a bare FastAPI app with one trivial JSON endpoint (the ceiling),

each at ``--clients`` connections for ``--duration`` seconds after a short warm-up. It checks
that reads did not refit anything (the forecast-run count and the run id in every plan are
unchanged) and prints requests/s, p50/p99 latency, errors and the ratio to the ceiling.

``--baseline DIR`` serves the same rows from the gpucast checkout in DIR too (another commit,
on the same database and the same seed), one row after the other in the same run, so a
change is measured against its baseline under the same machine load.

    python bench/load.py [--database-url postgresql://postgres@127.0.0.1:5432/gpucast_load]
                         [--workers 1 2] [--clients 50] [--duration 30] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import psycopg
from fastapi import FastAPI
from sqlalchemy import func, select
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app import ingest  # noqa: E402
from app.db import open_database, repository  # noqa: E402
from app.db.models import ForecastRun  # noqa: E402
from app.jobs import ForecastOptions, run_forecasts  # noqa: E402
from app.settings import normalize_database_url  # noqa: E402

SERIES = "prod-us/llama-3.1-70b"
PROFILE = "h100-70b"
DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/gpucast_load"


def bare_app() -> FastAPI:
    """The ceiling: one trivial JSON endpoint, nothing else (``--factory bench.load:bare_app``)."""
    app = FastAPI()

    @app.get("/ping")
    async def ping() -> dict[str, str]:
        return {"status": "ok"}

    return app


def reset_database(url: str) -> None:
    target = make_url(normalize_database_url(url))
    admin = target.set(drivername="postgresql", database="postgres")
    name = target.database
    with psycopg.connect(admin.render_as_string(hide_password=False), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def history(days: int = 30) -> pd.DataFrame:
    rng = np.random.default_rng(30)
    hours = pd.date_range(
        pd.Timestamp.now(tz="UTC").floor("h") - pd.Timedelta(days=days), periods=days * 24, freq="h"
    )
    shape = 1.0 + 0.6 * np.sin(2 * np.pi * (hours.hour.to_numpy() - 6) / 24)
    requests = 4_000_000 / 24 * shape * rng.lognormal(0, 0.05, len(hours))
    return pd.DataFrame(
        {
            "series": SERIES,
            "hour": hours,
            "requests": requests,
            "prompt_tokens": requests * 400,
            "completion_tokens": requests * 100,
            "total_tokens": requests * 500,
            "peak_rps": requests / 3600 * 1.5,
        }
    )


def seed(url: str) -> tuple[int, pd.Timestamp]:
    """Series + 30 days + profile + one stored forecast; returns (forecast runs, trained_until)."""
    database = open_database(normalize_database_url(url))
    database.upgrade()
    with database.transaction() as session:
        ingest.store(session, history(), create_series=True)
        repository.create_gpu_profile(
            session,
            name=PROFILE,
            gpu_type="H100-80G",
            model="llama-3.1-70b",
            tokens_per_s_per_gpu=2400.0,
            gpus_per_replica=2,
            usd_per_hour_on_demand=2.5,
            usd_per_hour_reserved=1.6,
            usd_per_hour_spot=None,
        )
    report = run_forecasts(
        database, ForecastOptions(models=("seasonal_naive", "seasonal_ma"), workers=1)
    )
    assert not report.failed, report.table()
    runs, trained_until = run_count(database), report.results[0].trained_until
    database.dispose()
    return runs, pd.Timestamp(trained_until)


def run_count(database: object) -> int:
    with database.transaction() as session:  # type: ignore[attr-defined]
        return int(session.scalar(select(func.count()).select_from(ForecastRun)))


class Server:
    def __init__(
        self, factory: str, *, workers: int, port: int, env: dict[str, str], code: Path = ROOT
    ) -> None:
        self.base_url = f"http://127.0.0.1:{port}"
        command = [
            *(sys.executable, "-m", "uvicorn", "--factory", factory),
            *("--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)),
            *("--log-level", "warning", "--no-access-log"),
        ]
        self.command = " ".join(command[1:])
        # ``python -m`` puts the working directory first on sys.path: the server runs the
        # checkout in ``code`` (PYTHONPATH too, for uvicorn's worker processes).
        env = {**os.environ, **env, "PYTHONPATH": str(code)}
        self.process = subprocess.Popen(command, cwd=code, env=env)

    def wait(self, path: str) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.base_url + path, timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"server did not answer {path}: {self.command}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@dataclass
class Result:
    name: str
    workers: int
    requests_per_s: float
    p50_ms: float
    p99_ms: float
    requests: int
    errors: int
    load_before: str
    code: str = ""


def _ms(text: str) -> float:
    value, unit = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text).groups()  # type: ignore[union-attr]
    return float(value) * {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}[unit]


def _lua_string(text: str) -> str:
    return json.dumps(text)  # a JSON string literal is a valid Lua string literal here


def post_script(body: dict) -> str:
    """wrk posts ``body`` as it is on every request."""
    return (
        f'wrk.method = "POST"\nwrk.body = {_lua_string(json.dumps(body))}\n'
        'wrk.headers["Content-Type"] = "application/json"\n'
    )


def moving_range_script(body: dict, *, threads: int) -> str:
    """wrk posts ``body`` with its range moved by one more millisecond on every request (and
    a different millisecond per wrk thread): what a dashboard whose range ends at ``now``
    sends. ``body["range"]`` must hold ``from`` and ``to`` ending in ``.000Z``."""
    start, end = (pd.Timestamp(body["range"][k]) for k in ("from", "to"))
    before, _, after = json.dumps(body).partition('"range"')
    rest = after.split("}", 1)[1]
    return f"""
local counter = 0
local threads = 0
function setup(thread)
  thread:set("offset", threads)
  threads = threads + 1
end
local start_s, end_s = {int(start.timestamp())}, {int(end.timestamp())}
local function stamp(seconds, ms)
  seconds = seconds + math.floor(ms / 1000)
  return os.date("!%Y-%m-%dT%H:%M:%S", seconds) .. string.format(".%03dZ", ms % 1000)
end
request = function()
  counter = counter + 1
  local ms = counter * {threads} + offset
  local range = '"range": {{"from": "' .. stamp(start_s, ms) .. '", "to": "' ..
    stamp(end_s, ms) .. '"}}'
  local body = {_lua_string(before)} .. range .. {_lua_string(rest)}
  return wrk.format("POST", nil, {{["Content-Type"] = "application/json"}}, body)
end
"""


WRK_THREADS = 2


def wrk(
    name: str,
    url: str,
    *,
    workers: int,
    clients: int,
    duration: int,
    script: str | None = None,
    code: str = "",
) -> Result:
    args = [
        *("wrk", f"-t{WRK_THREADS}", f"-c{clients}", f"-d{duration}s"),
        *("--latency", "--timeout", "10s"),
    ]
    script_path = None
    if script is not None:
        handle, name_ = tempfile.mkstemp(suffix=".lua")
        os.close(handle)
        script_path = Path(name_)
        script_path.write_text(script)
        args += ["-s", str(script_path)]
    try:
        # warm-up: fills connection pools and the plan cache; not measured
        subprocess.run([*args[:3], "-d3s", *args[4:], url], check=True, capture_output=True)
        load_before = Path("/proc/loadavg").read_text().split()[0]
        out = subprocess.run([*args, url], check=True, capture_output=True, text=True).stdout
    finally:
        if script_path is not None:
            script_path.unlink()
    latency = dict(re.findall(r"^\s+(50|99)%\s+(\S+)\s*$", out, re.MULTILINE))
    if set(latency) != {"50", "99"}:
        raise RuntimeError(f"no latency distribution in wrk's output:\n{out}")
    total = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sockets = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out
    )
    errors = (int(non_2xx.group(1)) if non_2xx else 0) + (
        sum(int(g) for g in sockets.groups()) if sockets else 0
    )
    return Result(
        name=name,
        workers=workers,
        requests_per_s=float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),  # type: ignore[union-attr]
        p50_ms=_ms(latency["50"]),
        p99_ms=_ms(latency["99"]),
        requests=total,
        errors=errors,
        load_before=load_before,
        code=code,
    )


def grafana_body(trained_until: pd.Timestamp) -> dict:
    start = trained_until + pd.Timedelta(hours=1)
    end = start + pd.Timedelta(hours=24)
    return {
        "range": {
            "from": start.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
            "to": end.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
        },
        "interval": "1h",
        "intervalMs": 3_600_000,
        "maxDataPoints": 1200,
        "targets": [
            {
                "refId": "A",
                "target": "forecast",
                "payload": {"series": SERIES, "metric": "tokens", "band": "hi_80"},
            },
            {"refId": "B", "target": "gpus", "payload": {"series": SERIES, "profile": PROFILE}},
        ],
    }


def check_moving_range(base_url: str, body: dict) -> None:
    """The moving-range script sends what a dashboard sends: each body is a valid query whose
    answer has the 24 h of the plan (checked on the body the script builds for ms = 1)."""
    moved = json.loads(json.dumps(body))
    for key in ("from", "to"):
        moved["range"][key] = moved["range"][key].replace(".000Z", ".001Z")
    answer = httpx.post(f"{base_url}/grafana/query", json=moved, timeout=30)
    assert answer.status_code == 200, answer.text
    assert [len(s["datapoints"]) for s in answer.json()] == [23, 23], answer.text


def check_reads(base_url: str, expected_runs: int, url: str) -> None:
    """Reads refit nothing: the run count is unchanged and every plan names the seeded run."""
    database = open_database(normalize_database_url(url))
    assert run_count(database) == expected_runs, "a read stored a forecast run"
    database.dispose()
    plan = httpx.get(f"{base_url}/v1/series/{SERIES}/capacity", params={"profile": PROFILE}).json()
    assert len(plan["forecast_run_ids"]) == 1 and len(plan["hours"]) == 24, plan


def bench_workers(args: argparse.Namespace, workers: int) -> list[Result]:
    reset_database(args.database_url)
    runs, trained_until = seed(args.database_url)
    env = {"GPUCAST_DATABASE_URL": args.database_url, "GPUCAST_AUTO_MIGRATE": "false"}
    common = {"workers": workers, "clients": args.clients, "duration": args.duration}
    codes = {"this": ROOT} | ({"baseline": args.baseline} if args.baseline else {})
    servers = {
        label: Server(
            "app.api:create_app", workers=workers, port=args.port + 2 + i, env=env, code=code
        )
        for i, (label, code) in enumerate(codes.items())
    }
    body = grafana_body(trained_until)
    rows = [
        ("capacity", f"/v1/series/{SERIES}/capacity?profile={PROFILE}", None),
        (
            "grafana query 24h, moving range",
            "/grafana/query",
            moving_range_script(body, threads=WRK_THREADS),
        ),
        ("grafana query 24h, identical body", "/grafana/query", post_script(body)),
    ]
    results = []
    try:
        for server in servers.values():
            server.wait("/readyz")
            check_moving_range(server.base_url, body)
        for name, path, script in rows:
            for label, server in servers.items():
                url = server.base_url + path
                results.append(wrk(name, url, **common, script=script, code=label))
        for server in servers.values():
            check_reads(server.base_url, runs, args.database_url)
    finally:
        for server in servers.values():
            server.stop()
    ceiling = Server("bench.load:bare_app", workers=workers, port=args.port + 1, env={})
    try:
        ceiling.wait("/ping")
        results.append(wrk("ceiling (bare FastAPI)", f"{ceiling.base_url}/ping", **common))
    finally:
        ceiling.stop()
    return results


def report(results: list[Result]) -> None:
    print(
        "| workers | endpoint | code | requests/s | p50 ms | p99 ms | requests | errors | "
        "vs ceiling | load avg |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        ceiling = next(c for c in results if c.workers == r.workers and c.name.startswith("ceil"))
        print(
            f"| {r.workers} | {r.name} | {r.code} | {r.requests_per_s:,.0f} | {r.p50_ms:.1f} | "
            f"{r.p99_ms:.1f} | {r.requests:,} | {r.errors} | "
            f"{r.requests_per_s / ceiling.requests_per_s:.0%} | {r.load_before} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=DEFAULT_URL)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--duration", type=int, default=30)
    parser.add_argument("--port", type=int, default=18700)
    parser.add_argument(
        "--baseline",
        type=Path,
        help="another gpucast checkout to serve the same rows from, in the same run",
    )
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk not found: apt-get install wrk")
    print(f"cores: {os.cpu_count()}  clients: {args.clients}  duration: {args.duration}s")
    results = [r for workers in args.workers for r in bench_workers(args, workers)]
    report(results)


if __name__ == "__main__":
    main()
