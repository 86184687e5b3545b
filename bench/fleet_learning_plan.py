"""The plan at the SLO follows the learned model (issue 33, item 3): ``bench/fleet_learning.py
--plan``.

Per production mix of every public NIM table (the lab either the 200/200 mix alone or the whole
table, the SLO the middle level of ``bench/slo_capacity.py``): a 24-hour plan of a constant
load of 20 replicas of the slowed fleet (20 times the whole table's SLO capacity at the mix at
the SLO ÷ 1.3; requests, utilization target 1, safety factor 1, no peak factor) is sized by
:func:`capacity.plan_gpus_at_slo`

- ``lab``: on the lab's model alone;
- ``before``: with three days of the mix's judged hours as measured (each judged row three
  times, in a shuffled order, seed 0; ages 4 h on) — a fleet serving the same range of loads
  every day;
- ``after``: the same plus three hours 30 % slower (three of the judged rows drawn with the
  same seed, p95 TTFT and TPOT × 1.3, ages 1 … 3 h) — the slowdown ``--drift`` alerts on
  within 3 hours;
- ``target``: on the whole table's model at the SLO ÷ 1.3 (what a replica sustains when
  every latency is 30 % higher, by the table that measured the mix): the plan "grown to
  match".

Counted per table: mixes where ``after`` has more GPUs than ``before`` and where it reaches the
target; GPUs summed over the mixes. Also timed: the plan on the lab alone and with the nine
production hours (median of ``--repeat`` runs, every mix), the ratio is the cost of learning.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

import capacity as cap
from bench.slo_capacity import slo_levels

SLOWDOWN = 1.3
LOAD_REPLICAS = 20.0
DAYS = 3


def plan_gpus(
    model: cap.SloModel,
    slo: cap.SloTarget,
    mix: tuple[float, float],
    requests_per_s: float,
    hours: list[cap.ProductionHour],
) -> float:
    """GPU-hours of the 24-hour plan at a constant load (requests/s) at the mix."""
    forecast = pd.DataFrame(
        {
            "ds": pd.date_range("2026-12-08", periods=24, freq="h", tz="UTC"),
            "yhat": np.full(24, requests_per_s * 3600.0),
        }
    )
    plan = cap.plan_gpus_at_slo(
        forecast,
        model=model,
        slo=slo,
        prompt_tokens=np.full(24, mix[0]),
        completion_tokens=np.full(24, mix[1]),
        of_requests=True,
        production=hours,
        utilization_target=1.0,
        safety_factor=1.0,
        gpus_per_replica=model.gpus_per_replica,
    )
    return float(plan.gpu_hours)


def scenario(
    model: cap.SloModel, mix_hours: list[cap.ProductionHour]
) -> tuple[list[cap.ProductionHour], list[cap.ProductionHour]] | None:
    """(as measured, as measured + three 30 % slower) for one mix; None below three judged."""
    by_load = sorted(mix_hours, key=lambda h: h.requests_per_s_per_replica)
    judged = [h for h, e in zip(by_load, cap.expected_p95(model, by_load), strict=True) if e]
    if len(judged) < 3:
        return None
    rng = np.random.default_rng(0)
    days = [judged[i] for i in rng.permutation(DAYS * len(judged)) % len(judged)]
    measured = [replace(h, age_hours=4.0 + i) for i, h in enumerate(days)]
    slowed = [
        replace(
            judged[j],
            ttft_p95_s=judged[j].ttft_p95_s * SLOWDOWN,
            tpot_p95_s=judged[j].tpot_p95_s * SLOWDOWN,
            age_hours=1.0 + i,
        )
        for i, j in enumerate(rng.choice(len(judged), size=3, replace=False))
    ]
    return measured, measured + slowed


def plan_table(
    table: cap.LoadTestTable, lab: cap.LoadTestTable, truth: cap.SloModel, repeat: int
) -> dict[str, float]:
    from bench.fleet_learning import LAB_MIX, production_hours

    model = cap.fit_slo_model(lab, gpus_per_replica=table.tensor_parallel)
    slo = slo_levels(table)[1]
    slower = cap.SloTarget(slo.ttft_p95_s / SLOWDOWN, slo.tpot_p95_s / SLOWDOWN)
    out = dict.fromkeys(
        ("mixes", "grew", "matched", "reached", "lab", "before", "after", "target"), 0.0
    )
    out |= {"lab_s": 0.0, "learned_s": 0.0}
    every = production_hours(table)
    for mix in table.mixes():
        mix = (float(mix[0]), float(mix[1]))
        if mix == LAB_MIX:
            continue
        hours = scenario(model, [h for h in every if (h.prompt_tokens, h.completion_tokens) == mix])
        if hours is None:
            continue
        try:
            answer = truth.capacity(
                prompt_tokens=mix[0], completion_tokens=mix[1], slo=slower, allow_extrapolation=True
            )
        except cap.SloUnreachableError:
            continue
        load = LOAD_REPLICAS * answer.requests_per_s_per_replica
        try:
            gpu_hours = {
                "lab": plan_gpus(model, slo, mix, load, []),
                "before": plan_gpus(model, slo, mix, load, hours[0]),
                "after": plan_gpus(model, slo, mix, load, hours[1]),
                "target": plan_gpus(truth, slower, mix, load, []),
            }
        except cap.SloUnreachableError:  # the lab refuses the mix at the SLO
            continue
        out["mixes"] += 1
        out["grew"] += gpu_hours["after"] > gpu_hours["before"]
        out["matched"] += gpu_hours["after"] >= gpu_hours["target"]
        out["reached"] += gpu_hours["after"] >= 0.9 * gpu_hours["target"]
        for name, value in gpu_hours.items():
            out[name] += value
        out["lab_s"] += _timed(partial(plan_gpus, model, slo, mix, load, []), repeat)
        out["learned_s"] += _timed(partial(plan_gpus, model, slo, mix, load, hours[1]), repeat)
    return out


def _timed(run: Callable[[], float], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return float(np.median(times))


def print_plan(data: Path, repeat: int) -> None:
    from bench.fleet_learning import LAB_MIX, mix_table

    print(
        f"\n{'plan at the SLO, +30 % slower':<44} {'lab':<7} {'mixes':>5} {'grew':>4} "
        f"{'matched':>7} {'>=90%':>5}   GPU-h lab / before / after / target   ms lab / learned"
    )
    lab_s = learned_s = 0.0
    for path in sorted(data.glob("*nim*.csv")):
        for table in cap.read_loadtest_csv_setups(path.read_text(), file_name=path.name):
            label = f"{path.name.split('__')[0]} {path.name.split('__')[1][:9]} "
            label += f"tp{table.tensor_parallel} {table.precision}"
            truth = cap.fit_slo_model(table, gpus_per_replica=table.tensor_parallel)
            for name, lab in (("200/200", mix_table(table, LAB_MIX)), ("whole", table)):
                c = plan_table(table, lab, truth, repeat)
                lab_s, learned_s = lab_s + c["lab_s"], learned_s + c["learned_s"]
                print(
                    f"{label:<44} {name:<7} {c['mixes']:>5.0f} {c['grew']:>4.0f} "
                    f"{c['matched']:>7.0f} {c['reached']:>5.0f}   {c['lab']:>6.0f} / "
                    f"{c['before']:>6.0f} / {c['after']:>6.0f} / {c['target']:>6.0f}   "
                    f"{1e3 * c['lab_s']:>6.1f} / {1e3 * c['learned_s']:>6.1f}"
                )
    print(
        f"plan time over every mix: lab {lab_s:.2f} s, learned {learned_s:.2f} s "
        f"({learned_s / lab_s:.2f}x)"
    )
