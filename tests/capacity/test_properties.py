"""Property tests of the core conversion."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import capacity as cap
from tests.capacity.conftest import make_forecast

loads = st.lists(
    st.floats(min_value=0, max_value=1e7, allow_nan=False, allow_infinity=False),
    min_size=1,
    max_size=48,
)
params = st.fixed_dictionaries(
    {
        "per_gpu_tokens_per_s": st.floats(min_value=1, max_value=50_000),
        "utilization_target": st.floats(min_value=0.05, max_value=1.0),
        "safety_factor": st.floats(min_value=1.0, max_value=3.0),
        "min_gpus": st.integers(min_value=1, max_value=16),
        "gpus_per_replica": st.sampled_from([1, 2, 4, 8]),
    }
)


@settings(max_examples=200, deadline=None)
@given(load=loads, extra=st.floats(min_value=0, max_value=1e6), kwargs=params)
def test_gpus_never_decrease_when_load_increases(load, extra, kwargs) -> None:
    base = cap.gpus_for_load(np.array(load), **kwargs)
    more = cap.gpus_for_load(np.array(load) + extra, **kwargs)
    assert (more >= base).all()


@settings(max_examples=200, deadline=None)
@given(load=loads, kwargs=params)
def test_monotone_in_sorted_load(load, kwargs) -> None:
    gpus = cap.gpus_for_load(np.sort(np.array(load)), **kwargs)
    assert (np.diff(gpus) >= 0).all()


@settings(max_examples=200, deadline=None)
@given(load=loads, kwargs=params)
def test_floor_replica_multiple_and_utilization_bound(load, kwargs) -> None:
    values = np.array(load)
    gpus = cap.gpus_for_load(values, **kwargs)
    assert (gpus >= kwargs["min_gpus"]).all()
    assert (gpus % kwargs["gpus_per_replica"] == 0).all()
    busy = gpus > 0
    utilization = values[busy] / (gpus[busy] * kwargs["per_gpu_tokens_per_s"])
    bound = kwargs["utilization_target"] / kwargs["safety_factor"]
    # 1e-9 relative slack: the single rounding point treats x within 1e-9 of an integer as it.
    assert (utilization <= bound * (1 + 1e-9) + 1e-12).all()


@settings(max_examples=100, deadline=None)
@given(load=loads, kwargs=params, band=st.sampled_from(cap.PLAN_BANDS))
def test_plan_frame_respects_the_same_bounds(load, kwargs, band) -> None:
    plan = cap.plan_gpus(make_forecast(load), band=band, forecast_unit="per_s", **kwargs)
    frame = plan.frame
    assert plan.peak_gpus == frame["gpus"].max()
    # The executed schedule never holds less than the formula asks for (no quota here) ...
    assert (frame["gpus"] >= frame["raw_gpus"]).all()
    # ... and its GPU-hours are the hours' counts plus the cold-start lead of each rise.
    rises = np.clip(np.diff(frame["gpus"].to_numpy()), 0, None).sum()
    assert frame["gpus"].sum() <= plan.gpu_hours + 1e-9
    assert plan.gpu_hours <= frame["gpus"].sum() + rises * 300 / 3600 + 1e-9
    assert (frame["replicas"] * kwargs["gpus_per_replica"] == frame["gpus"]).all()
    bound = kwargs["utilization_target"] / kwargs["safety_factor"]
    assert (frame["expected_utilization"] <= bound * (1 + 1e-9) + 1e-12).all()
