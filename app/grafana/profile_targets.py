"""Targets of GPU profiles' running fleets: annotations for the production hours that served a
p95 latency over 1.2x what the profile's load test gives at their load and mix
(:mod:`app.profiles.drift`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from app.db import repository
from app.grafana.plan_targets import ANNOTATION_COLUMNS
from app.grafana.protocol import QueryContext, epoch_ms, table, text_list
from app.profiles.drift import drifting_hours

__all__ = ["profile_drift"]


def profile_drift(ctx: QueryContext, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """One annotation per drifting production hour overlapping the range, of the payload's
    profiles (every profile without one); tags ``drift`` and the profile's name."""
    names = text_list(payload, "profile") or None
    for name in names or ():
        repository.get_gpu_profile(ctx.session, name=name)  # an unknown profile is a 404
    hours = drifting_hours(
        ctx.session, start=ctx.start - timedelta(hours=1), end=ctx.end, profile_names=names
    )
    rows = [
        [
            epoch_ms(found.hour),
            epoch_ms(found.hour + timedelta(hours=1)),
            f"{found.profile}: slower than its load test",
            found.text(),
            f"drift,{found.profile}",
        ]
        for found in hours
    ]
    return [table(ANNOTATION_COLUMNS, rows)]
