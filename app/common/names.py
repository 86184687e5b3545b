"""Validation of user-chosen names (series, GPU profiles) and of user text in general."""

from __future__ import annotations

import itertools
import json
import re
from typing import Annotated, Any

from pydantic import AfterValidator, Field

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
    {
        "observations",
        "forecast",
        "capacity",
        "kubernetes",
        "plot.png",
        "runs",
        "accuracy",
        "source",
        "deployment",
    }
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
            f"invalid series name {echo(name)}: use letters, digits and ._:@+=- in segments "
            "separated by single '/', starting with a letter or digit"
        )
    segments = name.split("/")
    if any(segment in {".", ".."} for segment in segments):
        raise InputError(f"invalid series name {echo(name)}: '.' and '..' segments are not allowed")
    if len(segments) > 1 and segments[-1] in RESERVED_LAST_SEGMENTS:
        raise InputError(
            f"invalid series name {echo(name)}: its last segment {segments[-1]!r} is reserved"
        )
    return name


# --- text rules: every string that reaches the database or an error message ----------------
#
# PostgreSQL cannot store NUL in text, and psycopg cannot encode an unpaired surrogate (what
# Python makes of invalid UTF-8 in argv, or of a JSON "\ud800"); SQLite takes both. So input
# validation decides, the same on both databases: unpaired surrogates and the C0 control
# characters and DEL are refused in every string, except tab, line feed and carriage return in
# free text (descriptions, PromQL); a name refuses those too, and the C1 controls U+0080..9F.

MAX_ECHO_CHARS = 80
MAX_JSON_DEPTH = 32
_TEXT_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")
_NAME_FORBIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_CONTROL_NAMES = {0x00: "NUL", 0x09: "TAB", 0x0A: "LF", 0x0D: "CR", 0x1B: "ESC", 0x7F: "DEL"}
# A JSON string literal, and a brackets-only view of what is left once strings are removed.
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_BRACKET_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
# Escapes (or raw bytes) that can decode to a forbidden character; without one, nothing to walk.
_SUSPECT_JSON = re.compile(rb"\\u(?:00[01]|007[fF]|[dD][89a-fA-F])|\x7f", re.IGNORECASE)


def echo(value: object, limit: int = MAX_ECHO_CHARS) -> str:
    """``repr`` of user input for an error message, cut to ``limit`` characters with an ellipsis
    (a 10 kB name must not come back 10 kB long)."""
    if isinstance(value, str):
        return repr(value) if len(value) <= limit else repr(value[:limit]) + "…"
    shown = repr(value)
    return shown if len(shown) <= limit else shown[:limit] + "…"


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def text_problem(text: str, *, name: bool = False) -> str | None:
    """What makes ``text`` unacceptable (see the rules above), or None if it is fine."""
    match = (_NAME_FORBIDDEN if name else _TEXT_FORBIDDEN).search(text)
    if match is None:
        return None
    code = ord(match.group())
    position = match.start()
    if 0xD800 <= code <= 0xDFFF:
        return f"contains an unpaired surrogate U+{code:04X} at position {position} (not UTF-8)"
    label = _CONTROL_NAMES.get(code)
    shown = f"U+{code:04X} ({label})" if label else f"U+{code:04X}"
    return f"contains the control character {shown} at position {position}"


def check_text(text: str, *, what: str, name: bool = False) -> str:
    """``text`` if it passes the text rules (``name``: the stricter rule), else an InputError."""
    problem = text_problem(text, name=name)
    if problem is not None:
        raise InputError(f"{what} {problem}; remove it")
    return text


def check_name_text(text: str) -> str:
    """For pydantic ``AfterValidator``: a name with no control character at all."""
    problem = text_problem(text, name=True)
    if problem is not None:
        raise ValueError(f"a name must not contain control characters: it {problem}")
    return text


# The OpenAPI pattern only documents the rule; check_name_text enforces it with a clear message.
NAME_TEXT_PATTERN = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$"
NameText = Annotated[
    str,
    AfterValidator(check_name_text),
    Field(json_schema_extra={"pattern": NAME_TEXT_PATTERN}),
]


def json_depth(data: bytes | str) -> int:
    """How deeply arrays and objects nest in a JSON text (found without parsing it, so a hostile
    body cannot exhaust the recursion of a parser)."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    brackets = _JSON_STRING.sub(b"", raw).translate(None, delete=_NOT_BRACKETS)
    return max(itertools.accumulate(_BRACKET_STEP[b] for b in brackets), default=0)


def check_json_depth(data: bytes | str, *, what: str = "JSON body") -> None:
    depth = json_depth(data)
    if depth > MAX_JSON_DEPTH:
        raise InputError(f"{what} nests {depth} levels deep; the limit is {MAX_JSON_DEPTH}")


def parse_json(data: bytes | str, *, what: str) -> Any:
    """A user's JSON text (a file, a body) as Python objects, or an InputError in one line:
    nesting beyond MAX_JSON_DEPTH (checked before parsing), text that is not JSON, bytes that
    are not UTF-8, or an integer longer than Python converts (4300 digits)."""
    check_json_depth(data, what=what)
    try:
        return json.loads(data)
    except json.JSONDecodeError as exc:
        raise InputError(f"{what}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{what}: not UTF-8 text (byte {exc.start})") from None
    except ValueError as exc:  # the integer-length limit of int()
        raise InputError(f"{what}: not readable JSON ({str(exc).split(';')[0]})") from None


def json_may_hold_forbidden_text(data: bytes) -> bool:
    """False when no string of the JSON text can break the text rules (a fast pre-check)."""
    return _SUSPECT_JSON.search(data) is not None


def check_json_text(value: Any, *, what: str = "body") -> None:
    """Apply the text rules to every key and string of parsed JSON; the error names where."""
    stack: list[tuple[str, Any]] = [(what, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            check_text(item, what=where)
        elif isinstance(item, dict):
            for key, child in item.items():
                check_text(key, what=f"a key of {where}")
                stack.append((f"{where}.{_short(key, 40)}", child))
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", child) for i, child in enumerate(item))
