"""The triggers of a generated ScaledObject, written as KEDA's scalers read them.

- **Numbers** in trigger metadata are strings KEDA parses with Go's ``strconv.ParseFloat``
  into float64, then into a milli-unit Quantity (``GetMetricTargetMili``: thousandths). They
  are written in plain decimal that parses back to the exact float asked; a threshold that is
  not a positive multiple of 0.001 is refused, because KEDA would use another value (below
  0.001 the HPA target becomes 0 and the whole object stops scaling).
- **Cron windows**: KEDA's cron scaler refuses a trigger whose ``start`` equals its ``end``
  (``start and end can not have exactly same time input``) and one failing trigger stops the
  whole ScaledObject; a window of 24 h or more would come out as a short one (times of day
  repeat). A plan run becomes the window [run start - cold start, run end - hold): never empty
  (at least one minute, which the HPA's stabilization window then holds), and a run active all
  day becomes two half-day windows.
- **Clock changes**: a daily window repeats at the zone's wall-clock times, and KEDA's cron
  library (robfig/cron) skips a wall time the clocks jump over and fires twice at one they
  repeat. A start skipped never opens its window that day (and the window reads as active
  from its previous end); an end skipped keeps it open for a day (up to 24 h over the plan);
  a start repeated leaves the window shut through the first pass of the repeated hour (the
  next start comes before the end). So no window starts inside a stretch of the day a clock
  change of the zone skips or repeats, nor ends inside one it skips (:func:`changed_minutes`,
  02:00-02:59 in Europe/Berlin, 01:00-02:59 in America/New_York): a start moves one stretch
  earlier (on the day the clocks jump that is the very instant the skipped time stands for,
  so the cold start's lead holds), an end to the minute after the stretch. The fleet holds at
  least the plan on those days, at the price of up to an hour more on the others; an end in
  a repeated hour holds the window through its second pass too (an hour over the plan, never
  under it).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pandas as pd

from capacity._checks import require_finite
from capacity.errors import InvalidParameterError

MILLI = Decimal("0.001")
DAY = pd.Timedelta(days=1)
MINUTE = pd.Timedelta(minutes=1)


def metadata_number(label: str, value: float) -> str:
    """``value`` as plain decimal text that Go's ParseFloat reads back as exactly ``value``."""
    number = require_finite(label, value)
    if number == int(number) and abs(number) < 2**53:
        return str(int(number))
    text = format(Decimal(repr(number)), "f")  # shortest round-trip digits, no exponent
    return text.rstrip("0").rstrip(".") if "." in text else text


def milli_threshold(label: str, value: float) -> str:
    """A threshold KEDA reads in thousandths: positive and a whole number of thousandths."""
    text = metadata_number(label, value)
    if Decimal(text) < MILLI or Decimal(text) % MILLI != 0:
        raise InvalidParameterError(
            f"{label}={text}: KEDA reads a threshold in thousandths (0.001 to any whole "
            "number of thousandths); below or between them it would use another value"
        )
    return text


def live_trigger(url: str, auth_ref: str | None) -> dict[str, Any]:
    """The metrics-api trigger polling desired-replicas; bearer auth via a TriggerAuthentication."""
    if not url.startswith(("http://", "https://")):
        raise InvalidParameterError(f"desired_replicas_url must be an http(s) URL, got {url!r}")
    trigger: dict[str, Any] = {
        "type": "metrics-api",
        "name": "gpucast-plan",
        "metricType": "AverageValue",
        "metadata": {
            "url": url,
            "format": "json",
            "valueLocation": "desired_replicas",
            "targetValue": "1",
        },
    }
    if auth_ref:
        trigger["metadata"]["authMode"] = "bearer"
        trigger["authenticationRef"] = {"name": auth_ref}
    return trigger


def _runs(replicas: pd.Series) -> list[tuple[pd.Timestamp, pd.Timestamp, int]]:
    """Runs of consecutive hours with the same replica count: (start, end, replicas)."""
    runs: list[tuple[pd.Timestamp, pd.Timestamp, int]] = []
    for hour, count in replicas.items():
        if runs and runs[-1][2] == count:
            runs[-1] = (runs[-1][0], hour + pd.Timedelta(hours=1), count)
        else:
            runs.append((hour, hour + pd.Timedelta(hours=1), int(count)))
    return runs


def _windows(
    start: pd.Timestamp, end: pd.Timestamp, *, lead: pd.Timedelta, hold: pd.Timedelta
) -> Iterator[tuple[pd.Timestamp, pd.Timestamp]]:
    opens = start - lead
    length = (end - hold) - opens
    if length >= DAY:  # active all day: one daily window cannot say so (start would be end)
        yield opens, opens + DAY / 2
        yield opens + DAY / 2, opens + DAY
    else:
        yield opens, opens + max(length, MINUTE)


def cron_triggers(
    replicas: pd.Series, *, floor: int, lead_s: int, hold_s: int, timezone: str
) -> list[dict[str, Any]]:
    """Daily cron triggers, one window per run above the floor (two for a run all day long):
    from one cold start before the run to one hold before its end (the HPA's stabilization
    window keeps the count until the run's end); no window starts at a wall time a clock
    change of ``timezone`` skips or repeats, nor ends at one it skips (module docstring)."""
    lead = pd.Timedelta(minutes=math.ceil(lead_s / 60))
    hold = pd.Timedelta(minutes=hold_s // 60)
    skipped, repeated = changed_minutes(timezone, replicas.index[0]) if len(replicas) else ([], [])
    triggers = []
    for start, end, count in _runs(replicas):
        if count <= floor:
            continue
        for part, (opens, closes) in enumerate(_windows(start, end, lead=lead, hold=hold)):
            name = f"plan-{start:%H%M}" + (f"-{part + 1}" if part else "")
            first, last = _minute(opens), _minute(closes)
            metadata = {
                "timezone": timezone,
                "start": _at(_outside(first, skipped + repeated, later=False)),
                "end": _at(_outside(last, skipped, later=True)),
            }
            metadata["desiredReplicas"] = str(count)
            triggers.append({"type": "cron", "name": name, "metadata": metadata})
    return triggers


MINUTES_PER_DAY = 24 * 60


Stretches = list[tuple[int, int]]  # (first minute of the day, minutes)


def changed_minutes(timezone: str, around: pd.Timestamp) -> tuple[Stretches, Stretches]:
    """The stretches of the day that a clock change of ``timezone`` skips (clocks set
    forward) and that one repeats (set back), over the year before and the two years after
    ``around``: Europe/Berlin ([(120, 60)], [(120, 60)]); America/New_York ([(120, 60)],
    [(60, 60)]); UTC none."""
    start = pd.Timestamp(around).tz_convert("UTC").floor("D") - pd.Timedelta(days=366)
    instants = pd.date_range(start, periods=3 * 366 * 96, freq="15min")  # UTC
    wall = instants.tz_convert(timezone).tz_localize(None)
    offsets = (wall - instants.tz_localize(None)).asi8 // 60_000_000_000  # minutes
    skipped: set[tuple[int, int]] = set()
    repeated: set[tuple[int, int]] = set()
    for at in (offsets[1:] != offsets[:-1]).nonzero()[0] + 1:
        before, after = int(offsets[at - 1]), int(offsets[at])
        change = instants[at].tz_localize(None)  # in UTC
        first = _minute(change + pd.Timedelta(minutes=min(before, after)))  # on the wall
        (skipped if after > before else repeated).add((first, abs(after - before)))
    return sorted(skipped), sorted(repeated)


def _minute(moment: pd.Timestamp) -> int:
    return moment.hour * 60 + moment.minute


def _outside(minute: int, stretches: Stretches, *, later: bool) -> int:
    """``minute`` of the day moved out of every one of ``stretches``: to the minute after it
    (``later``, a window's end) or one stretch earlier (a start)."""
    for _ in range(len(stretches) + 1):
        inside = [(f, n) for f, n in stretches if (minute - f) % MINUTES_PER_DAY < n]
        if not inside:
            return minute
        first, length = inside[0]
        minute = (first + length if later else minute - length) % MINUTES_PER_DAY
    return minute


def _at(minute: int) -> str:
    return f"{minute % 60} {minute // 60} * * *"
