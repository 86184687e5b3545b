"""The rules KEDA's scalers apply to trigger metadata, and how they then read it.

- cron (pkg/scalers/cron_scaler.go): ``start``, ``end``, ``timezone``, ``desiredReplicas``
  required; ``start``/``end`` parsed by robfig/cron with Minute|Hour|Dom|Month|Dow (five
  fields, no descriptors); ``start == end`` is refused ("start and end can not have exactly
  same time input"); ``desiredReplicas`` an int64, not 0; ``timezone`` loaded with
  ``time.LoadLocation`` on every poll. Activity: with ``next(start)`` and ``next(end)``
  strictly after now, the trigger is active when the end comes first; it then reports
  ``desiredReplicas``, else 1. ``next`` is robfig's ``SpecSchedule.Next`` (spec.go) in the
  trigger's zone: it steps real time (an hour, a minute) and reads the zone's wall clock, so a
  local time the clocks skip never fires (a window whose end is skipped stays active until the
  next day's end) and a repeated one fires twice; Go's ``time.Date`` resolves a wall time
  that does not exist, or exists twice, as ``time.go`` does.
- metrics-api: ``url`` and ``valueLocation`` required, ``format`` one of json/xml/yaml/
  prometheus, ``targetValue`` a float; ``authMode: bearer`` needs an authenticationRef.
- prometheus: ``serverAddress``, ``query`` and a float ``threshold`` required;
  ``ignoreNullValues`` a Go bool (``strconv.ParseBool``), default true. A query that returns
  no series is then the value 0 (true) or an error, "prometheus query … returned empty" (false).
- Numbers: Go's ``strconv.ParseFloat``; targets become milli-unit Quantities — today
  ``fmt.Sprintf("%.3f", v)`` (older releases truncated ``int64(v * 1000)``).
- fallback (pkg/fallback/fallback.go): a failing trigger's count of consecutive failures
  goes up on each failed poll, and KEDA falls back once it is greater than failureThreshold.
  ``doFallback`` then answers, by ``fallback.behavior`` (KEDA >= 2.17), ``replicas``
  ("static", the default and any value it does not know), the target's current replicas
  ("currentReplicas") or the larger ("currentReplicasIfHigher") or smaller
  ("currentReplicasIfLower") of the two, times the AverageValue target.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import cache
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("dom", 1, 31), ("month", 1, 12), ("dow", 0, 6))
MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
NAMES = {
    "month": {m: i + 1 for i, m in enumerate(MONTHS)},
    "dow": {d: i for i, d in enumerate(DAYS)},
}
_GO_FLOAT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?(inf|infinity|nan)", re.I)


@dataclass(frozen=True)
class Schedule:
    minute: frozenset[int]
    hour: frozenset[int]
    dom: frozenset[int]
    month: frozenset[int]
    dow: frozenset[int]
    dom_star: bool
    dow_star: bool

    def matches(self, moment: datetime) -> bool:
        if moment.minute not in self.minute or moment.hour not in self.hour:
            return False
        if moment.month not in self.month:
            return False
        day = moment.day in self.dom
        weekday = (moment.isoweekday() % 7) in self.dow
        return (day and weekday) if (self.dom_star or self.dow_star) else (day or weekday)

    def day_matches(self, local: datetime) -> bool:
        day = local.day in self.dom
        weekday = (local.isoweekday() % 7) in self.dow
        return (day and weekday) if (self.dom_star or self.dow_star) else (day or weekday)

    def next_after(self, moment: datetime, zone: ZoneInfo) -> datetime:
        """robfig's SpecSchedule.Next (seconds field 0) in ``zone``: the first activation
        strictly after the aware ``moment``, as an aware UTC time. Field by field (month,
        day, hour, minute, second): while the wall clock's field does not fit, step real time
        (the first step resets the smaller fields), starting over when the field wraps."""
        fields: list[tuple[Any, Any, Any, Any]] = [
            (
                lambda w: w.month in self.month,
                lambda t, w: go_date(w.year, w.month, 1, 0, 0, 0, zone),
                lambda t: _add_date(t, zone, months=1),
                lambda w: w.month == 1,
            ),
            (
                self.day_matches,
                lambda t, w: go_date(w.year, w.month, w.day, 0, 0, 0, zone),
                lambda t: _next_midnight(t, zone),
                lambda w: w.day == 1,
            ),
            (
                lambda w: w.hour in self.hour,
                lambda t, w: go_date(w.year, w.month, w.day, w.hour, 0, 0, zone),
                lambda t: t + timedelta(hours=1),
                lambda w: w.hour == 0,
            ),
            (
                lambda w: w.minute in self.minute,
                lambda t, w: t.replace(second=0),
                lambda t: t + timedelta(minutes=1),
                lambda w: w.minute == 0,
            ),
            (
                lambda w: w.second == 0,
                lambda t, w: t,
                lambda t: t + timedelta(seconds=1),
                lambda w: w.second == 0,
            ),
        ]
        t = moment.astimezone(UTC).replace(microsecond=0) + timedelta(seconds=1)
        added = False
        year_limit = _wall(t, zone).year + 5
        while True:  # robfig's WRAP
            wall = _wall(t, zone)
            if wall.year > year_limit:
                raise ValueError("no activation within five years")
            wrapped = False
            for fits, reset, step, wraps in fields:
                while not fits(wall):
                    if not added:
                        added = True
                        t = reset(t, wall)
                    t = step(t)
                    wall = _wall(t, zone)
                    if wraps(wall):
                        wrapped = True
                        break
                if wrapped:
                    break
            if not wrapped:
                return t


def _next_midnight(moment: datetime, zone: ZoneInfo) -> datetime:
    """robfig's day step: ``AddDate(0, 0, 1)``, then back to midnight when DST moved it."""
    t = _add_date(moment, zone, days=1)
    hour = _wall(t, zone).hour
    if hour != 0:  # midnight skipped or doubled by DST
        t += timedelta(hours=24 - hour if hour > 12 else -hour)
    return t


def _wall(moment: datetime, zone: ZoneInfo) -> datetime:
    """The zone's wall clock at the aware ``moment`` (naive)."""
    return moment.astimezone(zone).replace(tzinfo=None)


def go_date(
    year: int, month: int, day: int, hour: int, minute: int, second: int, zone: ZoneInfo
) -> datetime:
    """Go's ``time.Date`` in ``zone`` (fields normalized; a wall time the clocks skip or repeat
    resolved as time.go does: the offset in force at the wall time read as UTC, corrected once
    when the result falls outside that offset's period). Aware UTC."""
    unix = datetime(year, month, 1, tzinfo=UTC) + timedelta(
        days=day - 1, hours=hour, minutes=minute, seconds=second
    )
    offset = unix.astimezone(zone).utcoffset() or timedelta(0)
    utc = unix - offset
    if (utc.astimezone(zone).utcoffset() or timedelta(0)) != offset:
        offset = utc.astimezone(zone).utcoffset() or timedelta(0)
    return unix - offset


def _add_date(moment: datetime, zone: ZoneInfo, *, months: int = 0, days: int = 0) -> datetime:
    """Go's ``t.AddDate(0, months, days)``: the wall clock's fields moved, then ``time.Date``."""
    wall = _wall(moment, zone)
    month_index = wall.year * 12 + wall.month - 1 + months
    return go_date(
        month_index // 12,
        month_index % 12 + 1,
        wall.day + days,
        wall.hour,
        wall.minute,
        wall.second,
        zone,
    )


def _field(text: str, name: str, low: int, high: int) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        body, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if step_text and (not step_text.isdigit() or step < 1):
            raise ValueError(f"bad step in {part!r}")
        if body in ("*", "?"):
            start, end = low, high
        else:
            first, _, last = body.partition("-")
            start = _number(first, name)
            end = _number(last, name) if last else (high if step_text else start)
        if not low <= start <= end <= high:
            raise ValueError(f"{part!r} is outside {low}-{high} for the {name} field")
        values.update(range(start, end + 1, step))
    return frozenset(values)


def _number(text: str, name: str) -> int:
    lowered = text.lower()
    if lowered in NAMES.get(name, {}):
        return NAMES[name][lowered]
    if not text.isdigit():
        raise ValueError(f"{text!r} is not a number for the {name} field")
    return int(text)


@cache
def parse_cron(spec: str) -> Schedule:
    """robfig/cron's parser with Minute | Hour | Dom | Month | Dow (as KEDA builds it)."""
    parts = spec.split()
    if len(parts) != 5:
        raise ValueError(f"expected exactly 5 fields, found {len(parts)}: {spec!r}")
    sets = [_field(p, n, lo, hi) for p, (n, lo, hi) in zip(parts, FIELDS, strict=True)]
    return Schedule(*sets, dom_star=parts[2] in ("*", "?"), dow_star=parts[4] in ("*", "?"))


def cron_refusal(metadata: dict[str, Any]) -> str | None:
    """Why KEDA's cron scaler refuses this trigger, or None."""
    for key in ("start", "end", "timezone", "desiredReplicas"):
        if not isinstance(metadata.get(key), str) or not metadata[key]:
            return f"missing {key}"
    try:
        parse_cron(metadata["start"])
        parse_cron(metadata["end"])
    except ValueError as exc:
        return f"error parsing schedule: {exc}"
    if metadata["start"] == metadata["end"]:
        return "start and end can not have exactly same time input"
    if not re.fullmatch(r"[+-]?\d+", metadata["desiredReplicas"]):
        return "desiredReplicas is not an int64"
    if int(metadata["desiredReplicas"]) == 0:
        return "no desiredReplicas specified"
    try:
        ZoneInfo(metadata["timezone"])
    except (ZoneInfoNotFoundError, ValueError):
        return f"unable to load timezone {metadata['timezone']!r}"
    return None


def cron_value(metadata: dict[str, Any], now: datetime) -> int:
    """The metric a valid cron trigger reports at ``now``: desiredReplicas when active, else 1."""
    zone = ZoneInfo(metadata["timezone"])
    next_start = parse_cron(metadata["start"]).next_after(now, zone)
    next_end = parse_cron(metadata["end"]).next_after(now, zone)
    return int(metadata["desiredReplicas"]) if not next_start < next_end else 1


def cron_values(metadata: dict[str, Any], start: datetime, minutes: int) -> list[int]:
    """:func:`cron_value` at each minute from ``start`` (aware): evaluated at every minute whose
    wall clock in the zone fires the start or end schedule (and at ``start``); the value holds
    until the next one."""
    zone = ZoneInfo(metadata["timezone"])
    schedules = [parse_cron(metadata["start"]), parse_cron(metadata["end"])]
    out: list[int] = []
    for minute in range(minutes):
        now = start + timedelta(minutes=minute)
        if minute == 0 or any(s.matches(_wall(now, zone)) for s in schedules):
            value = cron_value(metadata, now)
        out.append(value)
    return out


def go_float(text: Any) -> float | None:
    """strconv.ParseFloat(text, 64), or None when Go refuses it."""
    if not isinstance(text, str) or not _GO_FLOAT.fullmatch(text):
        return None
    return float(text)


def milli_target(text: str) -> Decimal:
    """The target KEDA's HPA gets for a float metadata value (today's %.3f rounding)."""
    value = go_float(text)
    assert value is not None
    return Decimal(f"{value:.3f}")


def metrics_api_refusal(trigger: dict[str, Any]) -> str | None:
    metadata = trigger["metadata"]
    for key in ("url", "valueLocation"):
        if not metadata.get(key):
            return f"missing {key}"
    if metadata.get("format", "json") not in ("json", "xml", "yaml", "prometheus"):
        return f"format {metadata['format']!r}"
    if go_float(metadata.get("targetValue")) is None:
        return "targetValue is not a float"
    if metadata.get("authMode") == "bearer" and not trigger.get("authenticationRef"):
        return "bearer auth without a TriggerAuthentication holding the token"
    return None


def prometheus_refusal(trigger: dict[str, Any]) -> str | None:
    metadata = trigger["metadata"]
    for key in ("serverAddress", "query"):
        if not metadata.get(key):
            return f"missing {key}"
    if go_float(metadata.get("threshold")) is None:
        return "threshold is not a float"
    if milli_target(metadata["threshold"]) <= 0:
        return "threshold below a thousandth: the HPA target would be 0"
    if go_bool(metadata.get("ignoreNullValues", "true")) is None:
        return "ignoreNullValues is not a Go bool"
    return None


_GO_BOOLS = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True}
_GO_BOOLS |= {"0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False}


def go_bool(text: Any) -> bool | None:
    """Go's ``strconv.ParseBool``: None where it returns an error."""
    return _GO_BOOLS.get(text) if isinstance(text, str) else None


class QueryFailed(Exception):
    """The scaler's poll failed: KEDA counts it towards the fallback."""


def prometheus_value(trigger: dict[str, Any], samples: list[float]) -> float:
    """The value KEDA's prometheus scaler reads from a query result of ``samples`` (one per
    series; the fleet-total queries gpucast writes return one)."""
    if not samples:
        if go_bool(trigger["metadata"].get("ignoreNullValues", "true")):
            return 0.0
        raise QueryFailed(f"prometheus query {trigger['metadata']['query']} returned empty")
    if len(samples) > 1:
        raise QueryFailed("prometheus query returned multiple elements")
    return samples[0]


def falls_back(consecutive_failures: int, failure_threshold: int) -> bool:
    """KEDA: ``*healthStatus.NumberOfFailures > scaledObject.Spec.Fallback.FailureThreshold``."""
    return consecutive_failures > failure_threshold


def fallback_replicas(fallback: dict[str, Any], current: int) -> int:
    """The replicas ``doFallback`` answers for a failing AverageValue trigger (its value ÷ the
    target): the switch on ``fallback.behavior``, transcribed."""
    replicas = int(fallback["replicas"])
    behavior = fallback.get("behavior", "static")
    if behavior == "currentReplicas":
        return current
    if behavior == "currentReplicasIfHigher":
        return current if current > replicas else replicas
    if behavior == "currentReplicasIfLower":
        return current if current < replicas else replicas
    return replicas
