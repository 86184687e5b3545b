"""Cost of plans: purchase mixes, monthly projection, saving against static peak."""

from __future__ import annotations

import pandas as pd
import pytest

import capacity as cap


def _plan(gpus: list[int]) -> pd.DataFrame:
    return pd.DataFrame({"gpus": gpus})


def test_on_demand_only_and_saving_vs_static_peak() -> None:
    cost = cap.plan_cost(_plan([2, 4, 6, 4]), cap.Prices(2.5))
    assert cost.gpu_hours == 16
    assert cost.total_usd == pytest.approx(40.0)
    assert cost.static_peak_usd == pytest.approx(6 * 4 * 2.5)
    assert cost.saving_vs_static_usd == pytest.approx(20.0)
    assert cost.saving_vs_static_fraction == pytest.approx(1 / 3)
    assert cost.monthly_usd == pytest.approx(40.0 / 4 * 720)


def test_reserved_baseline_plus_spot_and_on_demand() -> None:
    prices = cap.Prices(on_demand_usd_per_hour=2.5, reserved_usd_per_hour=1.5, spot_usd_per_hour=1)
    cost = cap.plan_cost(_plan([2, 4, 6, 4]), prices, reserved_gpus="baseline", spot_fraction=0.5)
    assert cost.reserved_gpus == 2
    assert cost.reserved_gpu_hours == 8
    assert cost.spot_gpu_hours == pytest.approx(4)
    assert cost.on_demand_gpu_hours == pytest.approx(4)
    assert cost.total_usd == pytest.approx(8 * 1.5 + 4 * 1.0 + 4 * 2.5)


def test_explicit_reservation_above_the_baseline_is_paid_when_idle() -> None:
    prices = cap.Prices(2.0, reserved_usd_per_hour=1.0)
    cost = cap.plan_cost(_plan([1, 3]), prices, reserved_gpus=3)
    assert cost.total_usd == pytest.approx(6.0)
    assert cost.on_demand_gpu_hours == 0


def test_plan_cost_accepts_a_gpu_plan(forecast_24h) -> None:
    plan = cap.plan_gpus(forecast_24h, per_gpu_tokens_per_s=1000)
    cost = cap.plan_cost(plan, cap.Prices(2.5))
    assert cost.total_usd == pytest.approx(plan.gpu_hours * 2.5)
    assert cost.static_peak_usd == pytest.approx(plan.peak_gpus * 24 * 2.5)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"reserved_gpus": 2}, "reserved_usd_per_hour"),
        ({"spot_fraction": 0.3}, "spot_usd_per_hour"),
        ({"spot_fraction": 1.3}, r"spot_fraction must be in \[0, 1\]"),
        (
            {"reserved_gpus": "all"},
            "reserved_gpus must be None, 'break-even', 'baseline' or a count",
        ),
    ],
)
def test_cost_errors(kwargs: dict, message: str) -> None:
    with pytest.raises(cap.InvalidParameterError, match=message):
        cap.plan_cost(_plan([1, 2]), cap.Prices(2.5), **kwargs)
