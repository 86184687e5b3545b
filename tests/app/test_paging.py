"""Lists and the overview come in pages with a total: 1,200 series are read 500 (or ``limit``)
at a time with ``X-Total-Count`` and ``Link`` headers, and the overview shows 50 cards a page
with the total and links to the neighbouring pages. The body of a list stays a JSON list."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from fastapi.testclient import TestClient
from sqlalchemy import insert

from app.api.paging import DEFAULT_LIMIT, MAX_LIMIT
from app.db import Database
from app.db.models import Observation, Series
from app.views.overview import PAGE_SIZE

COUNT = 1_200


def _many_series(database: Database, count: int = COUNT) -> list[str]:
    names = [f"svc-{i:05d}" for i in range(count)]
    with database.transaction() as session:
        session.execute(insert(Series), [{"name": n, "labels": {}} for n in names])
    return names


def _next(response) -> str | None:  # type: ignore[no-untyped-def]
    match = re.search(r'<([^>]+)>; rel="next"', response.headers.get("Link", ""))
    return match.group(1) if match else None


def test_series_list_pages_through_every_series_once(
    client: TestClient, database: Database
) -> None:
    names = _many_series(database)
    first = client.get("/v1/series")
    assert first.status_code == 200
    assert first.headers["X-Total-Count"] == str(COUNT)
    assert len(first.json()) == DEFAULT_LIMIT
    seen = [row["name"] for row in first.json()]
    url = _next(first)
    while url is not None:
        page = client.get(url)
        assert page.status_code == 200 and page.headers["X-Total-Count"] == str(COUNT)
        assert 'rel="prev"' in page.headers["Link"]
        seen += [row["name"] for row in page.json()]
        url = _next(page)
    assert seen == names  # every series once, in name order


def test_series_list_limit_offset_and_stats(client: TestClient, database: Database) -> None:
    _many_series(database, 3)
    with database.transaction() as session:
        sid = session.query(Series.id).filter(Series.name == "svc-00001").scalar()
        hours = [datetime(2026, 11, 1, h, tzinfo=UTC) for h in (0, 5)]
        session.execute(
            insert(Observation),
            [{"series_id": sid, "hour": h, "requests": 1.0} for h in hours],
        )
    page = client.get("/v1/series", params={"limit": 1, "offset": 1})
    assert page.status_code == 200 and page.headers["X-Total-Count"] == "3"
    (row,) = page.json()
    assert row["name"] == "svc-00001" and row["observations"] == 2
    assert row["last_hour"].startswith("2026-11-01T05:00")
    assert client.get("/v1/series", params={"limit": 1, "offset": 2}).json()[0]["observations"] == 0
    assert 'rel="next"' not in client.get("/v1/series", params={"offset": 2}).headers.get(
        "Link", ""
    )
    for bad in ({"limit": 0}, {"limit": MAX_LIMIT + 1}, {"offset": -1}, {"limit": "x"}):
        response = client.get("/v1/series", params=bad)
        assert response.status_code == 422, bad
        assert "detail" in response.json()


def test_events_list_pages(client: TestClient) -> None:
    for day in range(1, 6):
        body = {
            "name": f"launch {day}",
            "start": f"2026-11-0{day}T00:00:00Z",
            "end": f"2026-11-0{day}T06:00:00Z",
            "multiplier": 1.5,
        }
        assert client.post("/v1/events", json=body).status_code == 201
    page = client.get("/v1/events", params={"limit": 2, "offset": 2})
    assert page.status_code == 200 and page.headers["X-Total-Count"] == "5"
    assert [e["name"] for e in page.json()] == ["launch 3", "launch 4"]
    assert 'rel="next"' in page.headers["Link"] and 'rel="prev"' in page.headers["Link"]
    window = client.get("/v1/events", params={"start": "2026-11-04T00:00:00Z", "limit": 1})
    assert window.headers["X-Total-Count"] == "2"


def test_overview_shows_one_page_of_cards_with_the_total(
    client: TestClient, database: Database
) -> None:
    _many_series(database, PAGE_SIZE * 2 + 5)
    first = client.get("/")
    assert first.status_code == 200
    html = first.text
    assert f"{PAGE_SIZE * 2 + 5:,} series" in html
    assert html.count("data-series=") == PAGE_SIZE
    assert f"series 1–{PAGE_SIZE} of {PAGE_SIZE * 2 + 5}" in html
    assert 'rel="next"' in html and 'rel="prev"' not in html
    last = client.get("/", params={"page": 3})
    assert last.text.count("data-series=") == 5
    assert "svc-00104" in last.text and "svc-00000" not in last.text
    assert 'rel="prev"' in last.text and 'rel="next"' not in last.text
    assert client.get("/", params={"page": 0}).status_code == 422
