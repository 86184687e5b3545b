"""The ``profile_compare`` table: the cheapest GPU type for each series.

One row per series × profile: tomorrow's plan on that profile (peak GPUs, GPU-hours,
``cost_usd`` priced as the plan is) at the payload's SLO (``ttft_p95_s`` and ``tpot_p95_s``)
or the series' deployment's, whether the SLO can be met at all (``slo_met``; empty for a
one-number profile, which cannot tell) and ``cheapest`` on the cheapest priced profile that
meets it — what ``GET /v1/series/{name}/capacity/compare`` answers. Profiles: the payload's
``profiles`` (a list, comma-separated, or a multi-value variable in any of Grafana's formats;
its "All" is every profile), else the profiles of the deployed profile's model.
"""

from __future__ import annotations

from typing import Any

from app.db import repository
from app.grafana.plan_targets import has_forecast, plan_params
from app.grafana.protocol import (
    QueryContext,
    number,
    table,
    target_series,
    text_list,
    wants_all,
)
from app.plans.compare import compare_profiles, profile_names, same_model_profiles
from app.profiles.deployments import MAX_SLO_S, slo_of

COLUMNS = (
    ("series", "string"),
    ("profile", "string"),
    ("gpu_type", "string"),
    ("gpus_per_replica", "number"),
    ("peak_gpus", "number"),
    ("gpu_hours", "number"),
    ("cost_usd", "number"),
    ("slo_met", "boolean"),
    ("cheapest", "boolean"),
    ("ttft_p95_s", "number"),
    ("tpot_p95_s", "number"),
    ("capacity_basis", "string"),
    ("note", "string"),
)
NAMES = tuple(name for name, _ in COLUMNS)


def profile_compare(ctx: QueryContext, payload: dict[str, Any]) -> list[dict[str, Any]]:
    params = plan_params(payload)
    slo = slo_of(_optional_s(payload, "ttft_p95_s"), _optional_s(payload, "tpot_p95_s"))
    given = text_list(payload, "profiles")
    if wants_all(payload, "profiles"):
        given = [p.name for p in repository.list_gpu_profiles(ctx.session)]
    chosen = profile_names(",".join(given)) if given else None
    rows: list[list[Any]] = []
    for name in target_series(ctx, payload):
        names = chosen or same_model_profiles(ctx.session, series_name=name)
        note = None if names else "no deployment: give profiles to compare (payload.profiles)"
        if not has_forecast(ctx, name):
            note = f"no complete forecast yet; run 'gpucast forecast {name}'"
        if note is not None:
            rows.append([{"series": name, "note": note}.get(n) for n in NAMES])
            continue
        result = compare_profiles(
            ctx.session,
            series_name=name,
            profiles=names,
            params=params,
            slo=slo,
            cache=ctx.plan_cache,
        )
        for row in result["profiles"]:
            limits = row["slo"] or {}
            values = {**row, "series": name, **limits}
            rows.append([values.get(n) for n in NAMES])
    return [table(COLUMNS, rows)]


def _optional_s(payload: dict[str, Any], key: str) -> float | None:
    if payload.get(key) in (None, "") or text_list(payload, key) == []:
        return None
    return number(payload, key, 0.0, low=1e-6, high=MAX_SLO_S)
