"""Misbehaving Prometheus servers: every malformed answer is a one-line exit 2 of ``gpucast
ingest prometheus`` and a counted failure of the hourly loop that skips only its series; a
server that drips its answer is cut off at the total deadline (exit 3). Nothing is written.

The server here is a tiny fake (a real Prometheus never sends these); tests/app/
test_prometheus.py and test_hourly.py cover the real one.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
from sqlalchemy import func, select

from app.cli import main
from app.db import Database
from app.db.models import Base, Observation, Series, SeriesSource
from app.ingest import prometheus
from app.ingest.prometheus import PrometheusQueryError, RangeQuery, fetch_hourly

SERIES = "prod/chat"
RANGE = ["--start", "2026-11-01T00:00:00Z", "--end", "2026-11-02T00:00:00Z"]
NOW = "2026-11-02T00:05Z"  # the hourly cycle's clock: it asks for 2026-10-31 .. 11-02


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    drip_s: float = 0.0  # seconds between the bytes of the answer (0: all at once)
    drip_headers: bool = False


Answer = Callable[[int, int], Reply]  # (start, end) of the query, Unix seconds -> reply


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        params = {k: v[0] for k, v in parse_qs(urlparse(self.path).query).items()}
        reply = self.server.answer(int(params["start"]), int(params["end"]))  # type: ignore[attr-defined]
        head = (
            f"HTTP/1.1 {reply.status} X\r\nContent-Type: {reply.content_type}\r\n"
            f"Content-Length: {len(reply.body)}\r\nConnection: close\r\n\r\n"
        ).encode()
        try:
            self._send(head, reply.drip_s if reply.drip_headers else 0.0)
            self._send(reply.body, reply.drip_s)
        except OSError:  # the client gave up: what a deadline is for
            pass

    def _send(self, data: bytes, drip_s: float) -> None:
        if not drip_s:
            self.wfile.write(data)
            return
        for byte in data:
            self.wfile.write(bytes([byte]))
            self.wfile.flush()
            time.sleep(drip_s)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


@pytest.fixture
def serve() -> Iterator[Callable[[Answer], str]]:
    servers: list[ThreadingHTTPServer] = []

    def start(answer: Answer) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.daemon_threads = True
        server.answer = answer  # type: ignore[attr-defined]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def document(result: Any, *, extra: dict[str, Any] | None = None) -> bytes:
    body = {"status": "success", "data": {"resultType": "matrix", "result": result}}
    return json.dumps(body | (extra or {})).encode()


def samples(make: Callable[[list[int]], list[Any]]) -> Answer:
    """One series whose samples ``make`` builds from the hours asked for."""

    def answer(start: int, end: int) -> Reply:
        return Reply(
            body=document([{"metric": {}, "values": make(list(range(start, end + 1, 3600)))}])
        )

    return answer


def fixed(body: bytes | str, status: int = 200, content_type: str = "application/json") -> Answer:
    data = body.encode() if isinstance(body, str) else body
    return lambda start, end: Reply(status=status, body=data, content_type=content_type)


GOOD = samples(lambda hours: [[t, "3600"] for t in hours])
MALFORMED: dict[str, tuple[Answer, str]] = {
    "vector result": (
        fixed('{"status":"success","data":{"resultType":"vector","result":[]}}'),
        "expected a range vector (matrix) result, got 'vector'",
    ),
    "result not a list": (fixed(document({})), "'result' is dict, not a list of series"),
    "series not an object": (fixed(document(["x"])), "series 1 of the result is str"),
    "values missing": (fixed(document([{"metric": {}}])), "has no 'values' list"),
    "values not a list": (fixed(document([{"metric": {}, "values": {"t": 1}}])), "no 'values'"),
    "labels not strings": (
        fixed(document([{"metric": {"pod": 1}, "values": []}])), "object of string labels",
    ),
    "sample not a pair": (samples(lambda h: [[t] for t in h]), "is not a [timestamp, value] pair"),
    "timestamp a string": (samples(lambda h: [[str(t), "1"] for t in h]), "not a number of sec"),
    "timestamp a boolean": (samples(lambda h: [[True, "1"]]), "not a number of seconds"),
    "value a JSON number": (samples(lambda h: [[t, 5] for t in h]), "value 5 at "),
    "value null": (samples(lambda h: [[t, None] for t in h]), "value null at"),
    "value not numeric": (samples(lambda h: [[t, "lots"] for t in h]), "value 'lots' at "),
    "NaN string": (samples(lambda h: [[t, "NaN"] for t in h]), "nan is not a finite number"),
    "+Inf string": (samples(lambda h: [[t, "+Inf"] for t in h]), "inf is not a finite number"),
    "-Inf string": (samples(lambda h: [[t, "-Inf"] for t in h]), "-inf is not a finite number"),
    "negative value": (samples(lambda h: [[t, "-3"] for t in h]), "-3 is negative"),
    "value at the bound": (samples(lambda h: [[t, "1e15"] for t in h]), "below 1e15"),
    "duplicate timestamps": (
        samples(lambda h: [[t, "1"] for t in h for _ in (0, 1)]),
        "timestamps more than once (first: ",
    ),
    "half-hour samples": (
        samples(lambda h: [[t + 1800, "1"] for t in h[:-1]]),
        ":30:00Z is not on the hour; gpucast stores whole hours only",
    ),
    "fractional seconds": (samples(lambda h: [[t + 0.5, "1"] for t in h]), "whole second"),
    "sample before the range": (
        samples(lambda h: [[h[0] - 3600, "1"]] + [[t, "1"] for t in h]),
        ":00:00Z is outside the range asked for (",
    ),
    "sample after the range": (
        samples(lambda h: [[t, "1"] for t in h] + [[h[-1] + 3600, "1"]]), "outside the range",
    ),
    "timestamp beyond any date": (samples(lambda h: [[1e300, "1"]]), "1e+300 is outside the range"),
    "HTML body": (
        fixed("<html><body>login</body></html>", content_type="text/html"),
        "did not answer like a Prometheus API (HTTP 200",
    ),
    "a list, not an object": (fixed("[]"), "did not answer like a Prometheus API"),
    "truncated JSON": (fixed('{"status":"success","data":{"resultType":"matr'), "did not answer"),
    "nesting beyond reason": (fixed("[" * 100_000), "did not answer like a Prometheus API"),
    "status not success": (
        fixed('{"status":"pending","data":{"resultType":"matrix","result":[]}}'),
        "'status' is 'pending', not 'success'",
    ),
    "warnings not strings": (
        fixed(document([], extra={"warnings": [{"x": 1}]})), "'warnings' is not a list of strings",
    ),
}  # fmt: skip


def checksum(database: Database) -> str:
    digest = hashlib.sha256()
    with database.engine.connect() as connection:
        for table in Base.metadata.sorted_tables:
            order = list(table.primary_key.columns) or list(table.columns)
            for row in connection.execute(select(table).order_by(*order)):
                digest.update(repr(tuple(row)).encode())
    return digest.hexdigest()


def stored_hours(database: Database, series: str = SERIES) -> int:
    with database.transaction() as session:
        return int(
            session.scalar(
                select(func.count())
                .select_from(Observation)
                .join(Series, Series.id == Observation.series_id)
                .where(Series.name == series)
            )
        )


def import_cli(database_url: str, url: str, *extra: str) -> int:
    argv = ["--database-url", database_url, "ingest", "prometheus", "--url", url]
    argv += ["--query", "sum(x)", "--series", SERIES, "--metric", "requests", *RANGE, *extra]
    return main(argv)


def test_a_well_formed_answer_is_imported_with_its_warnings(
    serve: Callable[[Answer], str],
    database: Database,
    database_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def answer(start: int, end: int) -> Reply:
        values = [[t, "3600"] for t in range(start, end + 1, 3600)]
        body = document([{"metric": {}, "values": values}], extra={"warnings": ["slow query"]})
        return Reply(body=body)

    assert import_cli(database_url, serve(answer)) == 0
    assert "note: Prometheus: slow query" in capsys.readouterr().out
    assert stored_hours(database) == 24


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_answers_exit_2_with_one_line_and_write_nothing(
    serve: Callable[[Answer], str],
    database: Database,
    database_url: str,
    capsys: pytest.CaptureFixture[str],
    case: str,
) -> None:
    answer, fragment = MALFORMED[case]
    before = checksum(database)
    assert import_cli(database_url, serve(answer)) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpucast: error: ") and err.count("\n") == 1, err
    assert fragment in err, err
    assert checksum(database) == before


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_the_hourly_loop_counts_a_malformed_answer_and_skips_only_its_series(
    serve: Callable[[Answer], str],
    database: Database,
    database_url: str,
    capsys: pytest.CaptureFixture[str],
    case: str,
) -> None:
    answer, fragment = MALFORMED[case]
    for series, url in (("prod/bad", serve(answer)), (SERIES, serve(GOOD))):
        argv = ["series", "source", series, "--url", url, "--requests-query", "sum(x)"]
        assert main(["--database-url", database_url, *argv]) == 0
    argv = ["--database-url", database_url, "schedule", "--hourly-once", "--now", NOW]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "import prod/bad: FAILED" in out and "1 of 2 sources imported, 1 failures" in out
    assert stored_hours(database, "prod/bad") == 0 and stored_hours(database) == 48
    with database.transaction() as session:
        state = session.scalars(
            select(SeriesSource).join(Series).where(Series.name == "prod/bad")
        ).one()
        assert state.last_error is not None and state.last_error.startswith("requests query: ")
        assert fragment in state.last_error
        assert (state.consecutive_failures, state.failures_total) == (1, 1)


@pytest.mark.parametrize("drip_headers", [False, True], ids=["body", "headers"])
def test_a_dripping_server_is_cut_off_at_the_total_deadline(
    serve: Callable[[Answer], str],
    database: Database,
    database_url: str,
    capsys: pytest.CaptureFixture[str],
    drip_headers: bool,
) -> None:
    good = GOOD(0, 3600 * 30).body  # ~1 KB: 100 s at one byte per 0.1 s
    url = serve(lambda start, end: Reply(body=good, drip_s=0.1, drip_headers=drip_headers))
    before = checksum(database)
    started = time.monotonic()
    assert import_cli(database_url, url, "--timeout", "1") == 3
    elapsed = time.monotonic() - started
    assert "did not answer within 1 s" in capsys.readouterr().err
    assert elapsed < 3.0, elapsed  # every byte came within the read timeout; the total did not
    assert checksum(database) == before

    argv = ["series", "source", SERIES, "--url", url, "--requests-query", "up", "--timeout", "1"]
    assert main(["--database-url", database_url, *argv]) == 0
    started = time.monotonic()
    cycle = ["--database-url", database_url, "schedule", "--hourly-once", "--now", NOW]
    assert main(cycle) == 1
    assert time.monotonic() - started < 4.0
    assert "did not answer within 1 s" in capsys.readouterr().out
    assert stored_hours(database) == 0


def _query(hours: int = 24, **changes: Any) -> RangeQuery:
    start = datetime(2026, 11, 1, tzinfo=UTC)
    fields = {"url": "http://prom:9090", "query": "up", "start": start}
    fields["end"] = start.replace(day=1 + hours // 24)
    return RangeQuery(**(fields | changes))


def test_an_answer_too_large_is_refused_while_it_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prometheus, "MAX_ANSWER_BYTES", 1000)
    body = GOOD(0, 3600 * 100).body
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
    with pytest.raises(PrometheusQueryError, match=r"answer is larger than 0 MiB"):
        fetch_hourly(_query(), transport=transport)


@pytest.mark.parametrize("timeout_s", [0.0, -1.0, float("nan"), float("inf"), 1e308])
def test_unusable_timeouts_are_input_errors(timeout_s: float) -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=b"{}"))
    with pytest.raises(ValueError, match=r"--timeout must be in \(0, 3600\] seconds"):
        fetch_hourly(_query(timeout_s=timeout_s), transport=transport)
