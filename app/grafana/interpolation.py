"""Payload values as the simpod-json-datasource plugin really sends them.

In builder mode, and for every payload stored as an object, the plugin passes each payload
value through Grafana's ``templateSrv.replace(value, scopedVars, 'regex')``
(``processPayload`` in the plugin's ``src/DataSource.ts``; so do its ``/metrics`` and
``/metric-payload-options`` calls). Grafana's ``regex`` format backslash-escapes
``\\ ^ $ * + ? . ( ) | [ ] { } /`` in a variable's value, and writes a multi-value variable
as one string ``(a|b)``: ``demo/servegen-m-small`` arrives as ``demo\\/servegen-m-small``,
``0.7`` as ``0\\.7``.

Every gpucast payload field is a name, a number, a choice or a boolean, and none of them can
contain those characters (series, pool and profile names allow only letters, digits and
``._:@+=-/``), so the value is read back exactly: escapes are removed, and an unescaped
``(…|…)`` is a list. A value typed literally (or sent by a code-mode JSON payload, which the
plugin fills in verbatim) has no backslash and passes through unchanged.

A dashboard may also name a format of its own (``${profile:glob}``): then a multi-value
variable arrives as Grafana writes that format, and each of them is read as the list it is —
``{a,b}`` (glob, Grafana's default), ``a|b`` (pipe), ``a,b`` (csv, raw, text), ``["a","b"]``
(json), ``"a","b"`` (doublequote), ``'a','b'`` (singlequote, sqlstring), ``("a" OR "b")``
(lucene) and ``%7Ba%2Cb%7D`` (percentencode). None of ``{}|,[]"'%`` can be part of a value
(see above), so no value is ever split by mistake. A variable's "All" with a custom all
value (``.*``, ``*``) or Grafana's ``$__all`` reads as :data:`ALL`: every one.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import unquote

#: "All" of a multi-value variable: every series (profile, pool) there is.
ALL = "$__all"
_ALL_VALUES = frozenset({ALL, ".*", "*"})

# Grafana's regex escapes, and those its lucene format adds (- = : and more)
_SPECIAL = "\\^$*+?.()|[]{}/" + "!-=<>&~:\"' "
_ESCAPED = re.compile(r"\\(.)", re.DOTALL)


def unescape(text: str) -> str:
    """``text`` with Grafana's regex escapes removed (``demo\\/a\\.b`` → ``demo/a.b``)."""
    return _ESCAPED.sub(lambda m: m.group(1) if m.group(1) in _SPECIAL else m.group(0), text)


def _split_unescaped(text: str, separator: str) -> list[str] | None:
    """``text`` split at unescaped ``separator``; None when it holds an unescaped
    parenthesis (then it is not a list Grafana wrote)."""
    parts, current, index = [], [], 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            current.append(text[index : index + 2])
            index += 2
            continue
        if char == separator:
            parts.append("".join(current))
            current = []
        elif char in "()":
            return None
        else:
            current.append(char)
        index += 1
    parts.append("".join(current))
    return parts


def values(text: str) -> str | list[str]:
    """One value as sent: a multi-value ``(a|b)`` is the list ``[a, b]`` (``()`` is empty), as
    are the other formats' lists (module docstring); anything else is the single un-escaped
    value. An "All" value is :data:`ALL`."""
    found = _listed(text)
    if found is None:
        return _one(text)
    return [_one(part) for part in found]


def _one(text: str) -> str:
    """A single value: un-escaped, without the quotes of Grafana's quoting formats."""
    value = unescape(text)
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1]
    return ALL if value in _ALL_VALUES else value


def _listed(text: str) -> list[str] | None:
    """The parts of a multi-value variable as Grafana wrote it, or None for a single value."""
    if "%" in text:
        return _listed(unquote(text)) or [unquote(text)]
    if len(text) >= 2 and text[0] == "(" and text[-1] == ")":
        inner = text[1:-1]
        if " OR " in inner:  # lucene: ("a" OR "b")
            return inner.split(" OR ")
        return _split_unescaped(inner, "|") if inner else []
    if len(text) >= 2 and text[0] == "{" and text[-1] == "}":  # glob
        return text[1:-1].split(",") if len(text) > 2 else []
    if len(text) >= 2 and text[0] == "[" and text[-1] == "]":  # json
        try:
            parsed = json.loads(text)
        except (ValueError, RecursionError):  # not JSON, or nested beyond the parser
            return None
        if isinstance(parsed, list) and all(isinstance(v, str | int | float) for v in parsed):
            return [str(v) for v in parsed]
        return None
    for separator in ("|", ","):  # pipe; csv, raw, text and the quoting formats
        parts = _split_unescaped(text, separator)
        if parts is not None and len(parts) > 1:
            return parts
    return None


def plugin_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` with every string value read as the plugin formatted it (lists flattened)."""
    read: dict[str, Any] = {}
    for key, value in payload.items():
        if isinstance(value, str):
            read[key] = values(value)
        elif isinstance(value, list):
            items: list[Any] = []
            for item in value:
                found = values(item) if isinstance(item, str) else item
                items.extend(found if isinstance(found, list) else [found])
            read[key] = items
        else:
            read[key] = value
    return read
