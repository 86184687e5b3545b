"""Every page gpucast serves works on a cluster without internet access: the HTML and CSS load
nothing from another host (the API docs' scripts and styles come from the package)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest
from fastapi.testclient import TestClient

PAGES = ("/", "/docs", "/redoc")
# src/href attributes, CSS url(...) and @import, and script-set URLs in inline scripts.
_REFERENCE = re.compile(
    r"""(?:\b(?:src|href|action)\s*=\s*["']([^"']*)["'])"""
    r"""|(?:url\(\s*["']?([^"')]*)["']?\s*\))"""
    r"""|(?:\b(?:url|openapi_url|spec-url)\s*[:=]\s*["']([^"']*)["'])""",
    re.I,
)


def references(text: str) -> list[str]:
    return [next(g for g in match.groups() if g is not None) for match in _REFERENCE.finditer(text)]


def is_external(reference: str) -> bool:
    parts = urlsplit(reference)
    return bool(parts.netloc) or parts.scheme not in ("", "data")


def test_the_reference_finder_sees_a_cdn() -> None:
    page = '<script src="https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui-bundle.js">'
    assert [r for r in references(page) if is_external(r)]


@pytest.mark.parametrize("path", PAGES)
def test_no_served_page_loads_anything_from_another_host(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 200, path
    assert "text/html" in response.headers["content-type"]
    external = [r for r in references(response.text) if is_external(r)]
    assert external == [], f"{path} loads {external}"
    for reference in references(response.text):
        if reference.startswith("/") and not reference.startswith("/openapi.json"):
            asset = client.get(reference)
            assert asset.status_code == 200, f"{path} references {reference}: {asset.status_code}"
            if reference.endswith(".css"):
                outside = [r for r in references(asset.text) if is_external(r)]
                assert outside == [], f"{reference} loads {outside}"


def test_swagger_ui_asks_no_outside_validator(client: TestClient) -> None:
    page = client.get("/docs").text
    assert '"validatorUrl": null' in page
