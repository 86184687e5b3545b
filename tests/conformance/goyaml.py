"""YAML read as ``kubectl`` reads it: sigs.k8s.io/yaml decodes with go-yaml v2, whose
``resolve`` (resolve.go) types every plain scalar by its own table, then converts to JSON.

Transcribed here: the keyword map (v2: ``y``/``yes``/``on`` are true, ``n``/``no``/``off``
false, ``~``/``null`` null, ``.inf``/``.nan`` floats), the hint on the first character, and
for a sign or digit: a timestamp, Go's ``strconv.ParseInt(s, 0, 64)`` (underscores dropped;
``0x``, ``0o``, ``0b`` and leading-``0`` octal), ``ParseUint``, then a float when it matches
``yamlStyleFloat``; a leading ``.``: ``ParseFloat``. Quoted and block scalars are strings.
"""

from __future__ import annotations

import math
import re
from typing import Any

import yaml

_WORDS: dict[str, Any] = {
    **dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE"), True),
    **dict.fromkeys(("on", "On", "ON"), True),
    **dict.fromkeys(("n", "N", "no", "No", "NO", "false", "False", "FALSE"), False),
    **dict.fromkeys(("off", "Off", "OFF"), False),
    **dict.fromkeys(("", "~", "null", "Null", "NULL"), None),
    **dict.fromkeys((".nan", ".NaN", ".NAN"), math.nan),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), -math.inf),
}
_GO_INT = re.compile(r"([+-]?)(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)")
_YAML_STYLE_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_GO_FLOAT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt ][0-9].*)?")


def _go_int(text: str) -> int | None:
    match = _GO_INT.fullmatch(text)
    if match is None:
        return None
    sign, digits = match.groups()
    prefix = digits[:2].lower()
    base = {"0x": 16, "0o": 8, "0b": 2}.get(prefix)
    if base is not None:
        value = int(digits[2:], base)
    elif len(digits) > 1 and digits[0] == "0":
        value = int(digits[1:], 8)
    else:
        value = int(digits)
    value = -value if sign == "-" else value
    return value if -(2**63) <= value < 2**64 else None


def resolve(plain: str) -> Any:
    """The value go-yaml v2 gives an unquoted scalar (a str when it is a string)."""
    if plain in _WORDS:
        return _WORDS[plain]
    hint = plain[0] if plain else ""
    if hint == ".":
        return float(plain) if _GO_FLOAT.fullmatch(plain) else plain
    if hint not in "+-0123456789" or not hint:
        return plain
    if _TIMESTAMP.fullmatch(plain):
        return Timestamp(plain)  # a time to go-yaml, not the string it shows
    cleaned = plain.replace("_", "")
    as_int = _go_int(cleaned)
    if as_int is not None:
        return as_int
    if _YAML_STYLE_FLOAT.fullmatch(cleaned):
        return float(cleaned)
    return plain


class Timestamp(str):
    """A plain scalar go-yaml reads as a !!timestamp."""


def _value(node: yaml.Node) -> Any:
    if isinstance(node, yaml.MappingNode):
        return {_value(key): _value(value) for key, value in node.value}
    if isinstance(node, yaml.SequenceNode):
        return [_value(item) for item in node.value]
    return resolve(node.value) if node.style is None else node.value


def load(text: str) -> Any:
    """The JSON value kubectl sends for a one-document YAML text."""
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    return None if node is None else _value(node)


def is_string(value: Any) -> bool:
    """True for what the JSON side gets as a string (a timestamp is not the text shown)."""
    return isinstance(value, str) and not isinstance(value, Timestamp)
