"""A dashboard's range ends at ``now``: every refresh posts a different range, to the
millisecond. Each target is computed once over a window that does not move with it and cut to
the exact range, so a moving range is served without the database, and every answer equals
the one computed on that exact range."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime

import pandas as pd
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from app import grafana
from app.api.response_cache import ResponseCache, cached_read
from app.db import Database
from app.grafana import ranges
from tests.app.test_grafana import PROFILE, SERIES, loaded, query_body  # noqa: F401 (fixture)
from tests.conformance import grafana_plugin as plugin
from tests.conformance.test_grafana_dashboard import QUERIES

MS = pd.Timedelta(milliseconds=1)


def stamp(moment: pd.Timestamp) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def moving_ranges(count: int, *, seed: int) -> list[dict[str, str]]:
    """Ranges as "now-1d to now" sends them, ``now`` moving by milliseconds to hours over the
    stored October data (both ends inside hours, on hours and across hour boundaries)."""
    rng = random.Random(seed)
    base = pd.Timestamp("2026-10-21T11:59:58.500Z")
    out = []
    for _ in range(count):
        now = base + rng.choice([MS, 7 * MS, pd.Timedelta(seconds=1.5)]) * rng.randint(0, 4000)
        now += pd.Timedelta(hours=rng.choice([0, 0, 1, 13, 26]))
        span = pd.Timedelta(hours=rng.choice([6, 24, 72]))
        out.append({"from": stamp(now - span), "to": stamp(now)})
    # ends on an hour (a point there is in the range), and just after the launch event starts
    # (2026-10-22 08:00, inside the range's last hour)
    out.append({"from": "2026-10-20T13:00:00.000Z", "to": "2026-10-21T13:00:00.000Z"})
    out.append({"from": "2026-10-21T08:30:00.000Z", "to": "2026-10-22T08:30:00.000Z"})
    return out


def reference(database: Database, body: dict) -> list[dict]:
    """The oracle: every target's handler run on the exact range (each filters its own data
    by it), then averaged down to maxDataPoints as pandas does it, without any window or cut."""
    request = grafana.QueryRequest.model_validate(body)
    start, end = grafana.resolve_range(request.range)
    out: list[dict] = []
    with database.read_transaction() as session:
        ctx = grafana.QueryContext(session=session, start=start, end=end)
        for query in request.targets:
            target = grafana.get_target(query.target)
            items = target.handler(ctx, query.payload)
            if target.downsampled:
                items = [reference_downsample(item, request.maxDataPoints) for item in items]
            out += items
    return out


def reference_downsample(item: dict, max_points: int | None) -> dict:
    points = item["datapoints"]
    if not max_points or len(points) <= max_points:
        return item
    size = -(-len(points) // max_points)
    frame = pd.DataFrame(points, columns=["value", "time"], dtype=float)
    buckets = frame.groupby(frame.index // size)
    means = buckets["value"].mean()
    return {
        **item,
        "datapoints": [
            [None if pd.isna(v) else float(v), int(t)]
            for v, t in zip(means, buckets["time"].first(), strict=True)
        ],
    }


def dashboard_targets() -> list[dict]:
    dashboard = plugin.Dashboard(
        {
            "series": plugin.Variable(SERIES),
            "profile": plugin.Variable(PROFILE),
            "band": plugin.Variable("auto"),
        }
    )
    return [
        plugin.process_target(query, dashboard)
        for _, query in QUERIES
        if query["target"] != "plan_backtest"  # a replay per query: tested on its own
    ]


def test_a_moving_range_answers_what_its_own_range_computes(
    loaded: TestClient,  # noqa: F811
    database: Database,
) -> None:
    targets = dashboard_targets()
    for time_range in moving_ranges(25, seed=35):
        body = query_body(*targets, range=time_range, maxDataPoints=30)
        served = loaded.post("/grafana/query", json=body)
        assert served.status_code == 200, (time_range, served.text)
        expected = json.loads(json.dumps(reference(database, body)))
        assert comparable(served.json()) == comparable(expected), time_range


def comparable(answer: list[dict]) -> list[dict]:
    """The answer without notices and the plan status' ages (they move with the clock), and
    averages to 12 significant digits (summed in another order, the last bits differ)."""
    out = []
    for item in answer:
        item = {k: v for k, v in item.items() if k != "meta"}
        if "datapoints" in item:
            item["datapoints"] = [
                [float(f"{v:.12g}") if isinstance(v, float) else v, t]
                for v, t in item["datapoints"]
            ]
        if item.get("type") == "table":
            keep = [i for i, c in enumerate(item["columns"]) if "_age_" not in c["text"]]
            item = {**item, "rows": [[row[i] for i in keep] for row in item["rows"]]}
        out.append(item)
    return out


def test_a_moving_range_is_served_without_the_database(
    loaded: TestClient,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the cache's clock stands still: on a slow machine the 40 queries would otherwise outlast
    # the answer's life (or reach its refresh share) and rightly touch the database again
    monkeypatch.setattr("app.api.response_cache.time.monotonic", lambda: 1_000.0)
    targets = dashboard_targets()
    start = pd.Timestamp("2026-10-20T10:00:00.001Z")
    first = query_body(
        *targets, range={"from": stamp(start), "to": stamp(start + pd.Timedelta(days=2))}
    )
    assert loaded.post("/grafana/query", json=first).status_code == 200
    checkouts: list[int] = []
    engine = loaded.app.state.database.engine  # type: ignore[attr-defined]

    def count(*_: object) -> None:
        checkouts.append(1)

    event.listen(engine, "checkout", count)
    try:
        for ms in range(1, 40):
            moved = start + ms * MS
            body = query_body(
                *targets, range={"from": stamp(moved), "to": stamp(moved + pd.Timedelta(days=2))}
            )
            response = loaded.post("/grafana/query", json=body)
            assert response.status_code == 200, response.text
        assert checkouts == []
    finally:
        event.remove(engine, "checkout", count)


def test_a_write_is_seen_by_the_next_moving_range(loaded: TestClient) -> None:  # noqa: F811
    target = {"refId": "A", "target": "history", "payload": {"series": SERIES}}
    base = pd.Timestamp("2026-10-20T00:00:00.000Z")

    def history(ms: int) -> list[list[float]]:
        moved = base + ms * MS
        time_range = {"from": stamp(moved), "to": stamp(moved + pd.Timedelta(days=1))}
        response = loaded.post("/grafana/query", json=query_body(target, range=time_range))
        assert response.status_code == 200, response.text
        return response.json()[0]["datapoints"]

    before = history(0)
    hour = pd.Timestamp("2026-10-20T05:00:00Z")
    rows = [{"timestamp": hour.isoformat(), "requests": 123456}]
    assert loaded.post(f"/v1/series/{SERIES}/observations", json=rows).status_code == 200
    after = history(1)
    old, new = ({t: v for v, t in points} for points in (before, after))
    moment = int(hour.value // 10**6)
    assert {t: v for t, v in new.items() if old.get(t) != v} == {moment: 123456}


# -- the cut itself -----------------------------------------------------------------------


def test_the_window_of_a_range_target_is_whole_hours_and_others_take_everything() -> None:
    start = datetime(2026, 10, 20, 10, 0, 0, 1000, tzinfo=UTC)
    end = datetime(2026, 10, 21, 10, 0, 0, 1000, tzinfo=UTC)
    assert ranges.window(start, end, reads_range=True) == (
        datetime(2026, 10, 20, 10, tzinfo=UTC),
        datetime(2026, 10, 21, 11, tzinfo=UTC),
    )
    on_hour = datetime(2026, 10, 21, 10, tzinfo=UTC)
    assert ranges.window(start, on_hour, reads_range=True)[1] == on_hour
    assert ranges.window(start, end, reads_range=False) == ranges.EVERYTHING


def test_cut_keeps_points_and_overlapping_annotations_inclusively() -> None:
    hour = 3_600_000
    series = {"target": "s", "datapoints": [[float(i), i * hour] for i in range(10)]}
    series["datapoints"][4][0] = None
    notes = {
        "type": "table",
        "columns": [{"text": "Time"}, {"text": "TimeEnd"}, {"text": "Title"}],
        "rows": [[0, hour, "a"], [3 * hour - 300_000, 3 * hour, "b"], [9 * hour, 9 * hour, "c"]],
    }
    other = {"type": "table", "columns": [{"text": "series"}], "rows": [["x"], ["y"]]}
    start = datetime.fromtimestamp(3 * hour / 1000, UTC)
    end = datetime.fromtimestamp(8 * hour / 1000, UTC)
    cut = ranges.cut(ranges.compact([series, notes, other]), start, end)
    assert cut[0]["datapoints"] == [[3.0, 3 * hour], [None, 4 * hour]] + [
        [float(i), i * hour] for i in range(5, 9)
    ]
    assert [r[2] for r in cut[1]["rows"]] == ["b"]  # ends at the range's start: overlaps
    assert cut[2] == other
    later = datetime.fromtimestamp((3 * hour + 1) / 1000, UTC)  # 1 ms after the hour
    assert ranges.cut(ranges.compact([series]), later, end)[0]["datapoints"][0][1] == 4 * hour


def test_downsampling_after_the_cut_averages_and_says_so() -> None:
    hour = 3_600_000
    points = [[float(i), i * hour] for i in range(10)] + [[None, 10 * hour], [None, 11 * hour]]
    start = datetime.fromtimestamp(0, UTC)
    end = datetime.fromtimestamp(11 * hour / 1000, UTC)
    [item] = ranges.cut(
        ranges.compact([{"target": "s", "datapoints": points}]), start, end, max_points=4
    )
    assert item["datapoints"] == [[1.0, 0], [4.0, 3 * hour], [7.0, 6 * hour], [9.0, 9 * hour]]
    [notice] = item["meta"]["notices"]
    assert notice["severity"] == "info" and "buckets of 3 h" in notice["text"]
    assert "4 data points" in notice["text"]


# -- the cache's refresh ahead --------------------------------------------------------------


def test_an_answer_due_is_served_while_it_is_recomputed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A busy answer never expires under its readers: in the last part of its life the next
    reader gets it at once and starts one recomputation, which replaces it."""
    import asyncio

    clock = [100.0]
    monkeypatch.setattr("app.api.response_cache.time.monotonic", lambda: clock[0])
    cache = ResponseCache(ttl_s=5)
    calls: list[int] = []
    release = asyncio.Event()

    async def compute() -> int:
        calls.append(1)
        if len(calls) > 1:
            await release.wait()
        return len(calls)

    async def scenario() -> None:
        inflight: dict = {}
        assert await cached_read(cache, ("k",), compute, inflight) == 1
        clock[0] += 3.9  # not yet due (the last second of five)
        assert await cached_read(cache, ("k",), compute, inflight) == 1 and calls == [1]
        clock[0] += 0.2  # due: served at once, one recomputation starts
        assert await cached_read(cache, ("k",), compute, inflight) == 1
        assert await cached_read(cache, ("k",), compute, inflight) == 1
        await asyncio.sleep(0)
        assert calls == [1, 1]
        release.set()
        for _ in range(3):
            await asyncio.sleep(0)
        assert inflight == {}
        assert await cached_read(cache, ("k",), compute, inflight) == 2
        cache.clear()  # a write: nothing computed before it is served after it
        assert await cached_read(cache, ("k",), compute, inflight) == 3

    asyncio.run(scenario())


def test_a_failed_recomputation_leaves_the_answer_to_expire(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import asyncio

    clock = [100.0]
    monkeypatch.setattr("app.api.response_cache.time.monotonic", lambda: clock[0])
    cache = ResponseCache(ttl_s=5)
    outcomes: list[object] = [1, RuntimeError("database down"), 3]

    async def compute() -> int:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return int(outcome)  # type: ignore[call-overload]

    async def scenario() -> None:
        inflight: dict = {}
        assert await cached_read(cache, ("k",), compute, inflight) == 1
        clock[0] += 4.5
        assert await cached_read(cache, ("k",), compute, inflight) == 1  # starts the refresh
        for _ in range(3):
            await asyncio.sleep(0)
        assert inflight == {} and outcomes == [3]
        assert await cached_read(cache, ("k",), compute, inflight) == 1  # still fresh
        clock[0] += 1.0  # expired: the next reader computes
        assert await cached_read(cache, ("k",), compute, inflight) == 3

    asyncio.run(scenario())


def test_serving_starts_with_the_start_up_heap_frozen(client: TestClient) -> None:
    """A full garbage collection walks only what serving made, not the modules and the app
    (100-400 ms pauses under load otherwise, which every request in flight waited for)."""
    import gc

    assert gc.get_freeze_count() > 10_000
    assert json.loads(client.get("/healthz").text)
