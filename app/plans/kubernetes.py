"""What the Kubernetes output needs besides the plan: names, the URL KEDA polls, the
reactive trigger (shared by the REST route and the CLI)."""

from __future__ import annotations

import hashlib
import re
from urllib.parse import quote, urlencode

import capacity
from app.errors import InputError
from app.plans import params as params_module
from app.plans.desired import fallback_replicas
from app.plans.params import PlanParams
from app.plans.service import SeriesPlan
from app.profiles.deployments import Slo

MAX_LABEL_CHARS = 63  # a DNS-1123 label: ScaledObject names, KEDA's label values
# KEDA >= 2.20 refuses a ScaledObject whose HPA name, keda-hpa-<name>, passes 63 characters:
# generated names stay within 63 - len("keda-hpa-") = 54.
MAX_NAME_CHARS = MAX_LABEL_CHARS - len(capacity.KEDA_HPA_PREFIX)
HASH_CHARS = 10
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_HASHED = re.compile(rf".*-[0-9a-f]{{{HASH_CHARS}}}")


def k8s_name(series: str) -> str:
    """A DNS-1123 label of at most 54 characters unique to ``series``: the ScaledObject's name
    and the default target Deployment's (KEDA's HPA, ``keda-hpa-<name>``, then fits the 63
    characters KEDA 2.20 checks).

    A series name that already is such a label (``chat-eu``) is used as it is. Any other is
    made readable (lower case, runs of other characters as ``-``, cut to fit) and gets ``-``
    and the first 10 hex digits of the SHA-256 of the exact series name, so names that read
    the same (``demo/servegen-m-small``, ``Demo/ServeGen.M_Small``, ``demo-servegen-m-small``)
    or differ only after the cut never share an object: ``demo-servegen-m-small-1a2b3c4d5e``.
    A name shaped like a hashed one is hashed too, so no series can take another's name.
    """
    is_label = _LABEL.fullmatch(series) and len(series) <= MAX_NAME_CHARS
    if is_label and not _HASHED.fullmatch(series):
        return series
    digest = hashlib.sha256(series.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_CHARS]
    readable = re.sub(r"[^a-z0-9]+", "-", series.lower()).strip("-")
    readable = readable[: MAX_NAME_CHARS - HASH_CHARS - 1].rstrip("-")
    return f"{readable}-{digest}" if readable else f"gpucast-{digest}"


# The option is a plan parameter (band auto calibrates for it); kept here under its old names.
HPA_TOLERANCE_HELP = params_module.HPA_TOLERANCE_HELP
hpa_tolerance = params_module.parse_hpa_tolerance


def desired_replicas_url(
    base_url: str, name: str, profile: str | None, params: PlanParams, *, slo: Slo | None = None
) -> str:
    """The URL a KEDA trigger polls for this series, profile, plan parameters and SLO
    override; without a profile (or SLO) it follows the series' deployment's."""
    values = {
        k: str(v).lower() if isinstance(v, bool) or v is None else v
        for k, v in params.non_default_query().items()
    }
    pinned_profile = {"profile": profile} if profile is not None else {}
    pinned_slo = slo.as_dict() if slo is not None else {}
    query = urlencode({**pinned_profile, **values, **pinned_slo})
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


def scaled_object_error(
    exc: capacity.CapacityError, params: PlanParams, reactive: capacity.ReactiveTrigger | None
) -> InputError:
    """The 4xx for a ScaledObject that cannot be written; when the object has no trigger at
    all because band auto's floor sits on the minimum (the reactive trigger it was calibrated
    with carries the load), it says how to get one."""
    warning = backstop_warning(params, reactive)
    message = str(exc)
    if warning and "needs at least one trigger" in message:
        message += f" (the floor stays at the minimum: {warning})"
    return InputError(message)


def max_replicas(plan: SeriesPlan) -> int | None:
    """The ScaledObject's ``maxReplicaCount`` for ``plan``: twice the floor's peak (KEDA's
    default here), raised to the expected fleet's P99 peak (app.plans.expected) so the
    ceiling never cuts what the deployment is expected to run; None under a quota (the quota
    is the ceiling) or when the expected fleet is not measured (the default then). It is
    never below the object's fallback (:func:`app.plans.fallback_replicas`)."""
    if plan.params.max_gpus is not None or plan.expected is None:
        return None
    if plan.expected.peak("p99") is None:
        return None
    return max(2 * int(plan.plan.peak_replicas), fallback_replicas(plan))
