"""gpucast.capacity — pure capacity-planning library (no web, database or settings code).

From an hourly load forecast to GPUs, cost and a scaling schedule: the core conversion
(:func:`plan_gpus`) with peak factors (:func:`peak_factors`) and the schedule a fleet follows
(:func:`execute_schedule`), first-principles sizing (:func:`estimate`), cost
(:func:`plan_cost`), the plan replay (:func:`replay`), scaling-policy simulation
(:func:`simulate_policies`), Erlang C queueing, utilization tiers, a KEDA ScaledObject
(:func:`keda_scaled_object`) and the packing of shared pools' replicas onto nodes
(:func:`pack`, :func:`repack`) with the pool plan built on it (:func:`plan_pool`: priority
grants and rate limits under a quota, pooled reservations), and measured profiles: load-test
tables read from CSV, ``vllm bench serve`` or genai-perf files (:func:`read_loadtest_files`)
and the SLO capacity at any prompt/completion mix (:func:`fit_slo_model`,
:func:`slo_capacity`). Errors derive from :class:`CapacityError`.

The library grows by family, one sub-package each; this module is their stable public face
(every name is importable as ``from capacity import X``):

- ``sizing`` — first-principles sizing, the core conversion, the schedule, cost;
- ``measured`` — load-test tables and the SLO model fitted to them;
- ``pools`` — shared pools: spec, packing, placement, pricing, the pool plan;
- ``kubernetes`` — the KEDA ScaledObject and the HPA's replica rule;
- ``simulation`` — the plan replay and the scaling-policy simulator.

Imports run one way: ``sizing`` imports no other family; ``measured``, ``pools`` and
``kubernetes`` import ``sizing`` only; ``simulation`` imports ``sizing`` and ``kubernetes``.
Every family may import the root's ``errors`` and ``_checks`` (docs/architecture.md).
"""

from capacity import errors, kubernetes, measured, pools, simulation, sizing
from capacity.errors import *  # noqa: F403
from capacity.kubernetes import *  # noqa: F403
from capacity.measured import *  # noqa: F403
from capacity.pools import *  # noqa: F403
from capacity.simulation import *  # noqa: F403
from capacity.sizing import *  # noqa: F403

__all__ = [
    *errors.__all__,
    *sizing.__all__,
    *measured.__all__,
    *pools.__all__,
    *kubernetes.__all__,
    *simulation.__all__,
]
