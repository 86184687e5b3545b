"""``gpucast ingest prometheus`` against a real Prometheus server.

The server (``prometheus_server``, tests/support/prometheus.py) is the Debian ``prometheus``
package with 30 days of hourly samples backfilled as blocks.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import httpx
import numpy as np
import pandas as pd
import pytest
from sqlalchemy import select

from app.cli import main
from app.db import open_database
from app.db.models import Observation, Series
from app.errors import InputError
from app.ingest.prometheus import (
    PrometheusQueryError,
    PrometheusUnavailableError,
    RangeQuery,
    fetch_hourly,
    parse_time,
)
from tests.support.pg_cluster import free_port as _free_port
from tests.support.prometheus import HOURS, PROMPT, REQUESTS, START, PrometheusServer

RANGE = ["--start", "2025-09-01T00:00:00Z", "--end", "2025-10-01T00:00:00Z"]


def _import(url: str, database_url: str, query: str, *extra: str, metric: str = "requests") -> int:
    return main(
        [
            "--database-url",
            database_url,
            "ingest",
            "prometheus",
            "--url",
            url,
            "--query",
            query,
            "--series",
            "prod/chat",
            "--metric",
            metric,
            *extra,
        ]
    )


def _rows(database_url: str) -> list[tuple]:
    database = open_database(database_url)
    with database.transaction() as session:
        rows = session.execute(
            select(
                Observation.hour,
                Observation.requests,
                Observation.prompt_tokens,
                Observation.completion_tokens,
                Observation.total_tokens,
                Observation.peak_rps,
            )
            .join(Series, Series.id == Observation.series_id)
            .where(Series.name == "prod/chat")
            .order_by(Observation.hour)
        ).all()
    database.dispose()
    return [tuple(row) for row in rows]


def _hour(h: int) -> float:
    return START + 3600 * h


def test_imports_every_backfilled_hour_idempotently(
    prometheus_server: PrometheusServer, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _import(prometheus_server.url, database_url, "gpucast_test_requests", *RANGE) == 0
    assert "wrote 720 hourly rows" in capsys.readouterr().out
    first = _rows(database_url)
    assert [row[0].timestamp() for row in first] == [_hour(h) for h in range(HOURS)]
    assert [row[1] for row in first] == REQUESTS.astype(float).tolist()
    assert all(value is None for row in first for value in row[2:])

    assert _import(prometheus_server.url, database_url, "gpucast_test_requests", *RANGE) == 0
    assert _rows(database_url) == first


def test_token_import_keeps_requests_and_total(
    prometheus_server: PrometheusServer, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = prometheus_server.url
    assert _import(url, database_url, "gpucast_test_requests", *RANGE) == 0
    query = "gpucast_test_prompt_tokens"
    assert _import(url, database_url, query, *RANGE, metric="prompt_tokens") == 0
    assert "kept stored requests" in capsys.readouterr().out
    # Re-importing requests must not wipe the tokens either.
    assert _import(url, database_url, "gpucast_test_requests", *RANGE) == 0
    rows = _rows(database_url)
    assert [row[1] for row in rows] == REQUESTS.astype(float).tolist()
    assert [row[2] for row in rows] == PROMPT.astype(float).tolist()
    assert [row[4] for row in rows] == PROMPT.astype(float).tolist()
    assert {row[3] for row in rows} == {None}


def test_increase_of_a_counter_lands_on_the_hour_it_covers(
    prometheus_server: PrometheusServer, database_url: str
) -> None:
    query = "sum(increase(gpucast_test_served_total[1h]))"
    assert _import(prometheus_server.url, database_url, query, *RANGE) == 0
    rows = _rows(database_url)
    assert [row[0].timestamp() for row in rows] == [_hour(h) for h in range(HOURS)]
    np.testing.assert_allclose([row[1] for row in rows], REQUESTS, rtol=1e-9)


def test_long_range_is_split_under_the_point_limit(
    prometheus_server: PrometheusServer, database_url: str
) -> None:
    # 15,000 hours: one query_range would exceed Prometheus's 11,000 points.
    span = ["--start", "2024-01-01T00:00Z", "--end", "2025-09-16T00:00Z"]
    assert _import(prometheus_server.url, database_url, "gpucast_test_requests", *span) == 0
    rows = _rows(database_url)
    assert [row[1] for row in rows] == REQUESTS[: 15 * 24].astype(float).tolist()


def test_no_shift_stores_the_sample_at_its_own_timestamp(
    prometheus_server: PrometheusServer, database_url: str
) -> None:
    span = ["--start", "2025-09-01T01:00Z", "--end", "2025-09-02T01:00Z", "--no-shift"]
    assert _import(prometheus_server.url, database_url, "gpucast_test_requests", *span) == 0
    rows = _rows(database_url)
    assert [row[0].timestamp() for row in rows] == [_hour(h + 1) for h in range(24)]
    assert [row[1] for row in rows] == REQUESTS[:24].astype(float).tolist()


@pytest.mark.parametrize(
    ("query", "metric", "message"),
    [
        ("sum(rate(gpucast_test_requests[1h]", "requests", r"rejected the query \(bad_data\)"),
        ("gpucast_test_pod", "requests", r"returned 2 series .*pod=\"a\".* sum\("),
        ("gpucast_test_absent", "requests", r"no data for 2025-09-01T00:00Z"),
        ("gpucast_test_nan", "requests", r"sample at 2025-09-01T06:00:00Z nan is not a finite"),
        ("gpucast_test_negative", "requests", r"sample at 2025-09-01T04:00:00Z -1 is negative"),
        ("gpucast_test_prompt_tokens", "prompt_tokens", r"720 of 720 hours .* have no requests"),
    ],
)
def test_unusable_queries_exit_2_and_write_nothing(
    prometheus_server: PrometheusServer,
    database_url: str,
    capsys: pytest.CaptureFixture[str],
    query: str,
    metric: str,
    message: str,
) -> None:
    assert _import(prometheus_server.url, database_url, query, *RANGE, metric=metric) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("gpucast: error: ")
    assert re.search(message, err), err
    assert _rows(database_url) == []


def test_unreachable_prometheus_exits_3(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    assert _import(url, database_url, "up", *RANGE) == 3
    err = capsys.readouterr().err
    assert err.startswith(f"gpucast: error: cannot reach Prometheus at {url}: ")
    assert err.count("\n") == 1


def test_silent_prometheus_times_out_with_exit_3(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as listener:  # accepts connections (backlog) but never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        assert _import(url, database_url, "up", *RANGE, "--timeout", "0.5") == 3
    assert "did not answer within 0.5 s" in capsys.readouterr().err


def _fetch(
    handler: Callable[[httpx.Request], httpx.Response], hours: int = 24
) -> tuple[pd.Series, list[str]]:
    start = datetime(2025, 9, 1, tzinfo=UTC)
    query = RangeQuery(
        url="http://prom:9090/", query="up", start=start, end=start + timedelta(hours=hours)
    )
    return fetch_hourly(query, transport=httpx.MockTransport(handler))


@pytest.mark.parametrize(
    ("status", "body", "error", "message"),
    [
        (503, '{"status":"error","errorType":"timeout","error":"query timed out"}',
         PrometheusUnavailableError, r"rejected the query \(timeout\): query timed out"),
        (502, "<html>bad gateway</html>", PrometheusUnavailableError, r"answered HTTP 502"),
        (404, "not found", PrometheusQueryError, r"did not answer like a Prometheus API"),
        (200, '{"status":"success","data":{"resultType":"vector","result":[]}}',
         PrometheusQueryError, r"expected a range vector \(matrix\) result, got 'vector'"),
    ],
)  # fmt: skip
def test_server_answers_map_to_clear_errors(
    status: int, body: str, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        _fetch(lambda request: httpx.Response(status, text=body))


def test_long_ranges_are_fetched_in_contiguous_chunks() -> None:
    seen: list[tuple[int, int]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/api/v1/query_range"
        assert request.url.params["step"] == "3600"
        start, end = int(request.url.params["start"]), int(request.url.params["end"])
        seen.append((start, end))
        values = [[t, "1"] for t in range(start, end + 1, 3600)]
        matrix = {"resultType": "matrix", "result": [{"metric": {}, "values": values}]}
        return httpx.Response(200, json={"status": "success", "data": matrix})

    values, _ = _fetch(handler, hours=25_000)
    assert len(seen) == 3
    assert all((end - start) // 3600 + 1 <= 10_000 for start, end in seen)
    assert [s for s, _ in seen[1:]] == [e + 3600 for _, e in seen[:-1]]
    assert len(values) == 25_000
    assert values.index[0] == pd.Timestamp("2025-09-01", tz="UTC")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2025-09-01T10:30:00Z", datetime(2025, 9, 1, 10, tzinfo=UTC)),
        ("2025-09-01T12:00:00+02:00", datetime(2025, 9, 1, 10, tzinfo=UTC)),
        ("2025-09-01 10:00", datetime(2025, 9, 1, 10, tzinfo=UTC)),
        ("now", datetime(2025, 9, 10, 7, tzinfo=UTC)),
        ("30d", datetime(2025, 8, 11, 7, tzinfo=UTC)),
        ("12h", datetime(2025, 9, 9, 19, tzinfo=UTC)),
        ("2w", datetime(2025, 8, 27, 7, tzinfo=UTC)),
    ],
)
def test_parse_time(text: str, expected: datetime) -> None:
    assert parse_time(text, now=datetime(2025, 9, 10, 7, 45, tzinfo=UTC)) == expected


def test_parse_time_rejects_garbage() -> None:
    with pytest.raises(InputError, match=r"'yesterday' is not a time: use ISO 8601"):
        parse_time("yesterday")


def test_a_url_with_credentials_is_never_echoed_in_an_import_error(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # nothing listens on port 9: the import fails to connect and says so
    url = "http://ops:s3cr%21t-pass@127.0.0.1:9"
    argv = ["--database-url", database_url, "ingest", "prometheus", "--url", url]
    argv += ["--query", "sum(x)", "--series", "s", "--metric", "requests", "--start", "2h"]
    assert main(argv) == 3
    err = capsys.readouterr().err
    assert "cannot reach Prometheus at http://ops:***@127.0.0.1:9" in err
    assert "s3cr" not in err and "pass" not in err
