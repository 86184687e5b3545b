"""The overview page in a real browser: headless Debian Chromium against a live server.

The page counts its chart images that loaded into ``data-images-loaded`` on ``<body>``;
Chromium's ``--dump-dom`` shows the DOM after the page settled, so the test reads the count.
The pool card is read from the same DOM (its figures against the live REST pool plan, its
user strings parsed as text) and found in a screenshot by its blue top border.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import uvicorn

from app import ingest, pools
from app.api import create_app
from app.db import open_database
from app.db.models import GpuProfile
from app.jobs import ForecastOptions, run_forecasts
from app.settings import get_settings

CHROMIUM = Path("/usr/bin/chromium")
SERIES = ("prod-us/llama-3.1-70b", "team-a/chat+v2@eu")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
POOL = "fleet/h100+eu"
POOL_GPU_TYPE = '<img src=x onerror="alert(1)"> & H100'  # user text: must stay text
POOL_BORDER = (37, 99, 235)  # .pool-card's top border, #2563eb

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
    """A SQLite database with two forecasted series, a GPU profile and a pool of both (on a
    second profile whose GPU type is hostile text)."""
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
        session.add(
            GpuProfile(
                name="h100-pool",
                gpu_type=POOL_GPU_TYPE,
                model="llama-3.1-70b",
                tokens_per_s_per_gpu=2000.0,
                gpus_per_replica=2,
            )
        )
    options = ForecastOptions(models=("seasonal_naive", "seasonal_ma"), workers=1)
    report = run_forecasts(database, options, lock=False)
    fields = pools.PoolFields.model_validate(
        {
            "gpu_type": POOL_GPU_TYPE,
            "node_prices": {"on_demand_usd_per_hour": 20.0, "reserved_usd_per_hour": 12.0},
            "members": [
                {"series": SERIES[0], "profile": "h100-pool", "priority": "critical"},
                {"series": SERIES[1], "profile": "h100-pool", "priority": "batch"},
            ],
        }
    )
    with database.transaction() as session:
        pools.create_pool(session, name=POOL, fields=fields)
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


def test_the_pool_card_renders_in_headless_chromium(base_url: str, tmp_path: Path) -> None:
    result = chromium(tmp_path, "--dump-dom", f"{base_url}/")
    assert result.returncode == 0, result.stderr[-2000:]
    dom = result.stdout
    match = re.search(r'<section class="([^"]*)" data-pool="([^"]*)">(.*?)</section>', dom, re.S)
    assert match, dom[:3000]
    classes, name, card = match.groups()
    # the history ends 2026-11-14: the members' plans are stale and the plan lies in the past
    assert (classes, name) == ("card pool-card stale-plan", POOL)
    assert f"<h2>pool {POOL}</h2>" in card
    # the band auto choices are not stored yet: the card sizes on hi_80, as this plan does
    with urllib.request.urlopen(f"{base_url}/v1/pools/{POOL}/plan?band=hi_80") as response:
        plan = json.load(response)
    first = f"{pd.Timestamp(plan['hours'][0]['hour']):%Y-%m-%d %H:%M} UTC"
    assert (
        f'<span class="stale">now is outside the plan</span>; peak {plan["peak_nodes"]} over '
        f"the plan's 24 h from {first}"
    ) in card
    assert f'<span class="peak">${plan["total_cost_usd"]:,.2f}</span>' in card
    assert f"({plan['node_hours']} node-hours)" in card
    rows = re.findall(r'<tr data-member="([^"]*)">(.*?)</tr>', card, re.S)
    assert [member for member, _ in rows] == list(SERIES)
    # the hostile GPU type was parsed as text, never as an element
    assert '8 &lt;img src=x onerror="alert(1)"&gt; &amp; H100 GPUs per node' in card
    assert "<img src" not in dom

    shot = tmp_path / "pools.png"
    result = chromium(tmp_path, f"--screenshot={shot}", f"{base_url}/")
    assert result.returncode == 0, result.stderr[-2000:]
    from matplotlib.image import imread

    pixels = (imread(shot)[:, :, :3] * 255).round().astype(int)
    border = (np.abs(pixels - np.array(POOL_BORDER)) <= 2).all(axis=2)
    # the pool card comes first, laid out across the page under the header: its blue border
    # is a line of most of the window's width near the top
    rows_with_border = np.flatnonzero(border.sum(axis=1) > 1000)
    assert len(rows_with_border) >= 3, border.sum(axis=1).max()
    assert 40 < rows_with_border[0] < 200, rows_with_border
