"""What is wrong with a stored GPU profile, if anything: figures or a load-test table stored
before gpucast checked them as it does now (an infinite tokens/s figure, a subnormal TTFT, a
request rate × 1e300). Lists show such a profile with its problem; anything that would compute
with it is a 409 naming the profile and what to do."""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from typing import Any

from app.common.names import echo
from app.db.models import GpuProfile, GpuProfileLoadTest
from app.errors import ConflictError

# (field, lowest, highest, lowest allowed itself, may be null): the API's own bounds on a profile
FIGURE_BOUNDS = (
    ("tokens_per_s_per_gpu", 0.0, 1e9, False, False),
    ("gpus_per_replica", 1.0, 64.0, True, False),
    ("usd_per_hour_on_demand", 0.0, 1e6, True, True),
    ("usd_per_hour_reserved", 0.0, 1e6, True, True),
    ("usd_per_hour_spot", 0.0, 1e6, True, True),
    ("parameters", 0.0, 1e14, False, True),
    ("context_length_tokens", 1.0, 1e8, True, True),
    ("peak_tflops", 0.0, 1e6, False, True),
    ("memory_bandwidth_gb_per_s", 0.0, 1e6, False, True),
)
NUMBER_FIELDS = tuple(field for field, *_ in FIGURE_BOUNDS)
_CACHE_SIZE = 256
_tables: OrderedDict[tuple[Any, ...], str | None] = OrderedDict()
_lock = threading.Lock()


def usable_number(value: Any, field: str) -> bool:
    """True when a stored figure is within the bounds the API accepts for ``field``."""
    for name, low, high, low_allowed, nullable in FIGURE_BOUNDS:
        if name == field:
            if value is None:
                return nullable
            if isinstance(value, bool) or not isinstance(value, int | float):
                return False
            number = float(value)
            above = number >= low if low_allowed else number > low
            return math.isfinite(number) and above and number <= high
    raise KeyError(field)


def figures_problem(profile: GpuProfile) -> str | None:
    """The first stored figure outside the bounds the API accepts, described; None if none."""
    for field in NUMBER_FIELDS:
        value = getattr(profile, field)
        if not usable_number(value, field):
            return f"its {field} is {value!r}"
    return None


def table_problem(row: GpuProfileLoadTest | None) -> str | None:
    """What the stored table's checks refuse (row and column named); None if it reads back.
    Remembered per stored table (a replaced table is a new row)."""
    if row is None:
        return None
    import capacity

    key = (row.id, row.created_at, len(row.records))
    with _lock:
        if key in _tables:
            _tables.move_to_end(key)
            return _tables[key]
    try:
        capacity.LoadTestTable.from_records(row.records, **row.meta)
        problem = None
    except (capacity.CapacityError, TypeError, ValueError) as exc:
        problem = f"its load test: {exc}"
    with _lock:
        _tables[key] = problem
        while len(_tables) > _CACHE_SIZE:
            _tables.popitem(last=False)
    return problem


def profile_problem(profile: GpuProfile, row: GpuProfileLoadTest | None) -> str | None:
    return figures_problem(profile) or table_problem(row)


def unusable(name: str, problem: str) -> ConflictError:
    """The 409 of computing with a profile stored with values gpucast cannot use."""
    return ConflictError(
        f"GPU profile {echo(name)} is stored with values gpucast cannot use ({problem}); "
        f"import its load test again (PUT /v1/gpu-profiles/{name}/loadtest or "
        "'gpucast profile import --replace'), replace its figures, or delete it"
    )


def require_usable_figures(profile: GpuProfile) -> None:
    problem = figures_problem(profile)
    if problem is not None:
        raise unusable(profile.name, problem)
