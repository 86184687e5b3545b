"""A network path to PostgreSQL that silently drops every byte (a TCP proxy the test controls,
in front of the real server): with a warm pool every request answers 503 JSON with
Retry-After within 10 s, database waits of every kind end by their bound, the CLI exits with
code 3 and one line, and the same server serves normally again once the path heals."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pandas as pd
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, OperationalError

from app import ingest
from app.cli import main
from app.db import Database, DatabaseTimeouts, open_database
from app.jobs import ForecastOptions, run_forecasts
from app.settings import get_settings
from tests.app.conftest import _truncate_postgres
from tests.app.test_jobs import daily_load
from tests.support.server import LiveServer
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.postgres

SERIES = "prod/chat"
PROFILE = {
    "name": "h100",
    "gpu_type": "H100-80G",
    "model": "llama-3.1-70b",
    "tokens_per_s_per_gpu": 2400,
    "gpus_per_replica": 2,
    "usd_per_hour_on_demand": 2.5,
}
ANSWER_WITHIN_S = 10.0
FAST = ForecastOptions(models=("seasonal_naive",), workers=1)


@pytest.fixture
def pg_url(postgres_migrated: str) -> str:
    _truncate_postgres(postgres_migrated)
    return postgres_migrated


@pytest.fixture
def proxy(pg_url: str) -> Iterator[TcpProxy]:
    url = make_url(pg_url)
    with TcpProxy(url.host or "127.0.0.1", url.port or 5432) as running:
        yield running


@pytest.fixture
def proxied_url(pg_url: str, proxy: TcpProxy) -> str:
    url = make_url(pg_url).set(host="127.0.0.1", port=proxy.port)
    return url.render_as_string(hide_password=False)


def csv_hours(start: str, hours: int, value: float = 3600.0) -> bytes:
    stamps = pd.date_range(start, periods=hours, freq="h")
    rows = [f"{s:%Y-%m-%dT%H:00:00Z},{value}" for s in stamps]
    return ("timestamp,requests\n" + "\n".join(rows) + "\n").encode()


_NEW = itertools.count()
# Every kind of request the service answers from the database, reads and writes.
REQUESTS: dict[str, Callable[[httpx.Client], httpx.Response]] = {
    "readyz": lambda c: c.get("/readyz"),
    "series list": lambda c: c.get("/v1/series"),
    "series read": lambda c: c.get(f"/v1/series/{SERIES}"),
    "history read": lambda c: c.get(f"/v1/series/{SERIES}/observations"),
    "forecast read": lambda c: c.get(f"/v1/series/{SERIES}/forecast"),
    "capacity read": lambda c: c.get(f"/v1/series/{SERIES}/capacity", params={"profile": "h100"}),
    "profiles read": lambda c: c.get("/v1/gpu-profiles"),
    "ingest write": lambda c: c.post(
        f"/v1/series/{SERIES}/observations",
        content=csv_hours("2026-10-22T00:00Z", 24),
        headers={"Content-Type": "text/csv"},
    ),
    "series create": lambda c: c.post("/v1/series", json={"name": f"prod/new-{next(_NEW)}"}),
}
EXPECTED_OK = {"series create": 201}


def timed(client: httpx.Client, name: str) -> tuple[str, httpx.Response | None, float, str]:
    started = time.monotonic()
    try:
        response: httpx.Response | None = REQUESTS[name](client)
        error = ""
    except httpx.HTTPError as exc:  # the client's own 30 s timeout: a hang
        response, error = None, f"{type(exc).__name__}: {exc}"
    return name, response, time.monotonic() - started, error


def all_at_once(base_url: str) -> list[tuple[str, httpx.Response | None, float, str]]:
    with (
        httpx.Client(base_url=base_url, timeout=30) as client,
        ThreadPoolExecutor(len(REQUESTS)) as pool,
    ):
        return list(pool.map(lambda name: timed(client, name), REQUESTS))


def assert_unavailable(answers: list[tuple[str, httpx.Response | None, float, str]]) -> None:
    problems = []
    for name, response, elapsed, error in answers:
        if response is None:
            problems.append(f"{name}: no answer after {elapsed:.1f} s ({error})")
            continue
        if elapsed >= ANSWER_WITHIN_S:
            problems.append(f"{name}: answered after {elapsed:.1f} s")
        if response.status_code != 503 or "retry-after" not in response.headers:
            problems.append(f"{name}: {response.status_code} {response.text[:120]}")
        elif not isinstance(response.json().get("detail"), str):
            problems.append(f"{name}: body {response.text[:120]}")
    print({name: round(elapsed, 2) for name, _, elapsed, _ in answers})
    assert not problems, problems


def assert_serving(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=30) as client:
        for name in REQUESTS:
            response = REQUESTS[name](client)
            assert response.status_code == EXPECTED_OK.get(name, 200), (name, response.text)


def test_partition_with_a_warm_pool_answers_503_within_10_s_and_recovers(
    pg_url: str, proxy: TcpProxy, proxied_url: str
) -> None:
    direct = open_database(pg_url)
    try:
        with direct.transaction() as session:
            ingest.store(session, daily_load().assign(series=SERIES), create_series=True)
        run_forecasts(direct, FAST)
    finally:
        direct.dispose()
    # The response cache would answer repeated plan reads without the database: off here.
    settings = get_settings(database_url=proxied_url, auto_migrate=False, read_cache_ttl_s=0)
    with LiveServer(settings) as base_url:
        with httpx.Client(base_url=base_url, timeout=30) as client:
            assert client.post("/v1/gpu-profiles", json=PROFILE).status_code == 201
        assert_serving(base_url)
        # Warm: several connections pooled and idle, all made before the partition.
        warm = all_at_once(base_url)
        assert all(r is not None and r.status_code < 500 for _, r, _, _ in warm), warm
        assert proxy.accepted >= 3, "the pool should hold several connections"
        dropped_before = proxy.dropped_bytes

        proxy.blackhole()
        assert_unavailable(all_at_once(base_url))  # warm pool: each ping must time out
        assert_unavailable(all_at_once(base_url))  # pool discarded: each connect times out
        assert proxy.dropped_bytes > dropped_before, "the requests never reached the proxy"

        proxy.restore()
        deadline = time.monotonic() + 15
        with httpx.Client(base_url=base_url, timeout=30) as client:
            while client.get("/readyz").status_code != 200:
                assert time.monotonic() < deadline, "the server did not recover by itself"
                time.sleep(0.2)
        assert_serving(base_url)


SHORT = DatabaseTimeouts(connect_s=2, statement_s=2.0, pool_s=2.0)


@pytest.fixture
def bounded(proxied_url: str) -> Iterator[Database]:
    database = open_database(proxied_url, timeouts=SHORT)
    yield database
    database.dispose()


def _blackhole_during(proxy: TcpProxy, action: Callable[[], Any], *, after_s: float) -> float:
    """Run ``action`` (which must fail), black-holing the path ``after_s`` into it; seconds it
    took."""
    timer = threading.Timer(after_s, proxy.blackhole)
    started = time.monotonic()
    timer.start()
    try:
        with pytest.raises(OperationalError):
            action()
    finally:
        timer.cancel()
    return time.monotonic() - started


def test_a_statement_in_flight_ends_by_the_reply_bound(bounded: Database, proxy: TcpProxy) -> None:
    with bounded.engine.connect() as connection:
        connection.execute(text("SELECT 1"))

        def sleep_on_server() -> None:
            connection.execute(text("SELECT pg_sleep(1)"))

        elapsed = _blackhole_during(proxy, sleep_on_server, after_s=0.3)
    assert elapsed < SHORT.statement_s + 2, elapsed
    assert elapsed >= SHORT.statement_s, "ended before the bound: not by the bound"


@pytest.mark.parametrize("stage", ["commit", "copy", "read"])
def test_every_kind_of_wait_in_a_transaction_is_bounded(
    bounded: Database, proxy: TcpProxy, stage: str
) -> None:
    from app.ingest.writer import _copy

    def work() -> None:
        with bounded.transaction() as session:
            session.execute(text("CREATE TEMPORARY TABLE t (x int)"))
            proxy.blackhole()
            if stage == "copy":
                _copy(session, "COPY t (x) FROM STDIN", b"1\n2\n")
            elif stage == "read":
                session.execute(text("SELECT count(*) FROM t")).scalar()
            # commit: the COMMIT itself is the first wait after the partition

    elapsed = _blackhole_during(proxy, work, after_s=3600)
    assert elapsed < SHORT.reply_s + 2, (stage, elapsed)  # type: ignore[operator]


def test_a_warm_pool_fails_its_ping_then_the_connect_both_bounded(
    bounded: Database, proxy: TcpProxy
) -> None:
    bounded.ping()
    proxy.blackhole()
    started = time.monotonic()
    with pytest.raises(OperationalError, match="connection timeout expired|timeout"):
        bounded.ping()
    elapsed = time.monotonic() - started
    assert elapsed < SHORT.ping_s + SHORT.connect_s + 2, elapsed
    proxy.restore()
    bounded.ping()  # a new connection through the healed path


def test_the_server_cancels_a_slow_statement_first_and_the_connection_survives(
    bounded: Database,
) -> None:
    with bounded.engine.connect() as connection:
        started = time.monotonic()
        with pytest.raises(OperationalError, match="statement timeout"):
            connection.execute(text("SELECT pg_sleep(10)"))
        assert time.monotonic() - started < SHORT.statement_s + 1
        connection.rollback()
        assert connection.execute(text("SELECT 1")).scalar() == 1
        assert not connection.invalidated


def test_session_settings_reach_the_server(pg_url: str) -> None:
    url = make_url(pg_url).update_query_dict({"options": "-c application_name=gpucast-test"})
    timeouts = DatabaseTimeouts(statement_s=7.5, idle_in_transaction_s=42, tcp_s=12)
    database = open_database(url.render_as_string(hide_password=False), timeouts=timeouts)
    try:
        with database.engine.connect() as connection:
            shown = {
                name: connection.execute(text(f"SHOW {name}")).scalar()
                for name in (
                    "statement_timeout",
                    "idle_in_transaction_session_timeout",
                    "application_name",
                )
            }
    finally:
        database.dispose()
    assert shown == {
        "statement_timeout": "7500ms",
        "idle_in_transaction_session_timeout": "42s",
        "application_name": "gpucast-test",
    }


def test_idle_in_transaction_sessions_are_ended_by_the_server(pg_url: str) -> None:
    timeouts = DatabaseTimeouts(idle_in_transaction_s=0.5)
    database = open_database(pg_url, timeouts=timeouts)
    try:
        with (
            pytest.raises(DBAPIError, match="idle-in-transaction timeout") as ended,
            database.transaction() as session,
        ):
            session.execute(text("SELECT 1"))
            time.sleep(1.5)
            session.execute(text("SELECT 1"))
        assert ended.value.connection_invalidated  # so the API answers 503, the CLI exits 3
        database.ping()  # the pool replaced the ended session
    finally:
        database.dispose()


@pytest.mark.parametrize(
    "command",
    [["series", "list"], ["db", "upgrade"], ["forecast", "--all", "--workers", "1"]],
)
def test_cli_against_a_blackholed_database_exits_3_with_one_line(
    proxied_url: str,
    proxy: TcpProxy,
    command: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    proxy.blackhole()
    started = time.monotonic()
    code = main(["--database-url", proxied_url, *command])
    elapsed = time.monotonic() - started
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3, err
    assert len(err) == 1 and err[0].startswith("gpucast: error: database unavailable"), err
    assert elapsed < 10, elapsed


def test_nightly_job_partitioned_mid_run_exits_3_in_bounded_time(
    pg_url: str,
    proxy: TcpProxy,
    proxied_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    direct = open_database(pg_url)
    try:
        for index in range(3):
            with direct.transaction() as session:
                frame = daily_load(seed=index).assign(series=f"prod/s{index}")
                ingest.store(session, frame, create_series=True)
    finally:
        direct.dispose()
    from app.jobs import nightly

    real_execute = nightly.execute

    def partition_after_loading(items: Any, options: Any) -> Iterator[Any]:
        proxy.blackhole()  # the history is loaded; the lock connection is idle in the pool
        yield from real_execute(items, options)

    monkeypatch.setattr(nightly, "execute", partition_after_loading)
    monkeypatch.setenv("GPUCAST_DB_JOB_STATEMENT_TIMEOUT_S", "2")
    started = time.monotonic()
    code = main(
        [
            "--database-url",
            proxied_url,
            "forecast",
            "--all",
            "--workers",
            "1",
            "--models",
            "seasonal_naive",
        ]
    )
    elapsed = time.monotonic() - started
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3, err
    assert err[-1].startswith("gpucast: error: database unavailable"), err
    assert elapsed < 30, elapsed
