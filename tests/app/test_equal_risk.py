"""The reactive HPA at gpucast's exact risk: its frontier's Pareto points, interpolated."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.plans.replay.inputs import HPA_TARGETS
from app.plans.replay.scoring import _equal_risk

KPI = "time_over_capacity_share"


def expected_gpu_hours(frontier: list[dict[str, Any]], risk: float, kpi: str = KPI) -> float | None:
    """The oracle: the points no other beats on both risk and GPU-hours, GPU-hours linear in
    the risk between them (np.interp), the cheapest beyond the riskiest; None below them all."""
    pareto = [
        p
        for p in frontier
        if not any(
            (q[kpi] <= p[kpi] and q["gpu_hours"] < p["gpu_hours"])
            or (q[kpi] < p[kpi] and q["gpu_hours"] <= p["gpu_hours"])
            for q in frontier
        )
    ]
    if not pareto or risk + 1e-12 < min(p[kpi] for p in pareto):  # float noise, as gpucast
        return None
    pareto.sort(key=lambda p: p[kpi])
    xs = [p[kpi] for p in pareto]
    ys = [p["gpu_hours"] for p in pareto]
    return float(np.interp(risk, xs, ys))


def point(target: float, risk: float, gpu_hours: float) -> dict[str, Any]:
    return {
        "target_utilization": target,
        "gpu_hours": gpu_hours,
        "cost_usd": 2.0 * gpu_hours,
        KPI: risk,
        "requests_over_capacity_share": risk / 10,
        "time_over_85_share": risk,
        "scale_events": 10,
        "peak_gpus": 8,
        "mean_utilization": target,
    }


def test_the_grid_is_every_hundredth_from_0_30_to_0_99() -> None:
    assert len(HPA_TARGETS) == 70
    assert HPA_TARGETS[0] == 0.3 and HPA_TARGETS[-1] == 0.99
    assert np.allclose(np.diff(HPA_TARGETS), 0.01)


def test_the_hpa_is_read_between_the_two_pareto_points_around_gpucasts_risk() -> None:
    frontier = [
        point(0.5, 0.000, 100.0),
        point(0.6, 0.002, 90.0),
        point(0.7, 0.004, 95.0),  # dominated by 0.6: cheaper at less risk
        point(0.8, 0.010, 70.0),
    ]
    # 0.006 is half way from 0.002 (0.6, 90 GPU-h) to 0.010 (0.8, 70 GPU-h): the dominated
    # 0.7 plays no part
    equal = _equal_risk(frontier, 0.006)
    assert equal is not None
    assert equal["gpu_hours"] == pytest.approx(80.0)
    assert equal["target_utilization"] == pytest.approx(0.7)
    assert equal[KPI] == pytest.approx(0.006)
    assert equal["cost_usd"] == pytest.approx(160.0)
    assert equal["between_targets"] == [0.6, 0.8]
    # exactly on a point: that point
    at = _equal_risk(frontier, 0.002)
    assert at is not None and at["gpu_hours"] == 90.0 and at["target_utilization"] == 0.6
    # riskier than every target: the cheapest (it holds less risk for fewer GPU-hours)
    beyond = _equal_risk(frontier, 0.05)
    assert beyond is not None and beyond["gpu_hours"] == 70.0
    # safer than every target: none reaches it
    assert _equal_risk([point(0.5, 0.001, 100.0)], 0.0) is None


@settings(max_examples=200, deadline=None)
@given(
    points=st.lists(
        st.tuples(st.integers(0, 2000), st.floats(min_value=1, max_value=1000)),
        min_size=1,
        max_size=12,
    ),
    minutes=st.integers(0, 2500),
)
def test_equal_risk_agrees_with_the_oracle(points, minutes) -> None:
    # risks are shares of a week's minutes, as the replay measures them
    frontier = [point(0.3 + 0.01 * k, m / 10080, g) for k, (m, g) in enumerate(points)]
    risk = minutes / 10080
    got = _equal_risk(frontier, risk)
    want = expected_gpu_hours(frontier, risk)
    if want is None:
        assert got is None
    else:
        assert got is not None and got["gpu_hours"] == pytest.approx(want, rel=1e-9, abs=1e-9)
