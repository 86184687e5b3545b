"""What a pool is made of, validated in one place for the API and the CLI.

The body of ``POST /v1/pools`` (:class:`PoolCreate`) and of ``PUT /v1/pools/{name}``
(:class:`PoolFields`, the same without the name), and the file ``gpucast pool create --file``
reads. Rules that need the database (the series and GPU profiles exist, each profile fits the
pool's nodes) are checked by :mod:`app.pools.store`.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from app.common import options
from app.common.names import MAX_NAME_LENGTH, SERIES_NAME_PATTERN, NameText, echo
from app.errors import InputError

# The order is the order capacity is granted in under a quota.
PRIORITIES = options.POOL_PRIORITIES
Priority = Literal["critical", "standard", "batch"]
DEFAULT_GPUS_PER_NODE = options.POOL_GPUS_PER_NODE
MAX_GPUS_PER_NODE = 64
MAX_QUOTA_NODES = 1_000_000
MAX_MEMBERS = 500
MAX_USD_PER_HOUR = 1e6
DEFAULT_SPOT_INTERRUPTION = options.POOL_SPOT_INTERRUPTION
# /v1/pools/{name}/plan is the plan of pool {name}: no pool name may end in that segment.
RESERVED_LAST_SEGMENTS = frozenset({"plan"})
POOL_NAME_PATTERN = SERIES_NAME_PATTERN
_POOL_NAME_RE = re.compile(POOL_NAME_PATTERN)


def _not_a_bool(value: object) -> object:
    # pydantic reads `true` as the count 1; a count sent as a boolean is a client bug.
    if isinstance(value, bool):
        raise ValueError("Input should be a valid integer, not a boolean")
    return value


# Bounds before the validator, so that the JSON Schema states them as minimum / maximum.
GpusPerNode = Annotated[int, Field(ge=1, le=MAX_GPUS_PER_NODE), BeforeValidator(_not_a_bool)]
QuotaNodes = Annotated[int, Field(ge=1, le=MAX_QUOTA_NODES), BeforeValidator(_not_a_bool)]


class NodePrices(BaseModel):
    """USD per node-hour (a whole node of ``gpus_per_node`` GPUs), by purchase option."""

    model_config = ConfigDict(extra="forbid")
    # Prices are strict, as GPU profiles' are: `true` or "9.5" is a client bug, not a price.

    on_demand_usd_per_hour: float = Field(
        gt=0, le=MAX_USD_PER_HOUR, allow_inf_nan=False, strict=True, description="a node-hour"
    )
    reserved_usd_per_hour: float | None = Field(
        default=None,
        gt=0,
        le=MAX_USD_PER_HOUR,
        allow_inf_nan=False,
        strict=True,
        description="a reserved (committed) node-hour; none: no reservation",
    )
    spot_usd_per_hour: float | None = Field(
        default=None,
        gt=0,
        le=MAX_USD_PER_HOUR,
        allow_inf_nan=False,
        strict=True,
        description="a spot node-hour; none: spot is not used",
    )


class PoolMemberIn(BaseModel):
    """A series served in the pool with one GPU profile at one priority class."""

    model_config = ConfigDict(extra="forbid")

    series: NameText = Field(min_length=1, max_length=200, examples=["prod-us/llama-3.1-70b"])
    profile: NameText | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        examples=["h100-70b"],
        description="GPU profile name (default: the series' deployment when the pool is written)",
    )
    priority: Priority = Field(
        default="standard",
        description="under a quota, capacity goes to critical first, then standard, then batch",
    )
    spot_ok: bool = Field(
        default=False, strict=True, description="the service tolerates spot interruptions"
    )


class PoolFields(BaseModel):
    """Everything of a pool but its name (the body of a PUT, which replaces it whole)."""

    model_config = ConfigDict(extra="forbid")

    gpu_type: NameText | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        examples=["H100-80G"],
        description="when given, every member's GPU profile must be of this GPU type",
    )
    gpus_per_node: GpusPerNode = DEFAULT_GPUS_PER_NODE
    node_prices: NodePrices
    quota_nodes: QuotaNodes | None = Field(default=None, description="most nodes the pool may hold")
    spot_interruption: float = Field(
        default=DEFAULT_SPOT_INTERRUPTION,
        ge=0,
        lt=1,
        allow_inf_nan=False,
        strict=True,
        description="share of spot node-hours lost to interruption and re-bought on demand",
    )
    members: list[PoolMemberIn] = Field(default_factory=list, max_length=MAX_MEMBERS)


class PoolCreate(PoolFields):
    name: str = Field(
        min_length=1,
        max_length=MAX_NAME_LENGTH,
        examples=["prod-us/h100"],
        # Documented only: validate_pool_name checks it with messages that name the rule.
        json_schema_extra={"pattern": POOL_NAME_PATTERN},
    )


def validate_pool_name(name: str) -> str:
    """Return ``name`` if it is a valid pool name, else raise :class:`InputError`.

    The rules of series names (:func:`app.common.names.validate_series_name`): letters, digits and
    ``._:@+=-`` in segments separated by single ``/``, no ``.``/``..`` segment, at most 200
    characters; and a name of several segments must not end in ``plan``.
    """
    if not name:
        raise InputError("pool name must be a non-empty string")
    if len(name) > MAX_NAME_LENGTH:
        raise InputError(f"pool name is {len(name)} characters long; the limit is 200")
    segments = name.split("/")
    if any(segment in {".", ".."} for segment in segments):
        raise InputError(f"invalid pool name {echo(name)}: '.' and '..' segments are not allowed")
    # fullmatch, not match: '$' also matches before a trailing newline.
    if not _POOL_NAME_RE.fullmatch(name):
        raise InputError(
            f"invalid pool name {echo(name)}: use letters, digits and ._:@+=- in segments "
            "separated by single '/', starting with a letter or digit"
        )
    if len(segments) > 1 and segments[-1] in RESERVED_LAST_SEGMENTS:
        raise InputError(
            f"invalid pool name {echo(name)}: its last segment {segments[-1]!r} is reserved"
        )
    return name
