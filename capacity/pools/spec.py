"""What a shared pool is: its fleet of nodes (:class:`PoolSpec`) and its member services
(:class:`PoolMember`), validated on construction. Planned by :func:`capacity.pools.plan_pool`.
"""

from __future__ import annotations

from dataclasses import dataclass

from capacity._checks import require_fraction, require_int, require_positive
from capacity.errors import InvalidParameterError
from capacity.pools.allocation import PRIORITY_CLASSES
from capacity.sizing.cost import Prices

__all__ = ["PoolMember", "PoolSpec"]


@dataclass(frozen=True)
class PoolSpec:
    """A named fleet of identical nodes. ``node_prices`` are USD per node-hour."""

    name: str
    node_prices: Prices
    gpus_per_node: int = 8
    quota_nodes: int | None = None
    spot_interruption: float = 0.05
    gpu_type: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InvalidParameterError("pool name must be a non-empty string")
        require_int("gpus_per_node", self.gpus_per_node, minimum=1)
        if self.quota_nodes is not None:
            require_int("quota_nodes", self.quota_nodes, minimum=1)
        require_positive(
            "node_prices.on_demand_usd_per_hour", self.node_prices.on_demand_usd_per_hour
        )
        for label, price in (
            ("reserved", self.node_prices.reserved_usd_per_hour),
            ("spot", self.node_prices.spot_usd_per_hour),
        ):
            if price is not None:
                require_positive(f"node_prices.{label}_usd_per_hour", price)
        interruption = require_fraction(
            "spot_interruption", self.spot_interruption, allow_zero=True
        )
        if interruption >= 1:
            raise InvalidParameterError(
                f"spot_interruption must be in [0, 1), got {self.spot_interruption!r}"
            )


@dataclass(frozen=True)
class PoolMember:
    """One service in a pool.

    tokens_per_s_per_gpu: the load one GPU of the member's plan is sized to carry (per-GPU
    tokens/s × utilization target ÷ safety factor) — what a granted GPU admits.
    tokens_per_request: turns admitted tokens/s into the gateway's requests/s limit in every
    hour that plan_pool is given no figure of its own for; a mean over the day admits too
    much in hours of longer requests (give the per-hour figures, or enforce tokens/s).
    spot_ok: the service tolerates interruption, so its replicas may run on spot nodes.
    """

    name: str
    gpus_per_replica: int
    tokens_per_s_per_gpu: float
    priority: str = "standard"
    tokens_per_request: float | None = None
    spot_ok: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InvalidParameterError("member name must be a non-empty string")
        require_int(f"{self.name}: gpus_per_replica", self.gpus_per_replica, minimum=1)
        require_positive(f"{self.name}: tokens_per_s_per_gpu", self.tokens_per_s_per_gpu)
        if self.priority not in PRIORITY_CLASSES:
            raise InvalidParameterError(
                f"{self.name}: priority must be one of {', '.join(PRIORITY_CLASSES)}, "
                f"got {self.priority!r}"
            )
        if self.tokens_per_request is not None:
            require_positive(f"{self.name}: tokens_per_request", self.tokens_per_request)
