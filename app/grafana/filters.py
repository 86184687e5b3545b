"""Ad-hoc filters on the key ``series``, with Grafana's operators.

Grafana posts a dashboard's ad-hoc filters as the query's top-level ``filters`` (``adhocFilters``
before plugin 0.6): ``{"key", "operator", "value"}``, and for its multi-value operators
``"=|"`` / ``"!=|"`` a ``values`` list too. A series is shown when it matches one of the
selecting filters (``=``, ``=|``, ``=~``; none: every series) and none of the excluding ones
(``!=``, ``!=|``, ``!~``).

``=~`` and ``!~`` take a regular expression in RE2 syntax that must match the whole name, as
Prometheus and Loki read them (``prod-(us|eu)/.*``). RE2 matches in time linear in the name,
so no pattern can stall the server; one it cannot compile is a 400 naming the filter.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import re2  # type: ignore[import-untyped]

from app.common import names
from app.grafana.errors import GrafanaInputError

OPERATORS = ("=", "!=", "=~", "!~", "=|", "!=|")
MAX_PATTERN_CHARS = 500

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a bad pattern is the user's 400, not a line in the server log
_OPTIONS.max_mem = 8 << 20


@dataclass(frozen=True)
class SeriesFilter:
    """What the ad-hoc filters select: names given exactly and whole-name patterns, to keep
    (``equal``, ``patterns``) or to drop (``not_equal``, ``not_patterns``)."""

    equal: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()
    not_equal: tuple[str, ...] = ()
    not_patterns: tuple[str, ...] = ()

    @property
    def selects(self) -> bool:
        """True when the filters choose series (else every series is a candidate)."""
        return bool(self.equal or self.patterns)

    def selected(self, every: Iterable[str]) -> list[str]:
        """The named series first (in the filters' order), then every other name that one of
        the patterns matches (in ``every``'s order); excluded names dropped."""
        chosen = dict.fromkeys(self.equal)
        if self.patterns:
            compiled = [_compile(p) for p in self.patterns]
            chosen.update(dict.fromkeys(n for n in every if any(c.fullmatch(n) for c in compiled)))
        return self.kept(chosen)

    def kept(self, candidates: Iterable[str]) -> list[str]:
        """``candidates`` without the names an excluding filter drops."""
        dropped = set(self.not_equal)
        compiled = [_compile(p) for p in self.not_patterns]
        return [
            n for n in candidates if n not in dropped and not any(c.fullmatch(n) for c in compiled)
        ]


def _compile(pattern: str) -> re2._Regexp:
    try:
        return re2.compile(pattern, options=_OPTIONS)
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise GrafanaInputError(
            f"ad-hoc filter pattern {names.echo(pattern)} is not a regular expression RE2 "
            f"accepts ({reason}); write it as in Prometheus, e.g. prod-(us|eu)/.*"
        ) from exc


def series_filter(filters: Sequence[tuple[str, str, str, Sequence[str]]]) -> SeriesFilter:
    """The filter of ``(key, operator, value, values)`` items; an unknown key or operator, or
    a pattern RE2 cannot compile, is a GrafanaInputError (400) naming it."""
    found: dict[str, dict[str, None]] = {op: {} for op in OPERATORS}
    for key, operator, value, values in filters:
        if key != "series":
            raise GrafanaInputError(
                f"ad-hoc filter key {names.echo(key)} is unknown; the only key is 'series'"
            )
        if operator not in OPERATORS:
            raise GrafanaInputError(
                f"ad-hoc filter operator {names.echo(operator)} is not supported on series; "
                f"use one of {', '.join(OPERATORS)}"
            )
        items = list(values) if operator.endswith("|") and values else [value]
        for item in items:
            if operator.endswith("~"):
                if len(item) > MAX_PATTERN_CHARS:
                    raise GrafanaInputError(
                        f"ad-hoc filter pattern has {len(item)} characters; the limit is "
                        f"{MAX_PATTERN_CHARS}"
                    )
                _compile(item)
            found[operator][item] = None
    return SeriesFilter(
        equal=(*found["="], *found["=|"]),
        patterns=tuple(found["=~"]),
        not_equal=(*found["!="], *found["!=|"]),
        not_patterns=tuple(found["!~"]),
    )
