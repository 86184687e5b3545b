"""The request guard: one middleware that every request passes before any route runs.

It refuses, with a JSON error and before any database work:

- a request without a valid API key to a route that needs one (401: a write, or a read when
  ``GPUCAST_READ_REQUIRES_KEY`` is set), from its headers alone, before a byte of its body is
  read: traffic without a key costs a header check, however large the body it sends. The body
  of a GET, HEAD or OPTIONS request is never read (no route reads it);

- a body over ``GPUCAST_MAX_BODY_BYTES`` (413), by its ``Content-Length`` or as it streams;
- a ``Content-Encoding`` other than ``identity`` (415): bodies are read as they are sent;
- a JSON body in UTF-16 or UTF-32 (415): the checks below read UTF-8, as the JSON RFC asks;
- a JSON body nested deeper than :data:`app.common.names.MAX_JSON_DEPTH` (422), found by scanning,
  so no parser recurses into it;
- a control character or an unpaired surrogate in the path, a query parameter or any key or
  string of a JSON body (422; the text rules of :mod:`app.common.names`). PostgreSQL refuses NUL in
  text where SQLite stores it, so the rule is applied here, the same for both databases.

The body is read once (it is bounded) and handed on unchanged to the route. A body over
:data:`OFF_LOOP_BYTES` is scanned on a worker thread (at most :data:`SCANS_AT_ONCE` at a time),
so the event loop goes on answering other requests meanwhile.
"""

from __future__ import annotations

import json
from email.message import Message
from typing import Any
from urllib.parse import parse_qsl

import anyio
from fastapi import FastAPI, Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.types import Message as AsgiMessage

from app.api.deps import check_key
from app.api.response_cache import ClearOnWriteMiddleware
from app.common.names import (
    check_json_depth,
    check_json_text,
    check_text,
    echo,
    json_may_hold_forbidden_text,
)
from app.errors import AppError, PayloadTooLargeError, UnsupportedMediaTypeError

__all__ = ["RequestGuard", "install"]

# The text rules as JSON Schema patterns, so clients and fuzzers can tell valid input apart:
# a path segment is a name (no control character at all); other text keeps tab, LF and CR.
NAME_PATTERN = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$"
TEXT_PATTERN = "^[^\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f]*$"
_ERROR_REF = {"$ref": "#/components/schemas/Error"}

_IDENTITY = {"", "identity"}

#: Bodies larger than this are scanned on a worker thread, not on the event loop (bytes).
OFF_LOOP_BYTES = 256 * 1024
#: Large bodies scanned at once; more wait their turn without holding a thread.
SCANS_AT_ONCE = 2

_BODILESS = frozenset({"GET", "HEAD", "OPTIONS"})


class RequestGuard:
    def __init__(self, app: ASGIApp, *, max_body_bytes: int, api: FastAPI | None = None) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.api = api
        self._scans: anyio.CapacityLimiter | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            headers = _headers(scope)
            _check_url(scope)
            _check_encoding(headers)
            self._authenticate(scope)
            body = (
                None
                if scope.get("method") in _BODILESS
                else await self._read_body(headers, receive)
            )
            if body and _is_json(headers.get("content-type")):
                await self._scan(body)
        except AppError as exc:
            auth = {"WWW-Authenticate": "Bearer"} if exc.status_code == 401 else None
            response = JSONResponse({"detail": str(exc)}, status_code=exc.status_code, headers=auth)
            await response(scope, receive, send)
            return
        # no route reads the body of a GET, HEAD or OPTIONS request: it is left unread
        await self.app(scope, receive if body is None else _replay(body, receive), send)

    def _authenticate(self, scope: Scope) -> None:
        """The key check of the route that will answer (raises AuthError), from the headers
        alone; the route's own dependency checks the same key again."""
        if self.api is None:
            return
        settings = self.api.state.settings
        if _is_write(scope) or (settings.read_requires_key and _is_read_post(scope)):
            check_key(Request(scope), settings)

    async def _scan(self, body: bytes) -> None:
        if len(body) <= OFF_LOOP_BYTES:
            _check_json(body)
            return
        if self._scans is None:
            self._scans = anyio.CapacityLimiter(SCANS_AT_ONCE)
        await anyio.to_thread.run_sync(_check_json, body, limiter=self._scans)

    async def _read_body(self, headers: dict[str, str], receive: Receive) -> bytes:
        limit = self.max_body_bytes
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise PayloadTooLargeError(
                f"request body is {int(declared)} bytes; the limit is {limit} bytes "
                "(GPUCAST_MAX_BODY_BYTES); split the upload or use the CLI"
            )
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return b"".join(chunks)
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise PayloadTooLargeError(
                    f"request body exceeds the limit of {limit} bytes (GPUCAST_MAX_BODY_BYTES)"
                )
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


def _is_read_post(scope: Scope) -> bool:
    return scope.get("method") == "POST" and str(scope.get("path", "")).startswith(
        ClearOnWriteMiddleware.READ_POSTS
    )


def _is_write(scope: Scope) -> bool:
    """Every route of these methods but the read POSTs needs the write key (``WriteAuth``)."""
    return scope.get("method") in ClearOnWriteMiddleware.WRITES and not _is_read_post(scope)


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


def _check_url(scope: Scope) -> None:
    # The path is already percent-decoded; a name in it never holds a control character.
    check_text(scope["path"], what="the request path", name=True)
    query = scope.get("query_string", b"").decode("latin-1")
    for key, value in parse_qsl(query, keep_blank_values=True):
        check_text(key, what=f"query parameter name {echo(key, 40)}")
        check_text(value, what=f"query parameter {echo(key, 40)}")


def _check_encoding(headers: dict[str, str]) -> None:
    encoding = headers.get("content-encoding", "").strip().lower()
    if encoding not in _IDENTITY:
        raise UnsupportedMediaTypeError(
            f"unsupported Content-Encoding {echo(encoding, 40)}; send the body uncompressed"
        )


def _is_json(content_type: str | None) -> bool:
    """What FastAPI parses as JSON: no Content-Type at all, or application/json or */*+json."""
    if not content_type:
        return True
    message = Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


def _check_json(body: bytes) -> None:
    _check_json_is_utf8(body)
    check_json_depth(body)
    if not json_may_hold_forbidden_text(body):
        return
    try:
        parsed = json.loads(body)
    except ValueError:
        return  # not JSON: the route answers that, with its own message
    check_json_text(parsed, what="body")


_UTF8 = frozenset({"utf-8", "utf-8-sig"})


def _check_json_is_utf8(body: bytes) -> None:
    """JSON bodies are UTF-8 (RFC 8259 section 8.1). Python's parser would also read UTF-16
    and UTF-32, which the byte scans of this guard cannot judge, so those are refused."""
    encoding = json.detect_encoding(body)
    if encoding not in _UTF8:
        raise UnsupportedMediaTypeError(
            f"the JSON body looks {encoding.upper()}-encoded; send JSON as UTF-8 (RFC 8259)"
        )


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> AsgiMessage:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def install(app: FastAPI, *, max_body_bytes: int) -> None:
    """Add the guard to ``app`` and state its rules in the OpenAPI schema."""
    app.add_middleware(RequestGuard, max_body_bytes=max_body_bytes, api=app)
    build = app.openapi

    def openapi() -> dict[str, Any]:
        schema = build()
        components = schema.get("components", {}).get("schemas", {})
        for path in schema.get("paths", {}).values():
            for operation in path.values():
                _document_operation(operation, components)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def _document_operation(operation: dict[str, Any], components: dict[str, Any]) -> None:
    for parameter in operation.get("parameters", []):
        pattern = NAME_PATTERN if parameter.get("in") == "path" else TEXT_PATTERN
        _add_pattern(parameter.get("schema", {}), pattern, components, set())
    body = operation.get("requestBody")
    if body is None:
        return
    for media in body.get("content", {}).values():
        _add_pattern(media.get("schema", {}), TEXT_PATTERN, components, set())
    responses = operation.setdefault("responses", {})
    for code, what in (("413", "body over the size limit"), ("415", "unsupported encoding")):
        responses.setdefault(
            code, {"description": what, "content": {"application/json": {"schema": _ERROR_REF}}}
        )


def _add_pattern(node: Any, pattern: str, components: dict[str, Any], seen: set[str]) -> None:
    """Give every free string in ``node`` (one without a pattern, format or fixed values) the
    text pattern, following references into the components of request schemas."""
    if not isinstance(node, dict):
        return
    ref = node.get("$ref", "")
    if ref.startswith("#/components/schemas/"):
        name = ref.rsplit("/", 1)[1]
        if name not in seen:
            seen.add(name)
            _add_pattern(components.get(name), pattern, components, seen)
        return
    if node.get("type") == "string" and not {"pattern", "format", "enum", "const"} & set(node):
        node["pattern"] = pattern
    if node.get("type") == "object" and node.get("additionalProperties", True) is not False:
        # dict[NameText, ...]: pydantic states the key rule as the one patternProperties key
        keys = list(node.get("patternProperties", {}))
        key_rule = node.setdefault("propertyNames", {})
        key_rule.setdefault("pattern", keys[0] if len(keys) == 1 else pattern)
    for key in ("properties", "patternProperties"):
        for child in node.get(key, {}).values():
            _add_pattern(child, pattern, components, seen)
    for key in ("items", "additionalProperties"):
        _add_pattern(node.get(key), pattern, components, seen)
    for key in ("anyOf", "oneOf", "allOf"):
        for child in node.get(key, []):
            _add_pattern(child, pattern, components, seen)
