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


def _daily(moment: pd.Timestamp) -> str:
    return f"{moment.minute} {moment.hour} * * *"


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
    window keeps the count until the run's end)."""
    lead = pd.Timedelta(minutes=math.ceil(lead_s / 60))
    hold = pd.Timedelta(minutes=hold_s // 60)
    triggers = []
    for start, end, count in _runs(replicas):
        if count <= floor:
            continue
        for part, (opens, closes) in enumerate(_windows(start, end, lead=lead, hold=hold)):
            name = f"plan-{start:%H%M}" + (f"-{part + 1}" if part else "")
            metadata = {"timezone": timezone, "start": _daily(opens), "end": _daily(closes)}
            metadata["desiredReplicas"] = str(count)
            triggers.append({"type": "cron", "name": name, "metadata": metadata})
    return triggers
