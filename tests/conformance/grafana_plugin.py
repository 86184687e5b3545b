"""What Grafana 11 with the simpod-json-datasource plugin sends, reproduced from their source.

- Grafana's variable syntax (``variableRegex``: ``$var``, ``[[var:fmt]]``, ``${var:fmt}``) and
  ``templateSrv.replace`` with its formats. ``regex`` escapes with ``escapeRegex`` of
  @grafana/data (the same class as the older ``kbn.regexEscape``): a backslash before each of
  ``\\ ^ $ * + ? . ( ) | [ ] { } /``; a multi-value variable becomes ``(a|b)``, one value of
  a multi-value variable stays bare. ``json`` is the dashboard-scenes formatter (Grafana
  11.3): a string as it is, anything else ``JSON.stringify``-ed.
- The plugin (v0.6.5, ``src/DataSource.ts``): ``processTargets`` drops targets without
  ``target``; ``processTarget`` formats ``target`` with ``regex``; ``processPayload`` formats
  every value of an object payload, or of any payload in builder mode, with ``regex``
  (``value.toString()`` first, list items one by one), and fills a code-mode JSON string by
  replacing each variable with its ``json`` form (``cleanMatch``), returning ``{}`` whenever
  parsing fails. Annotations run as queries of one target (``annotations = {}``: Grafana's
  standard annotation support). Variable queries: ``{target: replace(query, 'regex')}``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any
from urllib.parse import quote

PLUGIN_VERSION = "0.6.5"  # the version docker-compose.yml installs

VARIABLE = re.compile(
    r"\$(\w+)|\[\[(\w+?)(?::(\w+))?\]\]|\$\{(\w+)(?:\.([^:^\}]+))?(?::([^\}]+))?\}", re.ASCII
)
_REGEX_SPECIAL = re.compile(r"[\\^$*+?.()|\[\]{}/]")
ALL = "$__all"


@dataclass
class Variable:
    """A template variable's current value (a list for a multi-value variable)."""

    value: str | list[str]
    options: tuple[str, ...] = ()
    all_value: str | None = None  # a custom "All" value


@dataclass
class Dashboard:
    variables: dict[str, Variable] = field(default_factory=dict)


def escape_regex(value: str) -> str:
    return _REGEX_SPECIAL.sub(lambda m: "\\" + m.group(0), value)


def js_string(value: Any) -> str:
    """JavaScript's ``String(value)`` / ``value.toString()`` for JSON values."""
    if value is None:
        raise TypeError("null has no toString()")  # the plugin's try/catch then sends {}
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _js_number(value)
    if isinstance(value, list):
        return ",".join("" if v is None else js_string(v) for v in value)
    if isinstance(value, dict):
        return "[object Object]"
    return str(value)


def _js_number(value: float) -> str:
    """Number.prototype.toString (ECMA-262 Number::toString, radix 10)."""
    if value == 0:
        return "0"
    sign, digits, exponent = Decimal(repr(float(value))).normalize().as_tuple()
    text = "".join(map(str, digits))
    k, n = len(text), len(text) + int(exponent)
    if k <= n <= 21:
        body = text + "0" * (n - k)
    elif 0 < n <= 21:
        body = text[:n] + "." + text[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * -n + text
    else:
        mantissa = text[0] + ("." + text[1:] if k > 1 else "")
        body = f"{mantissa}e{'+' if n - 1 >= 0 else '-'}{abs(n - 1)}"
    return ("-" if sign else "") + body


def format_value(value: str | list[str], fmt: str) -> str:
    if fmt == "regex":
        if isinstance(value, str):
            return escape_regex(value)
        escaped = [escape_regex(v) for v in value]
        return escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"
    if fmt == "json":
        return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    if fmt in ("raw", "text"):
        return value if isinstance(value, str) else ",".join(value)
    if fmt == "pipe":
        return value if isinstance(value, str) else "|".join(value)
    if fmt == "csv":
        return value if isinstance(value, str) else ",".join(value)
    if fmt in ("doublequote", "singlequote", "sqlstring"):
        items = [value] if isinstance(value, str) else value
        return ",".join(_quoted(v, fmt) for v in items)
    if fmt == "lucene":
        if isinstance(value, str) or len(value) == 1:
            return lucene_escape(value if isinstance(value, str) else value[0])
        return '("' + '" OR "'.join(lucene_escape(v) for v in value) + '")'
    if fmt == "percentencode":
        if isinstance(value, list):
            value = "{" + ",".join(value) + "}"
        return quote(value, safe="!'()*~-_.")  # encodeURIComponent
    # glob, Grafana's default
    if isinstance(value, list) and len(value) > 1:
        return "{" + ",".join(value) + "}"
    return value if isinstance(value, str) else ",".join(value)


def _quoted(value: str, fmt: str) -> str:
    if fmt == "doublequote":
        return '"' + value.replace('"', '\\"') + '"'
    if fmt == "singlequote":
        return "'" + value.replace("'", "\\'") + "'"
    return "'" + value.replace("'", "''") + "'"  # sqlstring


_LUCENE_SPECIAL = re.compile(r'([!*+\-=<>\s&|()\[\]{}^~?:\\/"])')


def lucene_escape(value: str) -> str:
    """Grafana's luceneEscape: a backslash before each of Lucene's special characters."""
    return _LUCENE_SPECIAL.sub(lambda m: "\\" + m.group(1), value)


def replace(text: str, dashboard: Dashboard, fmt: str | None = None) -> str:
    """templateSrv.replace(text, scopedVars, fmt) for the dashboard's current values."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2) or match.group(4)
        variable = dashboard.variables.get(name)
        if variable is None:
            return match.group(0)
        chosen = match.group(3) or match.group(6) or fmt or "glob"
        value = variable.value
        if value == ALL or value == [ALL]:
            if variable.all_value is not None and chosen not in ("text", "percentencode"):
                return replace(variable.all_value, dashboard)
            value = list(variable.options)
        return format_value(value, chosen)

    return VARIABLE.sub(one, text)


def _clean_match(match: re.Match[str], dashboard: Dashboard) -> str:
    replaced = replace(match.group(0), dashboard, "json")
    if len(replaced) >= 2 and replaced[0] == '"' and replaced[-1] == '"':
        return str(json.loads(replaced))
    return replaced


def process_payload(payload: Any, editor_mode: str | None, dashboard: Dashboard) -> Any:
    try:
        if isinstance(payload, str) and editor_mode != "builder":
            if not payload.strip():
                return {}
            return json.loads(VARIABLE.sub(lambda m: _clean_match(m, dashboard), payload))
        fresh = json.loads(payload) if isinstance(payload, str) else dict(payload)
        for key, value in fresh.items():
            if isinstance(value, list):
                fresh[key] = [replace(js_string(v), dashboard, "regex") for v in value]
            else:
                fresh[key] = replace(js_string(value), dashboard, "regex")
        return fresh
    except (ValueError, TypeError, AttributeError):
        return {}


def process_target(query: dict[str, Any], dashboard: Dashboard) -> dict[str, Any]:
    sent = dict(query)
    sent["payload"] = process_payload(query.get("payload", ""), query.get("editorMode"), dashboard)
    if isinstance(sent.get("target"), str):
        sent["target"] = replace(sent["target"], dashboard, "regex")
    return sent


def query_request(
    targets: list[dict[str, Any]],
    dashboard: Dashboard,
    time_range: dict[str, Any],
    filters: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The /query body for a panel's targets (hidden ones are filtered by filterQuery), with
    the dashboard's ad-hoc filters as Grafana passes them (``{key, operator, value}``; the
    multi-value operators ``=|`` and ``!=|`` add ``values``)."""
    kept = [t for t in targets if not t.get("hide") and t.get("target") is not None]
    return {
        "range": time_range,
        "interval": "1h",
        "intervalMs": 3_600_000,
        "maxDataPoints": 1200,
        "targets": [process_target(t, dashboard) for t in kept],
        "scopedVars": {},
        "filters": list(filters or []),
    }


def variable_request(query: dict[str, Any], dashboard: Dashboard) -> dict[str, Any]:
    """The /variable body of a query variable (``{query, format}`` as the dashboard stores it)."""
    if query.get("format") == "json":
        payload = json.loads(replace(query["query"], dashboard, "json"))
    else:
        payload = {"target": replace(query["query"], dashboard, "regex")}
    return {"payload": payload}


def payload_options_request(
    metric: str, name: str, payload: dict[str, Any], dashboard: Dashboard
) -> dict[str, Any]:
    """The /metric-payload-options body: the payload formatted as in builder mode."""
    formatted = process_payload(payload, "builder", dashboard)
    return {"metric": metric, "payload": formatted, "name": name}
