"""The overview page in a real browser: headless Debian Chromium against a live server.

The page counts its chart images that loaded into ``data-images-loaded`` on ``<body>``;
Chromium's ``--dump-dom`` shows the DOM after the page settled, so the test reads the count.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import uvicorn

from app import ingest
from app.api import create_app
from app.db import open_database
from app.db.models import GpuProfile
from app.jobs import ForecastOptions, run_forecasts
from app.settings import get_settings

CHROMIUM = Path("/usr/bin/chromium")
SERIES = ("prod-us/llama-3.1-70b", "team-a/chat+v2@eu")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="needs Debian chromium at /usr/bin/chromium (apt-get install chromium; "
    ".ci/system-deps installs it in CI)",
)


def _hourly(level: float, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    hours = pd.date_range("2026-11-01T00:00Z", periods=14 * 24, freq="h")
    shape = 1 + 0.5 * np.sin(2 * np.pi * (hours.hour.to_numpy() - 8) / 24)
    requests = level * shape * rng.lognormal(0, 0.03, len(hours))
    return pd.DataFrame(
        {
            "hour": hours,
            "requests": requests,
            "prompt_tokens": requests * 800,
            "completion_tokens": requests * 200,
            "total_tokens": requests * 1000,
            "peak_rps": requests / 1800,
        }
    )


@pytest.fixture
def browser_db_url(sqlite_template: Path, tmp_path: Path) -> str:
    """A SQLite database with two forecasted series and a GPU profile."""
    path = tmp_path / "browser.db"
    shutil.copy(sqlite_template, path)
    url = f"sqlite:///{path}"
    database = open_database(url)
    with database.transaction() as session:
        for seed, name in enumerate(SERIES):
            frame = _hourly(36_000.0 / (seed + 1), seed).assign(series=name)
            ingest.store(session, frame, create_series=True)
        session.add(
            GpuProfile(
                name="h100-70b",
                gpu_type="H100-80G",
                model="llama-3.1-70b",
                tokens_per_s_per_gpu=2000.0,
                gpus_per_replica=2,
            )
        )
    options = ForecastOptions(models=("seasonal_naive", "seasonal_ma"), workers=1)
    report = run_forecasts(database, options, lock=False)
    database.dispose()
    assert not report.failed
    return url


@pytest.fixture
def base_url(browser_db_url: str) -> Iterator[str]:
    """gpucast served by uvicorn on a free loopback port in a background thread."""
    settings = get_settings(database_url=browser_db_url, auto_migrate=False)
    config = uvicorn.Config(
        create_app(settings), log_level="warning", lifespan="on", ws="none", http="h11"
    )
    server = uvicorn.Server(config)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "server did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()
        assert not thread.is_alive(), "server did not stop"


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "chromium-profile"
    command = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--window-size=1280,1800",
        "--hide-scrollbars",
        # Wait (in virtual time, which stops while requests are pending) for the images.
        "--virtual-time-budget=15000",
        *args,
    ]
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    return subprocess.run(command, capture_output=True, text=True, timeout=45, env=env, check=False)


def test_overview_charts_load_in_headless_chromium(base_url: str, tmp_path: Path) -> None:
    result = chromium(tmp_path, "--dump-dom", f"{base_url}/")
    assert result.returncode == 0, result.stderr[-2000:]
    body = re.search(r"<body[^>]*>", result.stdout)
    assert body, result.stdout[:2000]
    attrs = dict(re.findall(r'(data-images-[a-z]+)="(\d+)"', body.group(0)))
    assert attrs == {
        "data-images-total": "2",
        "data-images-loaded": "2",
        "data-images-failed": "0",
    }, body.group(0)
    assert 'class="card chart-failed"' not in result.stdout
    for name in SERIES:
        assert f"<h2>{name}</h2>" in result.stdout

    shot = tmp_path / "overview.png"
    result = chromium(tmp_path, f"--screenshot={shot}", f"{base_url}/")
    assert result.returncode == 0, result.stderr[-2000:]
    png = shot.read_bytes()
    assert png[:8] == PNG_SIGNATURE and len(png) > 30_000
    from matplotlib.image import imread

    pixels = imread(shot)
    assert pixels.shape[:2] == (1800, 1280)
    # Not a blank page: many distinct colours (dark header, cards, drawn charts).
    assert len(np.unique(pixels.reshape(-1, pixels.shape[-1])[::7], axis=0)) > 50
