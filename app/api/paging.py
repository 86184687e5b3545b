"""Pages of a list endpoint: ``limit``/``offset`` query parameters, the body stays the JSON list
it always was, and the headers carry the total (``X-Total-Count``) and the neighbouring pages
(``Link: <...>; rel="next"``, RFC 8288, relative to the request's own path). A list read is
bounded by its page: 100,000 series are read 500 at a time, not all at once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Query, Request, Response

DEFAULT_LIMIT = 500
MAX_LIMIT = 1000
MAX_OFFSET = 10_000_000


@dataclass(frozen=True)
class PageParams:
    limit: int
    offset: int


def _page(
    limit: Annotated[
        int, Query(ge=1, le=MAX_LIMIT, description=f"items per page (at most {MAX_LIMIT})")
    ] = DEFAULT_LIMIT,
    offset: Annotated[
        int, Query(ge=0, le=MAX_OFFSET, description="items to skip (see the Link header)")
    ] = 0,
) -> PageParams:
    return PageParams(limit=limit, offset=offset)


Page = Annotated[PageParams, Depends(_page)]

PAGE_HEADERS = {
    "X-Total-Count": {"description": "items in the whole list", "schema": {"type": "integer"}},
    "Link": {
        "description": 'the next and previous pages (rel="next", rel="prev"), when there are',
        "schema": {"type": "string"},
    },
}


def set_page_headers(response: Response, request: Request, page: PageParams, total: int) -> None:
    """The total and the links to the pages beside ``page`` of a list of ``total`` items."""
    response.headers["X-Total-Count"] = str(total)
    links = []
    if page.offset + page.limit < total:
        links.append(f'<{_url(request, page.offset + page.limit, page.limit)}>; rel="next"')
    if page.offset > 0:
        previous = max(0, min(page.offset - page.limit, total - page.limit))
        links.append(f'<{_url(request, previous, page.limit)}>; rel="prev"')
    if links:
        response.headers["Link"] = ", ".join(links)


def _url(request: Request, offset: int, limit: int) -> str:
    url = request.url.include_query_params(offset=offset, limit=limit)
    return f"{url.path}?{url.query}"
