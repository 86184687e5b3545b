"""GPU profiles beyond one number: measured load-test tables, the SLO capacity they give at
any prompt/completion mix, a series' deployment (the profile and SLO that serve it), and the
comparison of profiles for one series."""

from app.profiles.deployments import (
    Binding,
    Deployment,
    Slo,
    bind_profile,
    clear_deployment,
    find_deployment,
    get_deployment,
    set_deployment,
    slo_of,
)

__all__ = [
    "Binding",
    "Deployment",
    "Slo",
    "bind_profile",
    "clear_deployment",
    "find_deployment",
    "get_deployment",
    "set_deployment",
    "slo_of",
]
