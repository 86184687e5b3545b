"""Shared GPU pools: fleets of identical nodes that several series are packed onto.

``spec`` validates what a pool is made of (the API body and the CLI file); ``store`` writes
and reads pools (create, replace, delete, list) and loads one for a pool plan; ``plan``
places the members' own GPU plans on the pool (:func:`capacity.plan_pool`).
"""

from app.pools.plan import PoolPlanResult, pool_plan
from app.pools.spec import (
    PRIORITIES,
    NodePrices,
    PoolCreate,
    PoolFields,
    PoolMemberIn,
    validate_pool_name,
)
from app.pools.store import (
    StoredMember,
    StoredPool,
    as_dict,
    create_pool,
    delete_pool,
    get_pool,
    list_pools,
    load_pool,
    replace_pool,
)

__all__ = [
    "PRIORITIES",
    "NodePrices",
    "PoolCreate",
    "PoolFields",
    "PoolMemberIn",
    "PoolPlanResult",
    "StoredMember",
    "StoredPool",
    "as_dict",
    "create_pool",
    "delete_pool",
    "get_pool",
    "list_pools",
    "load_pool",
    "pool_plan",
    "replace_pool",
    "validate_pool_name",
]
