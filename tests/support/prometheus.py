"""A real Prometheus server with backfilled hourly load, for the import tests.

The server is the Debian ``prometheus`` package: 30 days of hourly samples are backfilled with
``promtool tsdb create-blocks-from openmetrics`` before it starts, so they are loaded as blocks.
:func:`prometheus_server` is a session fixture (registered in ``tests/app/conftest.py``);
:func:`running_prometheus` starts another one, e.g. with a web config that requires auth.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.support.pg_cluster import free_port

START = 1_756_684_800  # 2025-09-01T00:00Z
HOURS = 30 * 24
STARTUP_TIMEOUT_S = 30


def _hourly_load() -> tuple[np.ndarray, np.ndarray]:
    """Requests (multiples of 4) and prompt tokens per hour, with a daily cycle."""
    rng = np.random.default_rng(5)
    hours = np.arange(HOURS)
    base = 4_000 + 3_000 * np.sin(2 * np.pi * (hours % 24) / 24)
    requests = (np.round(base * rng.uniform(0.8, 1.2, HOURS) / 4) * 4).astype(int)
    prompt = requests * rng.integers(300, 500, HOURS)
    return requests, prompt


REQUESTS, PROMPT = _hourly_load()


def openmetrics() -> str:
    """Gauges sampled at the end of each hour, a counter every 15 min, and bad series."""
    end_of = [START + 3600 * (h + 1) for h in range(HOURS)]
    lines = ["# TYPE gpucast_test_requests gauge"]
    lines += [f"gpucast_test_requests {v} {t}" for v, t in zip(REQUESTS, end_of, strict=True)]
    lines.append("# TYPE gpucast_test_prompt_tokens gauge")
    lines += [f"gpucast_test_prompt_tokens {v} {t}" for v, t in zip(PROMPT, end_of, strict=True)]
    # A counter whose increase over (t - 1h, t] is the hour's requests.
    lines.append("# TYPE gpucast_test_served counter")
    total = 0
    lines.append(f"gpucast_test_served_total 0 {START}")
    for quarter in range(1, HOURS * 4 + 1):
        total += REQUESTS[(quarter - 1) // 4] // 4
        lines.append(f"gpucast_test_served_total {total} {START + 900 * quarter}")
    lines.append("# TYPE gpucast_test_pod gauge")
    for h in range(3):
        lines += [f'gpucast_test_pod{{pod="{p}"}} 1 {end_of[h]}' for p in ("a", "b")]
    lines.append("# TYPE gpucast_test_nan gauge")
    lines += [f"gpucast_test_nan {'NaN' if h == 5 else 1} {end_of[h]}" for h in range(10)]
    lines.append("# TYPE gpucast_test_negative gauge")
    lines += [f"gpucast_test_negative {-1 if h == 3 else 1} {end_of[h]}" for h in range(10)]
    return "\n".join([*lines, "# EOF", ""])


@dataclass(frozen=True)
class PrometheusServer:
    url: str


@contextmanager
def running_prometheus(
    root: Path, metrics: str, *, web_config: str | None = None
) -> Iterator[PrometheusServer]:
    """Backfill ``metrics`` (OpenMetrics text) into a TSDB under ``root`` and serve it."""
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if not prometheus or not promtool:
        pytest.skip("needs prometheus and promtool (Debian package 'prometheus'; CI installs it)")
    source, data = root / "backfill.om", root / "data"
    source.write_text(metrics)
    subprocess.run(
        # Large blocks: with the default 2 h blocks promtool writes 360 of them (~30 s).
        [promtool, "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=800h"]
        + [str(source), str(data)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    (root / "prometheus.yml").write_text("global:\n  scrape_interval: 1h\nscrape_configs: []\n")
    url = f"http://127.0.0.1:{free_port()}"
    command = [
        prometheus,
        f"--config.file={root / 'prometheus.yml'}",
        f"--storage.tsdb.path={data}",
        "--storage.tsdb.retention.time=10y",
        f"--web.listen-address={url.removeprefix('http://')}",
    ]
    auth = None
    if web_config is not None:
        (root / "web.yml").write_text(web_config)
        command.append(f"--web.config.file={root / 'web.yml'}")
        auth = httpx.BasicAuth("gpucast", "prom-secret")
    log = (root / "prometheus.log").open("wb")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_ready(url, process, root / "prometheus.log", auth)
        yield PrometheusServer(url=url)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log.close()


# basic auth for user "gpucast", password "prom-secret" (bcrypt, cost 4: fast to check)
BASIC_AUTH_WEB_CONFIG = (
    "basic_auth_users:\n  gpucast: $2b$04$wQ5StVFzZaiwl5I94m0PBuKiUWkU5ZrJ8ntvVrSzUqbM9wPD8WbUS\n"
)


def _wait_ready(
    url: str, process: subprocess.Popen[bytes], log: Path, auth: httpx.Auth | None
) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"prometheus exited with {process.returncode}:\n{log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/-/ready", timeout=1, auth=auth).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    pytest.fail(f"prometheus not ready after {STARTUP_TIMEOUT_S} s:\n{log.read_text()[-2000:]}")


@pytest.fixture(scope="session")
def prometheus_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    with running_prometheus(tmp_path_factory.mktemp("prometheus"), openmetrics()) as server:
        yield server
