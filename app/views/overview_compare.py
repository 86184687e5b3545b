"""The overview card's profile comparison: the series' plan on each profile of its deployed
profile's model, at its SLO, and the cheapest that meets it (see :mod:`app.plans.compare`).

The card compares on the band its own plan was sized on, so opening the overview never starts
a calibration replay for another profile: an explicit band as asked; under band auto the point
forecast (``yhat``) at auto's safety factor — the headroom calibrated for the card's profile is
not carried to the others — or the fallback band while auto is not calibrated.
"""

from __future__ import annotations

from dataclasses import replace
from html import escape
from typing import Any

from sqlalchemy.orm import Session

from app import plans
from app.common.words import count
from app.errors import AppError
from app.plans.calibration import POINT_BAND
from app.plans.compare import compare_profiles, same_model_profiles


def load_comparison(
    session: Session,
    *,
    series_name: str,
    params: plans.PlanParams,
    sized_band: str | None,
    plan_cache: plans.PlanCache | None = None,
) -> dict[str, Any] | None:
    """The comparison the card shows, None when there is nothing to compare (no deployment,
    one profile of its model, no plan)."""
    if sized_band is None:
        return None
    names = same_model_profiles(session, series_name=series_name)
    if len(names) < 2:
        return None
    try:
        return compare_profiles(
            session,
            series_name=series_name,
            profiles=names,
            params=replace(
                params,
                band=sized_band,
                safety_factor=params.safety_factor
                if params.band != "auto" or sized_band != POINT_BAND
                else params.sizing_safety_factor,
            ),
            cache=plan_cache,
        )
    except AppError:
        return None


def comparison_html(result: dict[str, Any]) -> str:
    """One line per profile: peak GPUs, cost, SLO met; the cheapest that meets it in bold, why
    each other profile cannot be."""
    slo = result["slo"]
    at = f"at p95 TTFT {slo['ttft_p95_s']:g} s / TPOT {slo['tpot_p95_s']:g} s" if slo else ""
    items = []
    for row in result["profiles"]:
        name = escape(row["profile"])
        if row["slo_met"] is False:
            items.append(f'{name}: <span class="stale">cannot meet the SLO</span>')
            continue
        cost = f"${row['cost_usd']:,.0f}" if row["cost_usd"] is not None else "not priced"
        text = (
            f"{name}: {count(row['peak_gpus'], 'GPU')} peak, {row['gpu_hours']:,.0f} GPU-h, {cost}"
        )
        if row["cheapest"]:
            text = f"<b>{text} (cheapest)</b>"
        elif row["excluded"] is not None:
            text += f' <span class="note">({escape(row["excluded"])})</span>'
        items.append(text)
    if result["cheapest_note"] is not None:
        items.append(f'<span class="stale">no cheapest: {escape(result["cheapest_note"])}</span>')
    note = f' <span class="note">({escape(at)}, band {escape(result["band"])})</span>'
    return "<br>".join(items) + note
