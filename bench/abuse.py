"""Abuse benchmark: what clients without a key (and many writers) cost a keyed gpucast server.

For the checkout under test (and, with ``--baseline DIR``, another checkout, on a database
seeded the same way) it seeds a fresh SQLite file (one series with 30 days of hourly history,
a GPU profile, a stored forecast, 45 more series and a second profile), starts
``uvicorn --factory app.api:create_app`` with ``GPUCAST_API_KEYS`` set and runs three attacks:

1. **Anonymous 19 MB bodies**: 4 clients post ``[[],[],…]`` (19 MB) without a key to
   ``POST /v1/series`` over and over for ``--seconds``; meanwhile ``/healthz`` is probed every
   50 ms. Reports /healthz p50 and max, and the attackers' median time to their 401.
2. **45 abandoned heavy reads**: 45 anonymous ``GET …/capacity/backtest`` of distinct
   parameters whose clients hang up after 3 s; meanwhile and for ``--seconds`` after,
   ``/healthz`` and ``/readyz`` are probed and a keyed write (``POST /v1/series``) is made
   every second. Reports the worst /healthz and /readyz, the slowest keyed write and whether
   all succeeded, and the server's CPU seconds in the ``--seconds`` after every client left
   (work done for nobody).
3. **45 SQLite writers**: 45 clients each replace a deployment 3 times
   (``PUT /v1/series/{name}/deployment``), all at once. Reports writes/s, p50/p99, 5xx.
4. **A 180,000-row load test over REST**: one keyed ``PUT /v1/gpu-profiles/{name}/loadtest``
   of 9 CSV files of 20,000 load levels each (one mix a file; 9 MB), on a fresh server. Reports
   the status, the time to the answer and the server's peak RSS (VmHWM) before and after;
   then 9 × 10,000 rows (under the cap) and the SLO capacity at an unmeasured mix (the fit).
5. **A 1,000,000-row load test on the CLI**: ``gpucast profile import`` of one CSV of 10 mixes
   × 100,000 load levels (48 MB). Reports the exit code, the wall time and the peak RSS.

    nice python bench/abuse.py [--baseline DIR] [--seconds 8] [--attacks 1,2,3,4,5]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load import PROFILE, ROOT, SERIES, Server, seed  # noqa: E402

from app.db import open_database, repository  # noqa: E402

KEY = "bench-key"
BODY = b"[" + b"[]," * 6_333_333 + b"[]]"  # 19 MB
WRITERS = 45


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _seed(url: str) -> None:
    seed(url)
    database = open_database(url)
    with database.transaction() as session:
        repository.create_gpu_profile(
            session,
            name="l40s-70b",
            gpu_type="L40S",
            model="llama-3.1-70b",
            tokens_per_s_per_gpu=900.0,
            gpus_per_replica=4,
            usd_per_hour_on_demand=1.2,
            usd_per_hour_reserved=None,
            usd_per_hour_spot=None,
        )
        for i in range(WRITERS):
            repository.create_series(session, name=f"writer-{i}")
    database.dispose()


class Probe:
    """GET ``path`` every ``every_s`` seconds until stopped; latencies in ms (a failure or a
    timeout counts as its full wait)."""

    def __init__(self, base_url: str, path: str, every_s: float) -> None:
        self.base_url, self.path, self.every_s = base_url, path, every_s
        self.ms: list[float] = []
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Probe:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        with httpx.Client(base_url=self.base_url, timeout=60) as client:
            while not self._stop.is_set():
                started = time.perf_counter()
                try:
                    ok = client.get(self.path).status_code == 200
                except httpx.HTTPError:
                    ok = False
                self.ms.append((time.perf_counter() - started) * 1000)
                self.failed += not ok
                self._stop.wait(self.every_s)


def _big_body(port: int, seconds: float, waits: list[float]) -> None:
    head = (
        "POST /v1/series HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(BODY)}\r\nConnection: close\r\n\r\n"
    ).encode()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.perf_counter()
        with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
            with contextlib.suppress(OSError):  # answered and closed before all was sent
                sock.sendall(head + BODY)
            sock.recv(64)
        waits.append(time.perf_counter() - started)


def attack_bodies(base_url: str, seconds: float) -> str:
    port = int(base_url.rsplit(":", 1)[1])
    waits: list[float] = []
    with Probe(base_url, "/healthz", 0.05) as health:
        _run_all([lambda: _big_body(port, seconds, waits) for _ in range(4)])
    return (
        f"/healthz p50 {statistics.median(health.ms):.0f} ms, max {max(health.ms):.0f} ms "
        f"({len(health.ms)} probes); 401 after {statistics.median(waits):.2f} s median "
        f"({len(waits)} bodies)"
    )


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def attack_reads(base_url: str, seconds: float, pid: int) -> str:
    def abandon(days: int) -> None:
        with (
            httpx.Client(base_url=base_url, timeout=3) as client,
            contextlib.suppress(httpx.HTTPError),
        ):
            client.get(
                f"/v1/series/{SERIES}/capacity/backtest",
                params={"profile": PROFILE, "days": days, "models": "seasonal_ma"},
            )

    writes: list[tuple[float, int]] = []

    def keyed_writes(prefix: str, stop: threading.Event) -> None:
        with httpx.Client(base_url=base_url, timeout=60, headers={"X-API-Key": KEY}) as client:
            i = 0
            while not stop.is_set():
                started = time.perf_counter()
                try:
                    status = client.post("/v1/series", json={"name": f"{prefix}-{i}"}).status_code
                except httpx.HTTPError:
                    status = 0
                writes.append((time.perf_counter() - started, status))
                i += 1
                stop.wait(1.0)

    stop = threading.Event()
    writer = threading.Thread(target=keyed_writes, args=(f"w{time.time_ns()}", stop))
    with Probe(base_url, "/healthz", 0.1) as health, Probe(base_url, "/readyz", 0.1) as ready:
        writer.start()
        _run_all([lambda d=d: abandon(d) for d in range(1, WRITERS + 1)])
        cpu_left = _cpu_s(pid)
        time.sleep(seconds)
        cpu_after = _cpu_s(pid) - cpu_left
        stop.set()
        writer.join(60)
    slowest = max(w for w, _ in writes)
    ok = sum(status == 201 for _, status in writes)
    return (
        f"/healthz worst {max(health.ms) / 1000:.2f} s, "
        f"/readyz worst {max(ready.ms) / 1000:.2f} s; "
        f"keyed writes {ok}/{len(writes)} ok, slowest {slowest:.2f} s; server CPU in the "
        f"{seconds:g} s after all clients left: {cpu_after:.1f} s"
    )


def attack_writers(base_url: str) -> str:
    waits: list[float] = []
    statuses: list[int] = []
    barrier = threading.Barrier(WRITERS)

    def write(i: int) -> None:
        with httpx.Client(base_url=base_url, timeout=120, headers={"X-API-Key": KEY}) as client:
            barrier.wait()
            for round_ in range(3):
                body = {"profile": (PROFILE, "l40s-70b")[(i + round_) % 2]}
                started = time.perf_counter()
                try:
                    status = client.put(f"/v1/series/writer-{i}/deployment", json=body).status_code
                except httpx.HTTPError:
                    status = 0
                waits.append(time.perf_counter() - started)
                statuses.append(status)

    started = time.perf_counter()
    _run_all([lambda i=i: write(i) for i in range(WRITERS)])
    wall = time.perf_counter() - started
    waits.sort()
    bad = sum(s >= 500 or s == 0 for s in statuses)
    other = sorted({s for s in statuses if s != 200})
    return (
        f"{len(statuses) / wall:.1f} writes/s, p50 {waits[len(waits) // 2]:.2f} s, "
        f"p99 {waits[int(len(waits) * 0.99)]:.2f} s, 5xx/failed {bad}/{len(statuses)}"
        + (f" (statuses other than 200: {other})" if other else "")
    )


def loadtest_csv(mixes: int, levels: int, *, first_mix: int = 0) -> str:
    """A made-up sweep (latencies and throughput rising with load) of ``levels`` concurrencies
    at each of ``mixes`` prompt lengths, in the compact canonical columns."""
    lines = ["isl,osl,concurrency,request_throughput_rps,ttft_p95_s,itl_p95_s"]
    for m in range(first_mix, first_mix + mixes):
        prompt = 100 + 50 * m
        for n in range(1, levels + 1):
            ttft = 0.02 + 0.0001 * prompt * (1 + 40 * n / levels)
            tpot = 0.01 * (1 + 2.5 * n / levels)
            lines.append(f"{prompt},100,{n},{n / (ttft + 99 * tpot):.6g},{ttft:.6g},{tpot:.6g}")
    return "\n".join(lines) + "\n"


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def attack_rest_import(base_url: str, pid: int) -> str:
    files = [
        {"name": f"mix{m}.csv", "content": loadtest_csv(1, 20_000, first_mix=m)} for m in range(9)
    ]
    body = {"gpu_type": "TOY-GPU", "model": "toy-7b", "gpus_per_replica": 1, "files": files}
    before = _peak_rss_mb(pid)
    started = time.perf_counter()
    with httpx.Client(base_url=base_url, timeout=600, headers={"X-API-Key": KEY}) as client:
        response = client.put("/v1/gpu-profiles/rows-180k/loadtest", json=body)
    took = time.perf_counter() - started
    detail = response.json().get("detail", "") if response.status_code >= 400 else ""
    return (
        f"{response.status_code} after {took:.2f} s; server peak RSS {before:.0f} MB before, "
        f"{_peak_rss_mb(pid):.0f} MB after" + (f" ({str(detail)[:90]})" if detail else "")
    )


def attack_under_cap(base_url: str, pid: int) -> str:
    """90,000 rows (under the cap): the import, then the SLO capacity at an unmeasured mix
    (the model's fit and its range)."""
    files = [
        {"name": f"mix{m}.csv", "content": loadtest_csv(1, 10_000, first_mix=m)} for m in range(9)
    ]
    body = {"gpu_type": "TOY-GPU", "model": "toy-7b", "gpus_per_replica": 1, "files": files}
    query = {"prompt_tokens": 333, "completion_tokens": 100, "ttft_p95_s": 1, "tpot_p95_s": 0.03}
    with httpx.Client(base_url=base_url, timeout=600, headers={"X-API-Key": KEY}) as client:
        started = time.perf_counter()
        put = client.put("/v1/gpu-profiles/rows-90k/loadtest", json=body).status_code
        imported = time.perf_counter() - started
        started = time.perf_counter()
        get = client.get("/v1/gpu-profiles/rows-90k/slo-capacity", params=query).status_code
        fitted = time.perf_counter() - started
    return (
        f"import {put} after {imported:.2f} s, SLO capacity at 333/100 {get} after "
        f"{fitted:.2f} s; server peak RSS {_peak_rss_mb(pid):.0f} MB"
    )


def attack_cli_import(code: Path, url: str, tmp: str) -> str:
    path = Path(tmp) / "rows-1m.csv"
    path.write_text(loadtest_csv(10, 100_000))
    report = Path(tmp) / "maxrss"
    script = (
        "import resource, sys; from app.cli import main; code = main(sys.argv[1:]); "
        f"open({str(report)!r}, 'w').write(str(resource.getrusage(resource.RUSAGE_SELF)"
        ".ru_maxrss)); sys.exit(code)"
    )
    command = [sys.executable, "-c", script, "--database-url", url, "profile", "import"]
    command += [str(path), "--name", "rows-1m", "--gpu-type", "TOY-GPU", "--model", "toy-7b"]
    command += ["--gpus-per-replica", "1"]
    env = {**os.environ, "PYTHONPATH": str(code), "OMP_NUM_THREADS": "1"}
    started = time.perf_counter()
    done = subprocess.run(command, cwd=code, env=env, capture_output=True, text=True)
    took = time.perf_counter() - started
    rss = int(report.read_text()) / 1024 if report.exists() else float("nan")
    said = (done.stderr.strip().splitlines() or [""])[-1][:90]
    return (
        f"exit {done.returncode} after {took:.1f} s, peak RSS {rss:.0f} MB, "
        f"{path.stat().st_size / 1e6:.0f} MB file" + (f" ({said})" if said else "")
    )


def _run_all(jobs: list[Callable[[], None]]) -> None:
    threads = [threading.Thread(target=job) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)


def run(code: Path, seconds: float, label: str, attacks: set[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/abuse.db"
        env = {
            "GPUCAST_DATABASE_URL": url,
            "GPUCAST_API_KEYS": KEY,
            "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
        }
        if attacks & {1, 2, 3}:
            _seed(url)
            server = Server("app.api:create_app", workers=1, port=_free_port(), env=env, code=code)
            try:
                server.wait("/healthz")
                if 1 in attacks:
                    bodies = attack_bodies(server.base_url, seconds)
                    print(f"[{label}] 1. anonymous 19 MB bodies: {bodies}")
                if 2 in attacks:
                    reads = attack_reads(server.base_url, seconds, server.process.pid)
                    print(f"[{label}] 2. 45 abandoned heavy reads: {reads}")
                if 3 in attacks:
                    print(f"[{label}] 3. 45 SQLite writers: {attack_writers(server.base_url)}")
            finally:
                server.stop()
        if attacks & {4, 5}:
            # a fresh server on an empty database its own code migrates: its peak RSS is the
            # import's, and the CLI then imports into the same database
            env["GPUCAST_DATABASE_URL"] = url = f"sqlite:///{tmp}/loadtest.db"
            server = Server("app.api:create_app", workers=1, port=_free_port(), env=env, code=code)
            try:
                server.wait("/healthz")
                if 4 in attacks:
                    rest = attack_rest_import(server.base_url, server.process.pid)
                    print(f"[{label}] 4. 180,000-row REST import: {rest}", flush=True)
                    under = attack_under_cap(server.base_url, server.process.pid)
                    print(f"[{label}] 4b. 90,000-row REST import: {under}", flush=True)
            finally:
                server.stop()
        if 5 in attacks:
            print(f"[{label}] 5. 1,000,000-row CLI import: {attack_cli_import(code, url, tmp)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, help="another gpucast checkout, run first")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--attacks", default="1,2,3,4,5", help="which attacks, e.g. 4,5")
    args = parser.parse_args()
    attacks = {int(a) for a in args.attacks.split(",")}
    if args.baseline is not None:
        run(args.baseline.resolve(), args.seconds, "baseline", attacks)
    run(ROOT, args.seconds, "this tree", attacks)


if __name__ == "__main__":
    main()
