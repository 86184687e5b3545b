"""A series' source, validated in one place for the CLI and the API, and kept out of messages.

A source is what ``gpucast ingest prometheus`` takes, once per metric: the Prometheus base URL
and the PromQL for ``requests`` and, optionally, ``prompt_tokens`` and ``completion_tokens``.
Credentials are a bearer token or a user and password in the URL; both are stored, never shown:
:func:`redact_url` and :func:`redact` take them out of everything printed or returned.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import httpx

from app.common import options
from app.common.urls import USERINFO_RE, redact_url, scrub
from app.errors import InputError

MAX_URL_LENGTH = 2000
MAX_QUERY_LENGTH = 4000
MAX_TOKEN_LENGTH = 4096
MAX_TIMEOUT_S = 300.0
MAX_LOOKBACK_HOURS = 24 * 90
DEFAULT_TIMEOUT_S = options.SOURCE_TIMEOUT_S
DEFAULT_LOOKBACK_HOURS = options.SOURCE_LOOKBACK_HOURS

_CHAR = r"[A-Za-z0-9._~!$&'()*+,;=-]|%[0-9A-Fa-f]{2}"
_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
_TOP_LABEL = r"[A-Za-z_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_PORT = r"(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"
# http(s)://[user[:password]@]host[:port][/path]: a DNS name (its last label starts with a
# letter or "_") or a dotted IPv4 address; no query or fragment, since gpucast appends
# /api/v1/query_range to it.
URL_PATTERN = (
    rf"^https?://(?:(?:{_CHAR})+(?::(?:{_CHAR})*)?@)?"
    rf"(?:(?:{_LABEL}\.)*{_TOP_LABEL}|(?:{_OCTET}\.){{3}}{_OCTET})"
    rf"(?::{_PORT})?(?:/(?:{_CHAR}|[:@])*)*$"
)
# Anything but control characters (tab and newlines are fine in PromQL), with at least one
# visible character. (Lone surrogates, which JSON can carry but no database can store, are
# rejected apart: a surrogate range would make the pattern unreadable to Rust-based tools.)
QUERY_PATTERN = r"^[\t\n\r ]*[^\x00-\x20\x7f][^\x00-\x08\x0b\x0c\x0e-\x1f\x7f]*$"
TOKEN_PATTERN = r"^[!-~]+$"  # visible ASCII: it goes into an HTTP header as is

_URL_RE = re.compile(URL_PATTERN)
_USERINFO_RE = USERINFO_RE
_QUERY_RE = re.compile(QUERY_PATTERN)
_TOKEN_RE = re.compile(TOKEN_PATTERN)
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class SourceSpec:
    """Where and how the hourly loop imports one series (see ``gpucast ingest prometheus``)."""

    url: str
    requests_query: str
    prompt_tokens_query: str | None = None
    completion_tokens_query: str | None = None
    bearer_token: str | None = field(default=None, repr=False)
    shift: bool = True
    timeout_s: float = DEFAULT_TIMEOUT_S
    lookback_hours: int = DEFAULT_LOOKBACK_HOURS

    def validate(self) -> SourceSpec:
        """Raise :class:`InputError` naming the first bad field; return ``self`` otherwise."""
        validate_url(self.url)
        validate_query(self.requests_query, metric="requests")
        for metric, query in self.queries()[1:]:
            validate_query(query, metric=metric)
        if self.bearer_token is not None:
            validate_token(self.bearer_token)
        validate_limits(timeout_s=self.timeout_s, lookback_hours=self.lookback_hours)
        return self

    def queries(self) -> list[tuple[str, str]]:
        """(metric, PromQL) pairs, requests first: token hours need their requests stored."""
        pairs = [("requests", self.requests_query)]
        for metric, query in (
            ("prompt_tokens", self.prompt_tokens_query),
            ("completion_tokens", self.completion_tokens_query),
        ):
            if query is not None:
                pairs.append((metric, query))
        return pairs


def validate_limits(*, timeout_s: float, lookback_hours: int) -> None:
    if not 0 < timeout_s <= MAX_TIMEOUT_S:
        raise InputError(f"timeout must be in (0, {MAX_TIMEOUT_S:g}] seconds")
    if not 1 <= lookback_hours <= MAX_LOOKBACK_HOURS:
        raise InputError(f"lookback must be 1..{MAX_LOOKBACK_HOURS} hours")


def validate_url(url: str) -> str:
    if len(url) > MAX_URL_LENGTH:
        raise InputError(f"the source URL is {len(url)} characters long; the limit is 2000")
    if not _URL_RE.fullmatch(url):
        raise InputError(
            f"invalid source URL {redact_url(url)[:100]!r}: use http(s)://host[:port][/path], "
            "a DNS name or IPv4 address, without query or fragment"
        )
    return url


def validate_query(query: str, *, metric: str) -> str:
    if len(query) > MAX_QUERY_LENGTH:
        raise InputError(
            f"the {metric} query is {len(query)} characters long; the limit is {MAX_QUERY_LENGTH}"
        )
    if not _QUERY_RE.fullmatch(query) or _SURROGATE_RE.search(query):
        raise InputError(
            f"the {metric} query must be PromQL with at least one visible character and no "
            "control characters"
        )
    return query


def validate_token(token: str) -> str:
    if not 1 <= len(token) <= MAX_TOKEN_LENGTH or not _TOKEN_RE.fullmatch(token):
        raise InputError(
            f"the bearer token must be 1..{MAX_TOKEN_LENGTH} visible ASCII characters "
            "(no spaces or newlines)"
        )
    return token


def plain_url(url: str) -> str:
    """``url`` without its user and password (what is shown in messages and requested)."""
    return str(httpx.URL(url).copy_with(username=None, password=None))


def redact(text: str, spec: SourceSpec) -> str:
    """``text`` with every credential of ``spec`` (token, URL user info) replaced by ``***``."""
    return scrub(text, spec.url, [spec.bearer_token or ""])
