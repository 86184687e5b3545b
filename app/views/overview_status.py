"""What an overview card says about its forecast and its plan's band: how fresh the forecast
run behind the plan is (refresh or nightly, the newest hour it saw, the fitted nightly run) and
the band the plan is sized on with its band=auto calibration.

The card reads band=auto choices that are already stored and never calibrates. A calibration
replays ``options.BAND_AUTO_DAYS`` days of hourly plans at several headrooms — seconds per
series — so a page of many series would pay one per series on its first view after every
nightly run, inside the page request. Choices are stored by any band=auto plan read (REST
capacity, Grafana's plan panels, ``gpucast plan``) and recomputed after each nightly run for
the choices read in the last 7 days; until one exists for the current nightly run, the card
sizes on :data:`FALLBACK_BAND` (what band auto itself serves when it cannot calibrate) and
says so.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace
from datetime import datetime
from html import escape
from typing import Any

import pandas as pd
from sqlalchemy.orm import Session

from app import plans
from app.db.models import ForecastRun, GpuProfile
from app.plans.auto_band import reader_choice
from app.plans.calibration import FALLBACK_BAND

__all__ = [
    "FALLBACK_BAND",
    "Freshness",
    "band_html",
    "card_params",
    "freshness_html",
    "load_freshness",
    "plan_run",
]


@dataclass(frozen=True)
class Freshness:
    """The forecast run a series' plan comes from (tokens, else requests) and its fit."""

    kind: str  # "nightly" | "refresh"
    created_at: datetime
    trained_until: datetime | None
    fitted_created_at: datetime | None  # the nightly run behind a refresh (itself if nightly)
    fitted_trained_until: datetime | None


def plan_run(latest: dict[str, ForecastRun | None]) -> ForecastRun | None:
    """The run a plan is built from, as the plan service picks it: tokens, else requests."""
    return latest.get("tokens") or latest.get("requests")


def load_freshness(session: Session, run: ForecastRun | None) -> Freshness | None:
    if run is None:
        return None
    fitted = session.get(ForecastRun, run.parent_id) if run.parent_id else run
    return Freshness(
        kind=run.kind,
        created_at=run.created_at,
        trained_until=run.trained_until,
        fitted_created_at=fitted.created_at if fitted is not None else None,
        fitted_trained_until=fitted.trained_until if fitted is not None else None,
    )


def card_params(
    session: Session,
    *,
    series_id: int,
    series_name: str,
    run: ForecastRun | None,
    profile: GpuProfile | None,
    params: plans.PlanParams,
) -> tuple[plans.PlanParams, bool]:
    """The parameters the card plans with, and whether band auto is still to be calibrated.

    Band auto stays auto only when its choice for the run's nightly run is stored (so the
    plan read finds it: at the deployment's SLO when the profile applies it); otherwise the
    card plans on FALLBACK_BAND (see the module doc)."""
    if params.band != "auto" or run is None or profile is None:
        return params, False
    stored = reader_choice(
        session,
        series_id=series_id,
        series_name=series_name,
        profile_name=profile.name,
        params=params,
        run=run,
    )
    if stored is not None:
        return params, False
    return replace(params, band=FALLBACK_BAND), True


# -- HTML fragments (every value is escaped or formatted by us) --------------------------------


def freshness_html(fresh: Freshness, age: str) -> str:
    """``refreshed 35 min ago from the hours up to 2026-12-02 01:00 UTC; fitted 2026-12-02
    02:05 UTC (nightly run)`` — or, for a nightly run, ``fitted 3 h ago (nightly run) …``.
    ``age`` is the run's age as the card formats it."""
    hours = f" from the hours up to {_utc_text(fresh.trained_until)}" if fresh.trained_until else ""
    if fresh.kind != "refresh":
        return f"fitted {age} (nightly run){hours}"
    fitted = (
        f"; fitted {_utc_text(fresh.fitted_created_at)} (nightly run)"
        if fresh.fitted_created_at is not None
        else ""
    )
    return f"refreshed {age}{hours}{fitted}"


def band_html(
    *,
    asked: str,
    sized: str | None,
    choice: dict[str, Any] | None,
    pending: bool,
    series: str,
    profile: str,
) -> str:
    """The band row: ``auto → q70: 0.4 % replayed over capacity (target 1 %) over 7 days``."""
    if asked != "auto":
        return escape(asked)
    head = f"auto → {escape(sized or FALLBACK_BAND)}"
    if pending:
        command = f"gpucast plan {shlex.quote(series)} --profile {shlex.quote(profile)}"
        return (
            f'{head}: <span class="stale">not yet calibrated for this nightly run; sized on '
            f"{FALLBACK_BAND} meanwhile</span> "
            f'<span class="note">(<code>{escape(command)}</code> or any band auto plan read '
            "calibrates it; the nightly run then keeps it current)</span>"
        )
    choice = choice or {}
    if choice.get("headroom") and not pending:
        head = f"auto → {escape(choice.get('label') or sized or FALLBACK_BAND)}"
    risk = choice.get("replayed_time_over_capacity_share")
    if not (choice.get("candidates") or choice.get("quantiles")) or risk is None:
        note = choice.get("note") or "not calibrated"
        return f'{head}: <span class="stale">{escape(note)}</span>'
    target = _percent(choice.get("max_over_capacity", 0.0))
    days = choice.get("days")
    over = f" over {days:.3g} days" if isinstance(days, int | float) else ""
    if choice.get("met"):
        text = f"{head}: {_percent(risk)} replayed over capacity (target {target}){over}"
    else:
        text = (
            f'{head}: <span class="stale">{_percent(risk)} replayed over capacity, above the '
            f"target of {target}: no candidate met it{over}</span>"
        )
    if sized is not None and sized != choice.get("band"):  # e.g. a run without quantiles
        text += f' <span class="note">({escape(choice.get("note") or "")})</span>'
    return text


def _percent(share: float) -> str:
    return f"{share * 100:.2g} %"


def _utc_text(moment: datetime | None) -> str:
    if moment is None:
        return "-"
    stamp = pd.Timestamp(moment)
    stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    return f"{stamp:%Y-%m-%d %H:%M} UTC"
