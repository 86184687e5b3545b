"""GPU plans on the service side: the plan a series is served (``service``), what an
autoscaler should hold now (``desired``) and the replay of past plans (``replay``)."""

from app.plans.desired import desired_replicas, fallback_replicas
from app.plans.params import STALE_AFTER, PlanParams
from app.plans.service import PlanCache, SeriesPlan, series_plan
from app.plans.sizing import ProfileFigures, peak_factors_from_history, plan_from_forecast

__all__ = [
    "STALE_AFTER",
    "PlanCache",
    "PlanParams",
    "ProfileFigures",
    "SeriesPlan",
    "desired_replicas",
    "fallback_replicas",
    "peak_factors_from_history",
    "plan_from_forecast",
    "series_plan",
]
