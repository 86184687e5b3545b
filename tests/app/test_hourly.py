"""The hourly loop against a real Prometheus: import the last complete hours of every source,
refresh the forecasts, record failures for /metrics; the scheduler runs it every hour.

The backfilled load (tests/support/prometheus.py) covers 2025-09-01 .. 2025-10-01, so the
cycles run with a clock set inside that month (``--now``; the scheduler's own clock in
``test_the_scheduler_runs_nightly_and_hourly_in_order``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select

from app.cli import forecast_commands, main
from app.db import Database
from app.db.models import ForecastRun, JobRun, Observation, Series, SeriesSource
from app.jobs import LockHeldError, job_lock
from app.jobs.hourly import run_hourly
from tests.support.pg_cluster import free_port
from tests.support.prometheus import (
    BASIC_AUTH_WEB_CONFIG,
    PROMPT,
    REQUESTS,
    START,
    PrometheusServer,
    running_prometheus,
)

FAST = "seasonal_naive,seasonal_ma"
DAY_15 = datetime(2025, 9, 15, tzinfo=UTC)  # hour index 336 of the backfill
TOKEN = "tok-9Hq2-secret"


def hour_index(hour: datetime) -> int:
    return int((hour.timestamp() - START) // 3600)


def set_source(database_url: str, series: str, url: str, requests: str, *extra: str) -> None:
    command = ["--database-url", database_url, "series", "source", series, "--url", url]
    assert main([*command, "--requests-query", requests, *extra]) == 0


def cycle(database_url: str, now: datetime) -> int:
    at = now.strftime("%Y-%m-%dT%H:%MZ")
    return main(["--database-url", database_url, "schedule", "--hourly-once", "--now", at])


def rows(database: Database, series: str) -> list[tuple]:
    with database.transaction() as session:
        found = session.execute(
            select(
                Observation.hour,
                Observation.requests,
                Observation.prompt_tokens,
                Observation.completion_tokens,
                Observation.total_tokens,
            )
            .join(Series, Series.id == Observation.series_id)
            .where(Series.name == series)
            .order_by(Observation.hour)
        ).all()
    return [tuple(row) for row in found]


def source_state(database: Database, series: str) -> SeriesSource:
    with database.transaction() as session:
        return session.scalars(
            select(SeriesSource)
            .join(Series, Series.id == SeriesSource.series_id)
            .where(Series.name == series)
        ).one()


def refresh_runs(database: Database) -> list[ForecastRun]:
    with database.transaction() as session:
        return list(
            session.scalars(
                select(ForecastRun).where(ForecastRun.kind == "refresh").order_by(ForecastRun.id)
            )
        )


def chat_source(database_url: str, url: str, *extra: str) -> None:
    tokens = ["--prompt-tokens-query", "gpucast_test_prompt_tokens"]
    tokens += ["--completion-tokens-query", "gpucast_test_prompt_tokens / 4"]
    set_source(database_url, "prod/chat", url, "gpucast_test_requests", *tokens, *extra)


def test_two_consecutive_hours_are_imported_and_refreshed(
    prometheus_server: PrometheusServer,
    database_url: str,
    database: Database,
    capsys: pytest.CaptureFixture[str],
) -> None:
    chat_source(database_url, prometheus_server.url, "--lookback", "336")
    # First cycle: a new source imports its whole lookback, 2025-09-01 .. 09-14 23:00.
    assert cycle(database_url, DAY_15 + timedelta(minutes=5)) == 0
    assert "import prod/chat: 336 hours, 2025-09-01T00:00Z .. 2025-09-14T23:00Z" in (
        capsys.readouterr().out
    )
    stored = rows(database, "prod/chat")
    assert [r[1] for r in stored] == REQUESTS[:336].astype(float).tolist()
    assert [r[2] for r in stored] == PROMPT[:336].astype(float).tolist()
    np.testing.assert_allclose([r[3] for r in stored], PROMPT[:336] / 4)
    np.testing.assert_allclose([r[4] for r in stored], PROMPT[:336] * 1.25)

    assert main(["--database-url", database_url, "forecast", "--all", "--models", FAST]) == 0
    with database.transaction() as session:
        nightly = dict(session.execute(select(ForecastRun.metric, ForecastRun.id)).all())
    assert set(nightly) == {"requests", "tokens"} and refresh_runs(database) == []
    capsys.readouterr()

    for step in (1, 2):  # 01:05 imports the 00:00 hour, 02:05 the 01:00 hour
        now = DAY_15 + timedelta(hours=step, minutes=5)
        assert cycle(database_url, now) == 0
        out = capsys.readouterr().out
        new_hour = DAY_15 + timedelta(hours=step - 1)
        hour = f"{new_hour:%Y-%m-%dT%H:%M}Z"
        assert f"import prod/chat: 1 hour, {hour} .. {hour}\n" in out
        assert "refreshed 2 forecasts" in out
        last = rows(database, "prod/chat")[-1]
        index = hour_index(new_hour)
        assert last[:3] == (new_hour, float(REQUESTS[index]), float(PROMPT[index]))
        runs = refresh_runs(database)[-2:]
        assert {(r.metric, r.status, r.parent_id) for r in runs} == {
            (metric, "complete", run_id) for metric, run_id in nightly.items()
        }
        assert {r.trained_until for r in runs} == {new_hour}

    # Later in the same hour: nothing new to import, nothing to refresh.
    assert cycle(database_url, DAY_15 + timedelta(hours=2, minutes=40)) == 0
    out = capsys.readouterr().out
    assert "import prod/chat: up to date" in out and "refreshed 0 forecasts" in out
    assert len(rows(database, "prod/chat")) == 338 and len(refresh_runs(database)) == 4
    with database.transaction() as session:
        jobs = session.scalars(select(JobRun).where(JobRun.name == "hourly")).all()
    assert [(j.status, j.items, j.failed) for j in jobs] == [("complete", 1, 0)] * 4


def test_a_failing_source_skips_only_its_series(
    prometheus_server: PrometheusServer,
    database_url: str,
    database: Database,
    client: TestClient,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = prometheus_server.url
    chat_source(database_url, url)
    set_source(database_url, "prod/pods", url, "gpucast_test_pod")  # two series
    set_source(database_url, "prod/typo", url, "sum(rate(gpucast_test_requests[1h]")
    set_source(database_url, "prod/down", f"http://127.0.0.1:{free_port()}", "up")
    # Requests are fine but a token query is not: one transaction, so nothing is stored.
    set_source(
        database_url, "prod/nan", url, "gpucast_test_requests", "--prompt-tokens-query",
        "gpucast_test_nan",
    )  # fmt: skip
    now = datetime(2025, 9, 1, 9, 5, tzinfo=UTC)  # nan at 06:00, pods only until 03:00
    assert cycle(database_url, now) == 1
    out = capsys.readouterr().out
    assert "import prod/chat: 9 hours, 2025-09-01T00:00Z .. 2025-09-01T08:00Z" in out
    assert "hourly cycle in" in out and "1 of 5 sources imported, 4 failures" in out
    assert len(rows(database, "prod/chat")) == 9
    expected = {
        "prod/pods": r"requests query: the query returned 2 series",
        "prod/typo": r"requests query: Prometheus rejected the query \(bad_data\)",
        "prod/down": r"requests query: cannot reach Prometheus at http://127\.0\.0\.1:",
        "prod/nan": r"prompt_tokens query: sample at 2025-09-01T06:00:00Z nan is not a finite",
    }
    for series, message in expected.items():
        assert rows(database, series) == []
        state = source_state(database, series)
        assert state.last_error is not None and re.search(message, state.last_error)
        assert (state.consecutive_failures, state.failures_total) == (1, 1)
        assert state.last_success_at is None
        assert f"import {series}: FAILED for 2025-08-30T09:00Z .. 2025-09-01T09:00Z: " in out

    assert cycle(database_url, now + timedelta(hours=1)) == 1
    capsys.readouterr()
    assert len(rows(database, "prod/chat")) == 10
    metrics = scrape(client)
    assert metrics["gpucast_source_import_failures"] == {
        "prod/chat": 0, "prod/down": 2, "prod/nan": 2, "prod/pods": 2, "prod/typo": 2
    }  # fmt: skip
    assert metrics["gpucast_source_imports_failed_total"]["prod/down"] == 2
    assert set(metrics["gpucast_source_last_success_timestamp_seconds"]) == {"prod/chat"}
    assert metrics["gpucast_hourly_last_run_failures"] == {"": 4}
    assert "gpucast_nightly_last_run_failures" not in metrics  # hourly runs are not nightly

    # Fixing a source clears its streak; the next cycle imports it.
    set_source(database_url, "prod/typo", url, "gpucast_test_requests")
    assert source_state(database, "prod/typo").consecutive_failures == 0
    assert cycle(database_url, now + timedelta(hours=2)) == 1
    # The default 48 h lookback reaches back before the first backfilled hour (00:00).
    assert len(rows(database, "prod/typo")) == 11
    assert scrape(client)["gpucast_source_import_failures"]["prod/typo"] == 0
    assert source_state(database, "prod/typo").failures_total == 2


def test_token_hours_without_requests_are_left_out(
    prometheus_server: PrometheusServer,
    database_url: str,
    database: Database,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The requests query drops the quiet hours; the tokens query has every hour.
    set_source(database_url, "prod/chat", prometheus_server.url, "gpucast_test_requests > 3000",
               "--prompt-tokens-query", "gpucast_test_prompt_tokens")  # fmt: skip
    assert cycle(database_url, DAY_15) == 0
    window = range(hour_index(DAY_15) - 48, hour_index(DAY_15))
    busy = [h for h in window if REQUESTS[h] > 3000]
    assert 0 < len(busy) < 48
    assert f"{48 - len(busy)} prompt_tokens hours without requests left out" in (
        capsys.readouterr().out
    )
    stored = rows(database, "prod/chat")
    assert [hour_index(r[0]) for r in stored] == busy
    assert [r[2] for r in stored] == PROMPT[busy].astype(float).tolist()


def scrape(client: TestClient) -> dict[str, dict[str, float]]:
    """``{sample name: {series label (or ""): value}}`` of the gpucast job gauges."""
    response = client.get("/metrics")
    assert response.status_code == 200
    found: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.name.startswith(("gpucast_source", "gpucast_hourly", "gpucast_nightly")):
                found.setdefault(sample.name, {})[sample.labels.get("series", "")] = sample.value
    return found


def test_refresh_waits_while_a_nightly_run_holds_its_lock(
    prometheus_server: PrometheusServer, database_url: str, database: Database
) -> None:
    chat_source(database_url, prometheus_server.url, "--lookback", "336")
    assert cycle(database_url, DAY_15) == 0
    assert main(["--database-url", database_url, "forecast", "--all", "--models", FAST]) == 0
    with job_lock(database, "nightly"):
        report = run_hourly(database, now=DAY_15 + timedelta(hours=1, minutes=5))
        assert [o.rows for o in report.imports] == [1]  # the import still runs
        skipped = "refresh and retention: a nightly run holds its lock"
        assert any(note.startswith(skipped) for note in report.skipped)
        assert report.refresh_lines == [] and not report.failed
        assert refresh_runs(database) == []
        # ... and it never stops a nightly run from starting: it only looked at the lock.
    report = run_hourly(database, now=DAY_15 + timedelta(hours=1, minutes=10))
    assert report.imports[0].status == "up to date"
    assert {r.trained_until for r in refresh_runs(database)} == {DAY_15}


def test_a_second_cycle_is_refused_while_one_runs(
    database_url: str, database: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    with job_lock(database, "hourly"):
        with pytest.raises(LockHeldError, match="another 'hourly' run holds the database lock"):
            run_hourly(database)
        assert cycle(database_url, DAY_15) == 4
    assert "another 'hourly' run holds the database lock" in capsys.readouterr().err
    assert cycle(database_url, DAY_15) == 0


# -- credentials -------------------------------------------------------------------------------


class _BearerProxy(BaseHTTPRequestHandler):
    """An authenticating reverse proxy in front of Prometheus (as oauth2-proxy or an ingress
    would be): requests without ``Authorization: Bearer TOKEN`` get a 401."""

    upstream = ""

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self.send_response(401)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(b"unauthorized\n")
            return
        upstream = httpx.get(self.upstream + self.path, timeout=10)
        self.send_response(upstream.status_code)
        self.send_header("Content-Type", upstream.headers.get("content-type", "text/plain"))
        self.end_headers()
        self.wfile.write(upstream.content)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def bearer_proxy(prometheus_server: PrometheusServer) -> Iterator[str]:
    handler = type("Proxy", (_BearerProxy,), {"upstream": prometheus_server.url})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join(timeout=10)
    server.server_close()


def test_the_bearer_token_is_sent_and_never_shown(
    bearer_proxy: str,
    database_url: str,
    database: Database,
    client: TestClient,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PROM_TOKEN", TOKEN)
    monkeypatch.setenv("WRONG_TOKEN", TOKEN[::-1])
    set_source(database_url, "prod/ok", bearer_proxy, "gpucast_test_requests",
               "--bearer-token-env", "PROM_TOKEN")  # fmt: skip
    set_source(database_url, "prod/denied", bearer_proxy, "gpucast_test_requests",
               "--bearer-token-env", "WRONG_TOKEN")  # fmt: skip
    assert cycle(database_url, DAY_15) == 1
    assert len(rows(database, "prod/ok")) == 48 and rows(database, "prod/denied") == []
    error = source_state(database, "prod/denied").last_error
    assert error is not None and "HTTP 401" in error
    assert main(["--database-url", database_url, "series", "source", "prod/denied"]) == 0
    shown = capsys.readouterr()
    api = client.get("/v1/series/prod/denied/source").text + client.get("/metrics").text
    for text in (shown.out, shown.err, error, api):
        assert TOKEN not in text and TOKEN[::-1] not in text


def test_basic_auth_in_the_url_is_used_and_never_shown(
    tmp_path: Path,
    database_url: str,
    database: Database,
    client: TestClient,
    capsys: pytest.CaptureFixture[str],
) -> None:
    end_of = [START + 3600 * (h + 1) for h in range(48)]
    metrics = "# TYPE gpucast_test_requests gauge\n"
    metrics += "".join(f"gpucast_test_requests {REQUESTS[h]} {t}\n" for h, t in enumerate(end_of))
    metrics += "# EOF\n"
    with running_prometheus(tmp_path, metrics, web_config=BASIC_AUTH_WEB_CONFIG) as prom:
        host = prom.url.removeprefix("http://")
        for series, password in (("prod/ok", "prom-secret"), ("prod/bad", "n0t-it")):
            url = f"http://gpucast:{password}@{host}"
            set_source(database_url, series, url, "gpucast_test_requests")
        assert cycle(database_url, datetime(2025, 9, 3, tzinfo=UTC)) == 1
    out = capsys.readouterr().out
    assert [r[1] for r in rows(database, "prod/ok")] == REQUESTS[:48].astype(float).tolist()
    assert rows(database, "prod/bad") == []
    error = source_state(database, "prod/bad").last_error
    assert error is not None and "HTTP 401" in error and f"http://{host}" in error
    shown = client.get("/v1/series/prod/bad/source").json()
    assert shown["url"] == f"http://gpucast:***@{host}"
    for text in (out, error, str(shown)):
        assert "prom-secret" not in text and "n0t-it" not in text


# -- the scheduler -----------------------------------------------------------------------------


class FakeClock:
    """The scheduler's clock: sleeping moves it on, runs take no time."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def sleep(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def test_the_scheduler_runs_nightly_and_hourly_in_order(
    prometheus_server: PrometheusServer,
    database_url: str,
    database: Database,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    chat_source(database_url, prometheus_server.url, "--lookback", "336")
    clock = FakeClock(DAY_15 + timedelta(minutes=58))
    monkeypatch.setattr(forecast_commands, "_now", lambda: clock.now)
    monkeypatch.setattr(forecast_commands, "_sleep", clock.sleep)
    command = ["--database-url", database_url, "schedule", "--cron", "0 2 * * *"]
    assert main([*command, "--max-runs", "4", "--models", FAST, "--workers", "1"]) == 0
    out = capsys.readouterr().out
    announced = [line for line in out.splitlines() if line.startswith("gpucast schedule: next")]
    assert announced == [
        "gpucast schedule: next hourly cycle at 2025-09-15 01:05Z",
        "gpucast schedule: next nightly forecast at 2025-09-15 02:00Z",
        "gpucast schedule: next hourly cycle at 2025-09-15 02:05Z",
        "gpucast schedule: next hourly cycle at 2025-09-15 03:05Z",
    ]
    assert out.count("hourly cycle finished with exit code 0") == 3
    assert "run finished with exit code 0" in out
    # 01:05 imported up to the 00:00 hour, the 02:00 nightly fitted it, 02:05 and 03:05
    # imported the 01:00 and 02:00 hours and refreshed the new fit on them.
    assert rows(database, "prod/chat")[-1][0] == DAY_15 + timedelta(hours=2)
    assert sorted({r.trained_until for r in refresh_runs(database)}) == [
        DAY_15 + timedelta(hours=1),
        DAY_15 + timedelta(hours=2),
    ]


def test_a_failing_cycle_does_not_stop_the_scheduler(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock(DAY_15)
    monkeypatch.setattr(forecast_commands, "_now", lambda: clock.now)
    monkeypatch.setattr(forecast_commands, "_sleep", clock.sleep)
    down = ["--database-url", f"postgresql://postgres@127.0.0.1:{free_port()}/none"]
    assert main([*down, "schedule", "--max-runs", "2", "--hourly-minute", "30"]) == 0
    err = capsys.readouterr().err
    assert err.count("gpucast schedule: hourly cycle failed: OperationalError") == 2


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--hourly-minute", "60"], "--hourly-minute must be 0..59, got 60"),
        (["--refresh-retention-days", "0"], "--refresh-retention-days must be positive"),
        (["--nightly-retention-days", "-1"], "--nightly-retention-days must be positive"),
    ],
)
def test_schedule_options_are_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str], message: str
) -> None:
    db = ["--database-url", f"sqlite:///{tmp_path / 'x.db'}"]
    assert main([*db, "schedule", *options]) == 2
    assert capsys.readouterr().err == f"gpucast: error: {message}\n"
