"""Hostile input, one rule per class, each pinned with several inputs and, where anything is
stored, on SQLite and PostgreSQL (the ``client``/``database`` fixtures run on both):

- text the database cannot store or a name must not hold (NUL, other control characters,
  unpaired surrogates) is a 422 JSON error before any query, on every input path: path and
  query parameters, JSON bodies (nested Grafana payloads too), CSV uploads; on the command
  line one line on stderr and exit code 2; nothing is written;
- every request body is bounded in size (413) and in JSON nesting (422);
- /metrics follows the read rules, API keys are visible ASCII (checked at startup), a
  compressed body is a 415, a CSV row wider than its header is refused, and echoed input is
  cut to 80 characters.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from httpx import Response

from app.api import create_app
from app.cli import main
from app.common.names import MAX_JSON_DEPTH, json_depth, text_problem
from app.db import Database
from app.errors import InputError
from app.settings import Settings
from tests.app.test_bad_input import checksum

SERIES = "prod/chat"
PROFILE = "h100"
GOOD_CSV = "timestamp,requests\n2026-11-30T00:00:00Z,3600\n"
# Text no string may hold (what PostgreSQL refuses, and terminal and log injection).
BAD_TEXT = ["a\x00b", "\x00", "nul at end\x00", "bell\x07", "esc\x1b[31m", "del\x7f", "\x1f"]
# What a name may not hold on top of that: line breaks, tabs, C1 controls.
BAD_NAME_ONLY = ["two\nlines", "tab\there", "cr\r", "c1\x85", "csi\x9b"]
PROFILE_BODY = {"gpu_type": "H100-80G", "model": "llama-3.1-70b", "tokens_per_s_per_gpu": 2400}


@pytest.fixture
def seeded(client: TestClient) -> TestClient:
    """A series with one hour of history and a GPU profile."""
    assert client.post("/v1/series", json={"name": SERIES}).status_code == 201
    response = client.post(
        f"/v1/series/{SERIES}/observations",
        content=GOOD_CSV,
        headers={"Content-Type": "text/csv"},
    )
    assert response.status_code == 200, response.text
    profile = client.post("/v1/gpu-profiles", json={"name": PROFILE, **PROFILE_BODY})
    assert profile.status_code == 201, profile.text
    return client


def _rejected(response: Response, status: int = 422, fragment: str = "") -> str:
    assert response.status_code == status, response.text[:300]
    assert response.headers["content-type"].startswith("application/json")
    detail = response.json()["detail"]
    assert fragment in str(detail), detail
    return str(detail)


# --- class 1: text the database cannot store, on every input path ----------------------------


def test_the_text_rules() -> None:
    for text in BAD_TEXT:
        assert text_problem(text) is not None, repr(text)
        assert text_problem(text, name=True) is not None, repr(text)
    for text in BAD_NAME_ONLY:
        assert text_problem(text) is None or "\r" not in text, repr(text)
        assert text_problem(text, name=True) is not None, repr(text)
    assert "unpaired surrogate U+D800" in str(text_problem("x\ud800"))
    assert "U+0000 (NUL) at position 1" in str(text_problem("a\x00b"))
    for fine in ["prod/chat", "zoë", "名前", "emoji 🚀", "line\nbreak", "tab\tin text"]:
        assert text_problem(fine) is None, repr(fine)


PATHS = [
    "/v1/series/{}",
    "/v1/series/{}/observations",
    "/v1/series/{}/forecast",
    "/v1/series/{}/forecast/runs",
    "/v1/series/{}/source",
    "/v1/series/{}/capacity?profile=h100",
    "/v1/series/{}/plot.png",
    "/v1/gpu-profiles/{}",
]


@pytest.mark.parametrize("template", PATHS)
def test_control_characters_in_a_path_are_a_422_before_any_query(
    seeded: TestClient, database: Database, template: str
) -> None:
    before = checksum(database)
    for bad in [*BAD_TEXT, *BAD_NAME_ONLY]:
        for method in ("GET", "DELETE"):
            response = seeded.request(method, template.format(quote(f"prod/{bad}")))
            _rejected(response, 422, "the request path contains")
    assert checksum(database) == before


@pytest.mark.parametrize(
    "path, parameter",
    [
        ("/v1/series/prod/chat/capacity", "profile"),
        ("/v1/series/prod/chat/desired-replicas", "profile"),
        ("/v1/series/prod/chat/forecast/accuracy", "profile"),
        ("/v1/series/prod/chat/plot.png", "profile"),
        ("/v1/events", "series"),
        ("/v1/series/prod/chat/kubernetes?profile=h100", "reactive_query"),
    ],
)
def test_control_characters_in_a_query_parameter_are_a_422(
    seeded: TestClient, path: str, parameter: str
) -> None:
    for bad in BAD_TEXT:
        response = seeded.get(path, params={parameter: bad})
        _rejected(response, 422, f"query parameter '{parameter}' contains")


def test_control_characters_in_an_ingest_query_parameter_store_nothing(
    seeded: TestClient, database: Database
) -> None:
    before = checksum(database)
    for bad in BAD_TEXT:
        response = seeded.post(
            f"/v1/series/{SERIES}/observations",
            params={"timezone": bad},
            content=GOOD_CSV,
            headers={"Content-Type": "text/csv"},
        )
        _rejected(response, 422, "query parameter 'timezone' contains")
    assert checksum(database) == before


def _event(**fields: object) -> dict[str, object]:
    return {"name": "launch", "start": "2026-12-01T00:00:00Z", "end": "2026-12-02T00:00:00Z"} | (
        fields
    )


def _source(**fields: object) -> dict[str, object]:
    return {"url": "http://prometheus:9090", "requests_query": "sum(x)"} | fields


# (method, path, body with the hostile text at {}) — every JSON body whose strings are stored or
# looked up.
BODIES: list[tuple[str, str, Callable[[str], object]]] = [
    ("POST", "/v1/series", lambda t: {"name": t}),
    ("POST", "/v1/series", lambda t: {"name": "ok", "labels": {"team": t}}),
    ("POST", "/v1/series", lambda t: {"name": "ok", "labels": {t: "ml"}}),
    ("POST", "/v1/events", lambda t: _event(name=t)),
    ("POST", "/v1/events", lambda t: _event(series=t)),
    ("POST", "/v1/events", lambda t: _event(description=t)),
    ("POST", "/v1/gpu-profiles", lambda t: {"name": t, **PROFILE_BODY}),
    ("POST", "/v1/gpu-profiles", lambda t: {"name": "p2", **PROFILE_BODY, "model": t}),
    ("PUT", "/v1/gpu-profiles/h100", lambda t: {**PROFILE_BODY, "gpu_type": t}),
    ("PUT", "/v1/series/prod/chat/source", lambda t: _source(requests_query=t)),
    ("PUT", "/v1/series/prod/chat/source", lambda t: _source(bearer_token=t)),
    ("POST", "/v1/capacity/simulate", lambda t: {"series": t, "replica_qps": 1}),
    ("POST", "/v1/series/prod/chat/observations", lambda t: [{"timestamp": t, "requests": 1}]),
    (
        "POST",
        "/v1/series/prod/chat/observations",
        lambda t: {"series": t, "observations": [{"timestamp": "2026-11-30T01:00:00Z"}]},
    ),
    (
        "POST",
        "/grafana/query",
        lambda t: {"targets": [{"target": "history", "payload": {"series": t}}]},
    ),
    (
        "POST",
        "/grafana/query",
        lambda t: {"targets": [{"target": "gpus", "payload": {"profile": t}}]},
    ),
    ("POST", "/grafana/query", lambda t: {"adhocFilters": [{"key": "series", "value": t}]}),
    ("POST", "/grafana/variable", lambda t: {"payload": {"target": t}}),
    ("POST", "/grafana/tag-values", lambda t: {"key": t}),
    ("POST", "/grafana/metric-payload-options", lambda t: {"metric": "gpus", "name": t}),
]


@pytest.mark.parametrize("case", range(len(BODIES)), ids=lambda i: f"{BODIES[i][0]} {BODIES[i][1]}")
def test_control_characters_anywhere_in_a_json_body_are_a_422(
    seeded: TestClient, database: Database, case: int
) -> None:
    method, path, body = BODIES[case]
    before = checksum(database)
    for bad in [*BAD_TEXT, "lone \ud800 surrogate", "\udfff"]:
        # json.dumps escapes them as \u0000, \ud800: what a client sends
        content = json.dumps(body(bad))
        response = seeded.request(
            method, path, content=content, headers={"Content-Type": "application/json"}
        )
        _rejected(response, 422, "body")
        assert "contains" in response.text, response.text
    assert checksum(database) == before


@pytest.mark.parametrize(
    "method, path, body",
    [
        ("POST", "/v1/events", lambda t: _event(name=t)),
        ("POST", "/v1/events", lambda t: _event(series=t)),
        ("POST", "/v1/series", lambda t: {"name": "ok", "labels": {"team": t}}),
        ("POST", "/v1/series", lambda t: {"name": "ok", "labels": {t: "ml"}}),
        ("POST", "/v1/gpu-profiles", lambda t: {"name": "p2", **PROFILE_BODY, "gpu_type": t}),
        ("PUT", "/v1/gpu-profiles/h100", lambda t: {**PROFILE_BODY, "model": t}),
    ],
)
def test_a_stored_name_holds_no_line_break_tab_or_c1_control(
    seeded: TestClient, database: Database, method: str, path: str, body: Callable[[str], object]
) -> None:
    before = checksum(database)
    for bad in BAD_NAME_ONLY:
        response = seeded.request(method, path, json=body(bad))
        _rejected(response, 422, "must not contain control characters")
    assert checksum(database) == before


def test_free_text_keeps_line_breaks_and_every_language(seeded: TestClient) -> None:
    event = seeded.post(
        "/v1/events", json=_event(name="Soldes d'été 🚀", description="line one\nline\ttwo")
    )
    assert event.status_code == 201, event.text
    assert event.json()["description"] == "line one\nline\ttwo"
    series = seeded.post("/v1/series", json={"name": "eu/chat", "labels": {"équipe": "名前"}})
    assert series.status_code == 201, series.text
    assert seeded.get("/v1/series/eu/chat").json()["labels"] == {"équipe": "名前"}
    source = seeded.put(f"/v1/series/{SERIES}/source", json=_source(requests_query="sum(\n x)"))
    assert source.status_code == 200, source.text


@pytest.mark.parametrize("bad", ["a\x00b", "\x00", "x\x01", "esc\x1b", "two\nlines"])
def test_a_grafana_payload_sent_as_a_json_string_obeys_the_same_rules(
    seeded: TestClient, bad: str
) -> None:
    payload = json.dumps({"series": bad})  # the inner NUL is an escape inside a string
    response = seeded.post(
        "/grafana/query", json={"targets": [{"target": "history", "payload": payload}]}
    )
    if "\n" in bad:  # free text in a payload: not a series, a 404 naming it
        _rejected(response, 404, "not found")
    else:
        _rejected(response, 422, "payload.series contains")


@pytest.mark.parametrize(
    "csv_text",
    [
        "timestamp,requests\n2026-11-30T01:00:00Z\x00,1\n",
        "timestamp,requests\n\x002026-11-30T01:00:00Z,1\n",
        "timestamp,requests\n2026-11-30T01:00:00Z,1\x00\n",
        "timestamp,requests\n2026-11-30T01:00:00Z,\x1b1\n",
        "timestamp,requ\x00ests\n2026-11-30T01:00:00Z,1\n",
        "timestamp,requests,series\n2026-11-30T01:00:00Z,1,prod/a\x00b\n",
    ],
)
def test_control_characters_in_a_csv_upload_are_a_422_and_store_nothing(
    client: TestClient, database: Database, csv_text: str
) -> None:
    assert client.post("/v1/series", json={"name": SERIES}).status_code == 201
    before = checksum(database)
    response = client.post(
        f"/v1/series/{SERIES}/observations",
        content=csv_text,
        headers={"Content-Type": "text/csv"},
    )
    _rejected(response, 422)
    assert checksum(database) == before


# --- the command line: one line on stderr, exit code 2, nothing written ----------------------


def _cli(database_url: str, *args: str) -> int:
    return main(["--database-url", database_url, *args])


def _one_error_line(capsys: pytest.CaptureFixture[str], fragment: str) -> None:
    err = capsys.readouterr().err
    assert err.startswith("gpucast: error: ") and err.count("\n") == 1, err
    assert fragment in err, err


@pytest.mark.parametrize("bad", [*BAD_TEXT, "invalid utf-8 \udcff", "\udc80"])
def test_cli_arguments_with_control_characters_exit_2(
    database: Database,
    database_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    bad: str,
) -> None:
    path = tmp_path / "load.csv"
    path.write_text(GOOD_CSV)
    before = checksum(database)
    commands = [
        ["ingest", "hourly", str(path), "--series", bad],
        ["plan", bad, "--profile", PROFILE],
        ["series", "source", bad],
        ["plan", SERIES, "--profile", bad],
        ["forecast", bad],
    ]
    for command in commands:
        assert _cli(database_url, *command) == 2, command
        _one_error_line(capsys, "command-line argument")
    assert checksum(database) == before


@pytest.mark.parametrize(
    "name, text",
    [
        ("fleet.csv", "timestamp,requests,series\n2026-11-30T01:00:00Z,1,prod/a\x00b\n"),
        ("fleet.csv", "timestamp,requests,series\n2026-11-30T01:00:00Z,1,esc\x1b\n"),
        ("fleet.csv", "timestamp,requests,series\n2026-11-30T01:00:00Z,1,a\x7f\n"),
        ("fleet.csv", "timestamp,requests,series\n2026-11-30T01:00:00Z,1,a\x85b\n"),
        (
            "fleet.json",
            '{"series": "a\\u0000b", "observations": '
            '[{"timestamp": "2026-11-30T01:00:00Z", "requests": 1}]}',
        ),
        (
            "fleet.json",
            '[{"timestamp": "2026-11-30T01:00:00Z", "requests": 1, "series": "\\ud800"}]',
        ),
    ],
)
def test_cli_files_naming_series_with_control_characters_exit_2(
    database: Database,
    database_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    text: str,
) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    before = checksum(database)
    assert _cli(database_url, "ingest", "hourly", str(path)) == 2
    fragment = "control character" if name.endswith(".csv") and "\x85" not in text else "series"
    _one_error_line(capsys, fragment)
    assert checksum(database) == before


# --- class 8: every body is bounded in size and nesting ---------------------------------------

LIMIT = 4096


@pytest.fixture
def small_limit(settings: Settings) -> Iterator[TestClient]:
    limited = settings.model_copy(update={"max_body_bytes": LIMIT})
    with TestClient(create_app(limited)) as client:
        assert client.post("/v1/series", json={"name": SERIES}).status_code == 201
        yield client


BIG = "x" * (LIMIT + 1)
OVERSIZED: list[tuple[str, str, object]] = [
    ("POST", "/v1/series", {"name": "big", "labels": {"a": BIG}}),
    ("POST", "/v1/events", _event(description=BIG)),
    ("POST", "/v1/gpu-profiles", {"name": "big", **PROFILE_BODY, "model": BIG}),
    ("PUT", "/v1/series/prod/chat/source", _source(requests_query=BIG)),
    ("POST", "/v1/capacity/simulate", {"load_qps": [1.0] * LIMIT, "replica_qps": 1}),
    ("POST", "/v1/capacity/estimate", {"model": BIG, "gpu": "h100-80g", "qps": 1}),
    ("POST", "/grafana/query", {"targets": [{"target": BIG}]}),
    ("POST", "/grafana/tag-keys", {"a": BIG}),
    ("POST", "/v1/series/prod/chat/observations", [{"timestamp": BIG, "requests": 1}]),
]


@pytest.mark.parametrize("case", range(len(OVERSIZED)), ids=lambda i: " ".join(OVERSIZED[i][:2]))
def test_every_body_over_the_limit_is_a_413_json(
    small_limit: TestClient, database: Database, case: int
) -> None:
    method, path, body = OVERSIZED[case]
    before = checksum(database)
    content = json.dumps(body).encode()
    assert len(content) > LIMIT
    headers = {"Content-Type": "application/json"}
    declared = small_limit.request(method, path, content=content, headers=headers)
    _rejected(declared, 413, f"the limit is {LIMIT} bytes")
    # without a Content-Length (chunked): counted as it streams
    streamed = small_limit.request(method, path, content=iter([content[:100], content[100:]]))
    assert "content-length" not in {k.lower() for k in streamed.request.headers}
    _rejected(streamed, 413, f"exceeds the limit of {LIMIT} bytes")
    assert checksum(database) == before


def test_a_body_at_the_limit_is_read(small_limit: TestClient) -> None:
    body = {"name": "fits", "labels": {f"k{i}": "v" * 30 for i in range(60)}}
    content = json.dumps(body).encode()
    assert len(content) <= LIMIT
    response = small_limit.post(
        "/v1/series", content=content, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 201, response.text


def test_labels_are_bounded() -> None:
    from pydantic import ValidationError

    from app.api.schemas import SeriesCreate

    for labels in (
        {f"k{i}": "v" for i in range(101)},
        {"team": "v" * 201},
        {"k" * 201: "v"},
    ):
        with pytest.raises(ValidationError, match="at most"):
            SeriesCreate(name="s", labels=labels)
    assert SeriesCreate(name="s", labels={f"k{i}": "v" * 200 for i in range(100)})


def _nested(depth: int, leaf: str = "1") -> str:
    """``depth`` levels of arrays and objects around ``leaf``."""
    opening = "".join('{"a": ' if level % 2 else "[" for level in reversed(range(depth)))
    closing = "".join("}" if level % 2 else "]" for level in range(depth))
    return opening + leaf + closing


def test_json_depth_is_counted_without_parsing() -> None:
    assert json_depth("1") == 0
    assert json_depth('{"a": [1, {"b": 2}]}') == 3
    assert json_depth('["[[[[", "{{{{"]') == 1  # brackets in strings do not count
    assert json_depth(r'["\"[[[["]') == 1
    for depth in (1, 5, MAX_JSON_DEPTH, 1000, 100_000):
        assert json_depth(_nested(depth)) == depth


NESTED_AT: list[tuple[str, str, Callable[[str], str]]] = [
    ("POST", "/v1/series", lambda deep: f'{{"name": "n", "labels": {deep}}}'),
    ("POST", "/v1/events", lambda deep: f'{{"name": {deep}}}'),
    ("POST", "/v1/gpu-profiles", lambda deep: deep),
    ("PUT", "/v1/series/prod/chat/source", lambda deep: f'{{"url": {deep}}}'),
    ("POST", "/v1/capacity/simulate", lambda deep: f'{{"load_qps": {deep}}}'),
    ("POST", "/grafana/query", lambda deep: f'{{"targets": [{{"payload": {deep}}}]}}'),
    ("POST", "/grafana/tag-keys", lambda deep: deep),
    ("POST", "/v1/series/prod/chat/observations", lambda deep: deep),
]


@pytest.mark.parametrize("case", range(len(NESTED_AT)), ids=lambda i: " ".join(NESTED_AT[i][:2]))
def test_deeply_nested_json_is_a_422_on_every_endpoint(
    seeded: TestClient, database: Database, case: int
) -> None:
    method, path, wrap = NESTED_AT[case]
    before = checksum(database)
    for depth in (MAX_JSON_DEPTH + 1, 5_000, 200_000):
        content = wrap(_nested(depth))
        response = seeded.request(
            method, path, content=content, headers={"Content-Type": "application/json"}
        )
        _rejected(response, 422, f"the limit is {MAX_JSON_DEPTH}")
    # at the bound the body is parsed and judged on its content (never a nesting error)
    response = seeded.request(
        method,
        path,
        content=wrap(_nested(MAX_JSON_DEPTH - 4)),
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code < 500 and "levels deep" not in response.text, response.text
    assert checksum(database) == before


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 10_000])
def test_a_deep_grafana_payload_string_is_a_422(seeded: TestClient, depth: int) -> None:
    target = {"target": "history", "payload": _nested(depth)}
    _rejected(seeded.post("/grafana/query", json={"targets": [target]}), 422, "payload nests")
    variable = seeded.post("/grafana/variable", json={"payload": _nested(depth)})
    _rejected(variable, 422, "payload nests")


def test_a_deep_json_file_on_the_cli_exits_2(
    database: Database, database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for depth in (MAX_JSON_DEPTH + 1, 100_000):
        path = tmp_path / "deep.json"
        path.write_text(_nested(depth))
        assert _cli(database_url, "ingest", "hourly", str(path), "--series", SERIES) == 2
        _one_error_line(capsys, "levels deep")


# --- class 9: /metrics, API keys, Content-Encoding, wide CSV rows, echoed input ---------------

KEY = "k-3f9a7c"


def test_metrics_need_the_key_when_reads_do(settings: Settings) -> None:
    locked = settings.model_copy(update={"api_keys": KEY, "read_requires_key": True})
    with TestClient(create_app(locked)) as client:
        for headers in ({}, {"X-API-Key": "wrong"}, {"Authorization": "Bearer wrong"}):
            _rejected(client.get("/metrics", headers=headers), 401, "API key")
        for headers in ({"X-API-Key": KEY}, {"Authorization": f"Bearer {KEY}"}):
            response = client.get("/metrics", headers=headers)
            assert response.status_code == 200
            assert "gpucast_http_requests_total" in response.text
    open_reads = settings.model_copy(update={"api_keys": KEY})
    with TestClient(create_app(open_reads)) as client:
        assert client.get("/metrics").status_code == 200


@pytest.mark.parametrize(
    "keys, position",
    [
        ("clé", 1),
        ("good-key,ключ", 2),
        ("a b", 1),
        ("ok,tab\there", 2),
        ("nul\x00", 1),
        ("em—dash", 1),
    ],
)
def test_api_keys_beyond_visible_ascii_are_refused_at_startup(
    settings: Settings, keys: str, position: int
) -> None:
    bad = settings.model_copy(update={"api_keys": keys})
    with pytest.raises(InputError, match=f"GPUCAST_API_KEYS: key {position} of .* visible ASCII"):
        create_app(bad)


def test_gpucast_serve_refuses_a_non_ascii_key_with_one_line(
    monkeypatch: pytest.MonkeyPatch, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GPUCAST_API_KEYS", "clé-secrète")
    assert _cli(database_url, "serve", "--port", "1") == 2
    _one_error_line(capsys, "visible ASCII")


def test_a_printable_ascii_key_with_symbols_works(settings: Settings) -> None:
    key = "A-z_0.9~!#$%&*+/=?^|"
    keyed = settings.model_copy(update={"api_keys": key})
    with TestClient(create_app(keyed)) as client:
        response = client.post("/v1/series", json={"name": "s"}, headers={"X-API-Key": key})
        assert response.status_code == 201, response.text


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br", "zstd", "gzip, identity", "x-foo"])
def test_a_compressed_body_is_a_415_on_every_endpoint(
    seeded: TestClient, database: Database, encoding: str
) -> None:
    before = checksum(database)
    calls = [
        ("POST", "/v1/series", b'{"name": "gz"}', "application/json"),
        ("POST", f"/v1/series/{SERIES}/observations", GOOD_CSV.encode(), "text/csv"),
        ("POST", "/v1/events", json.dumps(_event()).encode(), "application/json"),
        ("POST", "/grafana/query", b"{}", "application/json"),
    ]
    for method, path, body, content_type in calls:
        response = seeded.request(
            method,
            path,
            content=gzip.compress(body),
            headers={"Content-Type": content_type, "Content-Encoding": encoding},
        )
        _rejected(response, 415, "unsupported Content-Encoding")
    assert checksum(database) == before


def test_an_identity_content_encoding_is_read(seeded: TestClient) -> None:
    for encoding in ("identity", "Identity"):
        response = seeded.post(
            "/v1/series",
            json={"name": f"plain-{encoding}"},
            headers={"Content-Encoding": encoding},
        )
        assert response.status_code == 201, response.text


WIDE_ROWS = [
    ("timestamp,requests\n2026-11-30T01:00:00Z,1,7\n", 1, 3, 2),
    ("timestamp,requests\n2026-11-30T01:00:00Z,1,\n", 1, 3, 2),
    ("timestamp,requests\n2026-11-30T01:00:00Z,1\n2026-11-30T02:00:00Z,1,7\n", 2, 3, 2),
    ("timestamp,requests\n1,2026-11-30T01:00:00Z,5\n", 1, 3, 2),  # once stored as 5 requests
    (
        "timestamp,requests,peak_rps\n2026-11-30T01:00:00Z,1,1\n2026-11-30T02:00:00Z,1,1\n"
        '2026-11-30T03:00:00Z,1,1,"a,b",9\n',
        3,
        5,
        3,
    ),
]


@pytest.mark.parametrize("text, row, fields, width", WIDE_ROWS)
def test_a_csv_row_wider_than_its_header_is_refused_with_its_row(
    client: TestClient, database: Database, text: str, row: int, fields: int, width: int
) -> None:
    assert client.post("/v1/series", json={"name": SERIES}).status_code == 201
    before = checksum(database)
    response = client.post(
        f"/v1/series/{SERIES}/observations", content=text, headers={"Content-Type": "text/csv"}
    )
    _rejected(
        response, 422, f"row {row} (line {row + 1}) has {fields} fields but the header has {width}"
    )
    assert checksum(database) == before


def test_a_wide_csv_row_on_the_cli_exits_2(
    database: Database, database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = checksum(database)
    for text, row, fields, _ in WIDE_ROWS:
        path = tmp_path / "wide.csv"
        path.write_text(text)
        assert _cli(database_url, "ingest", "hourly", str(path), "--series", SERIES) == 2
        _one_error_line(capsys, f"row {row} (line {row + 1}) has {fields} fields")
    assert checksum(database) == before


LONG = "n" * 5000


@pytest.mark.parametrize(
    "method, path, kwargs",
    [
        ("GET", f"/v1/series/{LONG}", {}),
        ("GET", f"/v1/series/{LONG}/forecast", {}),
        ("GET", f"/v1/gpu-profiles/{LONG}", {}),
        ("DELETE", f"/v1/series/{LONG}/source", {}),
        ("GET", "/v1/events", {"params": {"series": LONG}}),
        ("POST", "/v1/series", {"json": {"name": LONG}}),
        ("POST", "/v1/series", {"json": {"name": f"a/{LONG}/../b"}}),
        ("POST", "/v1/events", {"json": _event(series=LONG[:200])}),
        ("POST", "/grafana/query", {"json": {"targets": [{"target": LONG}]}}),
        (
            "POST",
            "/grafana/query",
            {"json": {"targets": [{"target": "history", "payload": {"series": LONG}}]}},
        ),
        (
            "POST",
            "/grafana/query",
            {"json": {"targets": [{"target": "history", "payload": {"metric": LONG}}]}},
        ),
        ("POST", "/grafana/query", {"json": {"adhocFilters": [{"key": LONG, "value": "x"}]}}),
        ("POST", "/grafana/variable", {"json": {"payload": {"target": LONG}}}),
        ("POST", "/grafana/metric-payload-options", {"json": {"metric": LONG, "name": "x"}}),
        (
            "POST",
            f"/v1/series/{SERIES}/observations",
            {"content": f"timestamp,{LONG}\n1,2\n", "headers": {"Content-Type": "text/csv"}},
        ),
    ],
)
def test_echoed_input_is_cut_to_80_characters(
    seeded: TestClient, method: str, path: str, kwargs: dict[str, object]
) -> None:
    response = seeded.request(method, path, **kwargs)  # type: ignore[arg-type]
    assert 400 <= response.status_code < 500, response.text[:200]
    detail = response.text
    assert "n" * 81 not in detail, detail[:300]
    assert len(detail) < 600, detail[:300]
    if "n" * 20 in detail:  # echoed: cut at 80 with an ellipsis
        assert "n" * 80 + "'…" in detail, detail[:300]
