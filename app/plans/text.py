"""GPU plans and replays as text tables (the CLI and the demo print these)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from app.common.words import count
from app.plans.service import SeriesPlan
from app.plans.summary import replay_summary


def plan_lines(plan: SeriesPlan) -> list[str]:
    """Hourly GPU plan as a text table, with the rules, peak factor, GPU-hours and cost."""
    frame = plan.plan.frame
    params = plan.params
    factors = plan.plan.peak_factors
    quota = f", quota {count(params.max_gpus, 'GPU')}" if params.max_gpus is not None else ""
    lines = [
        f"GPU plan for {plan.series} — profile {plan.profile} "
        f"({plan.plan.per_gpu_tokens_per_s:,.0f} tokens/s per GPU, "
        f"{plan.plan.gpus_per_replica} per replica)",
        f"  sized for {plan.band_label} x peak factor, utilization target "
        f"{params.utilization_target:g}, safety factor {params.sizing_safety_factor:g}",
        *_band_choice_lines(plan),
        f"  schedule: scale up {params.cold_start_s} s ahead (cold start), scale down after "
        f"{params.scale_down_hold_s} s, at least {count(params.min_gpus, 'GPU')}{quota}",
        f"  peak factor: {factors.note}",
        f"  model {plan.model}, from the {plan.source}; "
        + ("refreshed" if plan.run_kind == "refresh" else "trained")
        + f" until {_stamp(plan.trained_until)}"
        + _stale_mark(plan),
        *(f"  ** {note} **" for note in plan.notes()),
        *_slo_lines(plan),
        f"  {'HOUR (UTC)':<17} {'TOKENS/S':>12} {'PEAK':>5} {'RAW':>5} {'GPUS':>5} "
        f"{'REPLICAS':>8} {'UTIL':>6} {'SHORT':>5}"
        + (f" {'MIX P/C':>13} {'REQ/S/REPL':>10}" if plan.sized_at_slo else ""),
    ]
    for row in frame.itertuples(index=False):
        short = f"{row.short_gpus:>5d}" if row.short_gpus else f"{'':>5}"
        lines.append(
            f"  {row.hour:%Y-%m-%d %H:%M}  {row.load_tokens_per_s:>12,.0f} {row.peak_factor:>5.2f} "
            f"{row.raw_gpus:>5d} {row.gpus:>5d} {row.replicas:>8d} "
            f"{row.peak_utilization:>6.0%} {short}" + _slo_cells(plan, row)
        )
    lines.append(
        "  FLOOR (the executed schedule KEDA's plan trigger holds): peak "
        f"{count(int(plan.plan.peak_gpus), 'GPU')}; {plan.plan.gpu_hours:,.1f} GPU-hours "
        f"(the formula alone: {plan.plan.raw_gpu_hours:,.0f})"
    )
    short_hours = plan.plan.short_hours
    if len(short_hours):
        lines.append(
            f"  QUOTA BINDS: {count(len(short_hours), 'hour')} short, up to "
            f"{count(int(short_hours['short_gpus'].max()), 'GPU')}"
        )
    if plan.cost is not None:
        cost = plan.cost
        lines.append(
            f"  cost ${cost.total_usd:,.0f} for these {cost.hours:g} h (${cost.monthly_usd:,.0f}"
            f"/month), {count(int(cost.reserved_gpus), 'GPU')} reserved (break-even rule)"
        )
        lines.append(f"  {_saving(cost)} against {cost.compared_with}")
    return [*lines[:1], *_expected_lines(plan), *lines[1:]]


def _expected_lines(plan: SeriesPlan) -> list[str]:
    """The headline: the fleet expected to run (P50 GPU-hours and cost, P90 peak)."""
    expected = plan.expected
    if expected is None or expected.fleet is None:
        note = expected.note if expected is not None else "not measured"
        return [f"  EXPECTED FLEET: {note}"]
    fleet = expected.fleet
    cost = f", ${expected.cost.total_usd:,.0f}" if expected.cost is not None else ""
    return [
        f"  EXPECTED FLEET for these {len(fleet.mean)} h: {fleet.gpu_hours:,.0f} GPU-hours{cost} "
        f"(P90 {fleet.gpu_hours_p90:,.0f}); peak {count(int(fleet.p50.max()), 'GPU')} at P50, "
        f"{count(int(fleet.p90.max()), 'GPU')} at P90",
        f"    ({expected.note}; the hours below are the floor)",
    ]


def _stale_mark(plan: SeriesPlan) -> str:
    if not plan.is_stale():
        return ""
    valid_until = plan.valid_until
    if valid_until is None or datetime.now(UTC) > valid_until:
        return "  ** STALE: older than 36 h **"
    return "  ** STALE: no hour of it is ahead **"


def _saving(cost: Any) -> str:
    """The saving against a static fleet, in words when it rounds to nothing (never '-0%')."""
    fraction, usd = cost.saving_vs_static_fraction, cost.saving_vs_static_usd
    if round(usd) == 0 or round(fraction * 100) == 0:
        return "no saving"
    word = "saving" if usd > 0 else "costs more"
    return f"{word} {abs(fraction):.0%} (${abs(usd):,.0f})"


def _band_choice_lines(plan: SeriesPlan) -> list[str]:
    choice = plan.band_choice
    if choice is None:
        return []
    return [f"  band auto: {choice['note']}"]


def _stamp(value: Any) -> str:
    return f"{value:%Y-%m-%d %H:%M}Z" if value is not None else "-"


def _share(value: float) -> str:
    return f"{value:.2%}"


def backtest_lines(result: dict[str, Any]) -> list[str]:
    """The replay's KPI table, one row per policy, and the comparison with static peak."""
    lines = [
        f"plan replay of {result['series']} on {result['profile']}: "
        f"{count(result['days'], 'day')} "
        f"{_iso(result['start'])} .. {_iso(result['end'])}, load from {result['load_source']}, "
        f"measured every {result['resolution_s']} s",
        f"  gpucast: a fit every night at {result['nightly_hour_utc']:02d}:00 UTC and "
        f"{result['decisions']} hourly plans, each from data strictly before it; cold start "
        f"{result['params']['cold_start_s']} s, hold {result['params']['scale_down_hold_s']} s",
        f"  {'POLICY':<26} {'GPU-HOURS':>10} {'COST $':>10} {'OVER CAP':>9} {'REQ OVER':>9} "
        f"{'OVER 85%':>9} {'SCALES':>7} {'PEAK':>5}",
    ]
    for row in result["policies"]:
        label = (
            row["policy"]
            + (" *" if row["recommended"] else "")
            + (" (bound)" if row["bound"] else "")
        )
        lines.append(
            f"  {label:<26} {row['gpu_hours']:>10,.1f} {row['cost_usd']:>10,.0f} "
            f"{_share(row['time_over_capacity_share']):>9} "
            f"{_share(row['requests_over_capacity_share']):>9} "
            f"{_share(row['time_over_85_share']):>9} {row['scale_events']:>7d} "
            f"{row['peak_gpus']:>5d}"
            + (f" {_share(row['time_over_slo_share']):>9}" if "time_over_slo_share" in row else "")
        )
    lines.append(
        "  * what gpucast deploys; OVER CAP = share of time load exceeded ready capacity on the "
        "line (what the ready replicas sustain at 100 %)"
    )
    if (result.get("slo") or {}).get("scored"):
        slo = result["slo"]
        lines[2] += f" {'OVER SLO':>9}"  # the header row
        lines.append(
            f"  OVER SLO = share of time load exceeded what the ready replicas sustain within "
            f"p95 TTFT {slo['ttft_p95_s']:g} s / TPOT {slo['tpot_p95_s']:g} s at the hour's mix"
        )
    lines.append("  " + replay_summary(result))
    lines.extend(_daily_lines(result))
    lines.extend(_frontier_lines(result))
    lines.extend(_band_lines(result))
    lines.extend(_tradeoff_lines(result))
    lines.extend(f"  note: {note}" for note in result.get("notes", []))
    return lines


def _daily_lines(result: dict[str, Any]) -> list[str]:
    """The expected fleet each night published against what the deployment ran."""
    accuracy = result.get("expected_fleet_accuracy")
    if not accuracy:
        return []
    cover = accuracy["p90_covers_hours_share"]
    return [
        f"  expected fleet as published each night vs what ran: median error "
        f"{accuracy['median_abs_error_share']:.1%} over {count(accuracy['days'], 'day')} "
        f"(worst {accuracy['worst_abs_error_share']:.1%}); P90 at or above the fleet in "
        f"{cover:.0%} of hours"
    ]


def _frontier_lines(result: dict[str, Any]) -> list[str]:
    """The reactive HPA alone at each target: its cost/risk frontier."""
    frontier = result.get("reactive_frontier")
    if not frontier:
        return []
    shown = [p for p in frontier if round(p["target_utilization"] * 100) % 5 == 0]
    points = ", ".join(
        f"{p['target_utilization']:g}: {p['gpu_hours']:,.0f} GPU-h "
        f"{_share(p['time_over_capacity_share'])} over"
        for p in shown
    )
    every = " (every 0.05 of the 0.01 grid shown)" if len(shown) < len(frontier) else ""
    return [f"  reactive HPA alone by target{every}: {points}"]


def _band_lines(result: dict[str, Any]) -> list[str]:
    """The headroom band=auto chose each night, and why; for an explicit band, what each
    night's replay of its own plans measured (its expected fleet's ratios)."""
    nights = [n for n in result.get("gpucast_plans", []) if n.get("calibration")]
    if not nights:
        return []
    band = result["params"]["band"]
    lines = [
        "  band auto, chosen each night from the previous days' replay:"
        if band == "auto"
        else f"  {band}, measured each night on the previous days' replay of its own plans:"
    ]
    for night in nights:
        lines.append(f"    {_iso(night['at'])}: {night['calibration']['note']}")
    return lines


def _tradeoff_lines(result: dict[str, Any]) -> list[str]:
    """What one more percent of risk would have saved: GPU-hours per risk target."""
    rows = result.get("tradeoff")
    if not rows:
        return []
    lines = [
        "  trade-off (band auto at each risk target, same days, same load):",
        f"    {'TARGET':>7} {'GPU-HOURS':>10} {'COST $':>10} {'OVER CAP':>9} {'REQ OVER':>9}",
    ]
    for row in rows:
        lines.append(
            f"    {_share(row['max_over_capacity']):>7} {row['gpu_hours']:>10,.1f} "
            f"{row['cost_usd']:>10,.0f} {_share(row['time_over_capacity_share']):>9} "
            f"{_share(row['requests_over_capacity_share']):>9}"
        )
    return lines


def _iso(value: Any) -> str:
    text = value if isinstance(value, str) else value.isoformat()
    return text.replace("+00:00", "Z")


def _slo_lines(plan: SeriesPlan) -> list[str]:
    if plan.slo is None:
        return []
    limits = f"p95 TTFT {plan.slo.ttft_p95_s:g} s, TPOT {plan.slo.tpot_p95_s:g} s"
    if not plan.sized_at_slo:
        return [f"  SLO {limits}: not applied ({plan.capacity_basis})"]
    line = f"  SLO {limits}: each hour at its SLO capacity, mix from {plan.mix_source}"
    if plan.production_hours:
        line += f"; learned from up to {count(plan.production_hours, 'production hour')}"
    return [line]


def _slo_cells(plan: SeriesPlan, row: Any) -> str:
    if not plan.sized_at_slo:
        return ""
    mix = f"{row.prompt_tokens_per_request:,.0f}/{row.completion_tokens_per_request:,.0f}"
    return f" {mix:>13} {row.requests_per_s_per_replica:>10.2f}"


def compare_lines(result: dict[str, Any]) -> list[str]:
    """The profile comparison as a text table, the cheapest that meets the SLO marked."""
    slo = result["slo"]
    at = f"p95 TTFT {slo['ttft_p95_s']:g} s, TPOT {slo['tpot_p95_s']:g} s" if slo else "no SLO"
    lines = [
        f"Profiles for {result['series']} ({at}; band {result['band']})",
        f"  {'PROFILE':<24} {'GPU':<14} {'PEAK':>5} {'GPU-H':>8} {'COST USD':>10} {'SLO MET':>8}",
    ]
    for row in result["profiles"]:
        met = {True: "yes", False: "NO", None: "-"}[row["slo_met"]]
        peak = f"{row['peak_gpus']:>5d}" if row["peak_gpus"] is not None else f"{'-':>5}"
        hours = f"{row['gpu_hours']:>8,.1f}" if row["gpu_hours"] is not None else f"{'-':>8}"
        cost = f"{row['cost_usd']:>10,.0f}" if row["cost_usd"] is not None else f"{'-':>10}"
        mark = "  <- cheapest" if row["cheapest"] else ""
        lines.append(
            f"  {row['profile'][:24]:<24} {row['gpu_type'][:14]:<14} {peak} {hours} {cost} "
            f"{met:>8}{mark}"
        )
        if row["slo_met"] is False:
            lines.append(f"    {row['note']}")
        elif row["excluded"] is not None:
            lines.append(f"    not a candidate: {row['excluded']}")
    if result["cheapest_note"] is not None:
        lines.append(f"  no cheapest: {result['cheapest_note']}")
    return lines
