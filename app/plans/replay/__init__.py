"""The plan replay of one series: rebuild, at every past decision time, the plan each policy
would have deployed from data strictly before it, then run the actual load against it.

Policies (same load, same fleet rules, same prices):

- ``gpucast`` — what the service deploys: each nightly run at the nightly hour fits the same
  models with the same selection on the history before it, and the plan is built by the very
  function the capacity endpoint uses (band, peak factors, formula, schedule rules).
- ``static-peak`` — the previous 7 days' peak load at the utilization target, re-read each
  night from past load only.
- ``reactive-hpa`` — the Kubernetes HPA alone at target 0.75 with the same behavior; the
  same HPA at each of ``HPA_TARGETS`` is its cost/risk frontier (``reactive_frontier``), and
  ``reactive-at-equal-risk`` is the cheapest frontier target whose risk is at most gpucast's
  (time over capacity, or time over the SLO when the replay is scored at one: the risk band
  auto holds) — "is the forecast worth it versus KEDA alone?".
- ``seasonal-mean`` — the seeds' plan: the 7-day same-hour mean through the same conversion.
- ``hourly-perfect-foresight`` — each hour sized for its busiest moment at the utilization
  target, known in advance (it reads the future: a reference, never a choice, and not a bound).
- ``instant-bound`` — each minute's load on the capacity line, rounded up to whole replicas,
  no cold start (``bound: true``): the least GPU-hours at 0 % over capacity.

Every row is scored against one **capacity line**: what one replica sustains — the SLO
capacity at each minute's mix when the replay is scored at an SLO, else the profile's tokens/s
per GPU x GPUs per replica at 100 % (the utilization target is a planning margin, not the
line). Time over capacity and band auto's risk are time over that line.

The actual load is the stored hours (each hour's busiest minute at ``peak_rps`` when stored)
or a finer load given by the caller. Everything here is computed from values; the caller
reads the database first and stores nothing.
"""

from app.plans.replay.execution import replay_series
from app.plans.replay.inputs import ReplayOptions, SeriesInputs, candidate_models

__all__ = ["ReplayOptions", "SeriesInputs", "candidate_models", "replay_series"]
