"""What the Kubernetes output needs besides the plan: names, the URL KEDA polls, the
reactive trigger (shared by the REST route and the CLI)."""

from __future__ import annotations

import re
from urllib.parse import quote, urlencode

import capacity
from app.errors import InputError
from app.plans.params import PlanParams
from app.plans.service import SeriesPlan


def k8s_name(series: str) -> str:
    """A DNS-1123 name from a series name: ``prod-us/llama-3.1-70b`` → ``prod-us-llama-3-1-70b``."""
    cleaned = re.sub(r"[^a-z0-9-]+", "-", series.lower()).strip("-")
    return (cleaned or "gpucast")[:63].rstrip("-")


def desired_replicas_url(
    base_url: str, name: str, profile: str | None, params: PlanParams
) -> str:
    """The URL a KEDA trigger polls for this series, profile and plan parameters; without a
    profile it follows the series' deployment."""
    values = {
        k: str(v).lower() if isinstance(v, bool) else v
        for k, v in params.non_default_query().items()
    }
    pinned_profile = {"profile": profile} if profile is not None else {}
    query = urlencode({**pinned_profile, **values})
    url = f"{base_url.rstrip('/')}/v1/series/{quote(name, safe='/')}/desired-replicas"
    return f"{url}?{query}" if query else url


def pinned(plan: SeriesPlan) -> str | None:
    """The profile a KEDA trigger names: none when the plan's profile is the series'
    deployment (the trigger then follows a later deployment), else the plan's."""
    return None if plan.profile_source == "deployment" else plan.profile


def reactive_trigger(
    query: str | None, target: float | None, prometheus_url: str | None
) -> capacity.ReactiveTrigger | None:
    given = [v is not None for v in (query, target, prometheus_url)]
    if not any(given):
        return None
    if not all(given):
        raise InputError(
            "a reactive trigger needs reactive_query, reactive_target and prometheus_url together"
        )
    assert query is not None and target is not None and prometheus_url is not None
    try:
        return capacity.ReactiveTrigger(
            server_address=prometheus_url, query=query, target_per_replica=target
        )
    except capacity.CapacityError as exc:
        raise InputError(str(exc)) from exc


def backstop_warning(params: PlanParams, reactive: capacity.ReactiveTrigger | None) -> str | None:
    """A warning when band auto was calibrated for a reactive trigger the object lacks."""
    if params.band != "auto" or not params.reactive_backstop or reactive is not None:
        return None
    return (
        "band auto was calibrated for a fleet that runs a reactive trigger beside the plan; "
        "add one (reactive_query and reactive_target; CLI --reactive-query, --reactive-target) "
        "or calibrate for the plan alone (reactive_backstop=false; CLI --no-reactive-backstop)"
    )
