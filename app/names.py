"""Validation of user-chosen names (series, GPU profiles)."""

from __future__ import annotations

import re

from app.errors import InputError

MAX_NAME_LENGTH = 200
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+=-]*(/[A-Za-z0-9._:@+=-]+)*")
# The same rule for the OpenAPI schema, with the '.'/'..' segment rule folded in (each later
# segment has a character other than '.'), so clients and fuzzers can tell valid names apart.
SERIES_NAME_PATTERN = (
    r"^[A-Za-z0-9][A-Za-z0-9._:@+=-]*(/[A-Za-z0-9._:@+=-]*[A-Za-z0-9_:@+=-][A-Za-z0-9._:@+=-]*)*$"
)
# Path segments that would collide with sub-resources of /v1/series/{name}.
RESERVED_LAST_SEGMENTS = frozenset(
    {"observations", "forecast", "capacity", "kubernetes", "plot.png", "runs", "accuracy", "source"}
)


def validate_series_name(name: str) -> str:
    """Return ``name`` if it is a valid series name, else raise :class:`InputError`.

    Names look like ``prod-us/llama-3.1-70b``: letters, digits and ``._:@+=-`` in segments
    separated by single ``/``; no ``..`` segment, no control characters, at most 200 characters.
    """
    if not isinstance(name, str) or not name:
        raise InputError("series name must be a non-empty string")
    if len(name) > MAX_NAME_LENGTH:
        raise InputError(f"series name is {len(name)} characters long; the limit is 200")
    # fullmatch, not match with '$': '$' also matches before a trailing newline.
    if not _NAME_RE.fullmatch(name):
        raise InputError(
            f"invalid series name {name[:80]!r}: use letters, digits and ._:@+=- in segments "
            "separated by single '/', starting with a letter or digit"
        )
    segments = name.split("/")
    if any(segment in {".", ".."} for segment in segments):
        raise InputError(f"invalid series name {name!r}: '.' and '..' segments are not allowed")
    if len(segments) > 1 and segments[-1] in RESERVED_LAST_SEGMENTS:
        raise InputError(
            f"invalid series name {name!r}: its last segment {segments[-1]!r} is reserved"
        )
    return name
