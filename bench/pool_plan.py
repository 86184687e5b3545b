"""Shared GPU pools: plan_pool speed on 200 synthetic members and a worked example on real traces.

    python bench/pool_plan.py [--data-dir DIR] [--runs 5] [--json FILE] [--skip-speed]
                              [--skip-example] [--baseline TREE]

1. **Speed.** 200 seeded synthetic members x 24 h (TP 1/2/4/8, the three priority classes, a
   quarter spot-tolerant, diurnal demand with different phases), :func:`capacity.plan_pool`
   timed with ``time.process_time`` (median of ``--runs``): no quota; a quota 20 % below the
   unconstrained peak nodes (the throttling path); and a mix with replicas of 3 and 6 GPUs as
   well (sizes that do not divide an 8-GPU node, so grants are checked by packing instead of
   the divisible shortcut), without and with its quota. ``PoolPlan.as_dict()`` is timed too.
   Then first-fit-decreasing against ``exact_pack`` (scipy milp) on seeded small pools, and
   on 1,000 seeded small pools (half under a quota) the hours placed afresh: the replicas
   they run, and how many move once the fresh placement is laid onto the previous hour's
   nodes (:func:`capacity.pools.repacking.onto_previous`).
   With ``--baseline TREE`` (a source tree of gpucast, e.g. a git worktree of an older
   commit) the speed cases are timed for that tree's ``capacity`` and this one's in
   alternating child processes (``PYTHONPATH``), one run each per round, so drift on a noisy
   machine hits both alike; the table gives both medians, their ratio, and whether the two
   grant the same GPUs to every member in every hour.
2. **Worked example.** Five real services from ``../shared/data`` (see its SOURCES.md), aligned
   by hour of day on one 24-hour day, each with its own GPU profile and priority class, planned
   by :func:`capacity.plan_gpus` (the actual day used as the forecast, default utilization
   target 0.75 and safety factor 1.2) and pooled on 8 x H100 nodes by
   :func:`capacity.plan_pool`; then the same pool under a quota 20 % below its peak nodes,
   with each hour's measured tokens per request behind the requests/s rate limits (and what a
   limit from the day's mean would admit). The assumptions are the constants below and are
   printed with the results.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

import capacity as cap

try:
    from capacity.pools.allocation import divisible_sizes
except ImportError:  # a --baseline tree from before capacity was cut into families (issue 34)
    from capacity.allocation import divisible_sizes

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA_DIR = REPO.parent / "shared" / "data"
HOURS = pd.date_range("2024-01-01", periods=24, freq="h", tz="UTC")  # a synthetic day
TARGET_CPU_S = 2.0
QUOTA_CUT = 0.20  # the quota is floor(0.8 x the unconstrained peak nodes)

# Node prices (USD per node-hour of 8 x H100). On demand: the capacity catalog's H100 list
# price ($2.50 per GPU-hour, capacity.GPUS["h100-80g"]) x 8. Reserved (35 % below on demand)
# and spot (60 % below) are stated assumptions of the size cloud price sheets show for
# 1-year commitments and spot H100s, not a quote. Spot interruption allowance: the default 5 %.
H100 = cap.GPUS["h100-80g"]
NODE_PRICES = cap.Prices(
    on_demand_usd_per_hour=8 * H100.on_demand_usd_per_hour,
    reserved_usd_per_hour=8 * H100.on_demand_usd_per_hour * 0.65,
    spot_usd_per_hour=8 * H100.on_demand_usd_per_hour * 0.40,
)
UTILIZATION_TARGET = 0.75  # plan_gpus defaults
SAFETY_FACTOR = 1.2
MFU = 0.35  # compute utilization of the first-principles tokens/s (capacity.estimate default)
SCALE = 10.0  # every service's measured load x 10, so the pool is tens of nodes


# ---------------------------------------------------------------------------------- speed


def synthetic_pool(
    seed: int, sizes: tuple[int, ...], count: int = 200
) -> tuple[list[cap.PoolMember], pd.DataFrame, pd.DataFrame]:
    """``count`` members with diurnal GPU demand (whole replicas) and the tokens behind it."""
    rng = np.random.default_rng(seed)
    members, gpus, tokens = [], {}, {}
    hour = np.arange(24)
    for index in range(count):
        size = int(rng.choice(sizes))
        per_gpu = float(rng.uniform(500, 5000))
        member = cap.PoolMember(
            f"svc{index:03d}",
            size,
            tokens_per_s_per_gpu=per_gpu,
            priority=cap.PRIORITY_CLASSES[index % 3],
            tokens_per_request=float(rng.uniform(200, 4000)),
            spot_ok=bool(rng.random() < 0.25),
        )
        base = rng.uniform(1, 12)
        shape = 1 + rng.uniform(0.2, 0.6) * np.sin(2 * np.pi * (hour - rng.uniform(0, 24)) / 24)
        replicas = np.ceil(base * shape)
        gpus[member.name] = replicas * size
        tokens[member.name] = replicas * size * per_gpu * rng.uniform(0.8, 1.0, size=24)
        members.append(member)
    return members, pd.DataFrame(gpus, index=HOURS), pd.DataFrame(tokens, index=HOURS)


def cpu_median(call: Callable[[], object], runs: int) -> tuple[float, list[float], object]:
    """Median CPU seconds of ``runs`` calls, every run's CPU seconds, and the last result."""
    seconds, result = [], None
    for _ in range(runs):
        started = time.process_time()
        result = call()
        seconds.append(time.process_time() - started)
    return statistics.median(seconds), seconds, result


def speed_case(name: str, sizes: tuple[int, ...], quota: bool, runs: int) -> dict:
    members, gpus, tokens = synthetic_pool(2026, sizes)
    quota_nodes = None
    if quota:
        free = cap.plan_pool(cap.PoolSpec("free", NODE_PRICES), members, gpus, tokens)
        quota_nodes = math.floor((1 - QUOTA_CUT) * int(free.hours["nodes"].max()))
    pool = cap.PoolSpec("bench", NODE_PRICES, quota_nodes=quota_nodes)
    median, seconds, plan = cpu_median(lambda: cap.plan_pool(pool, members, gpus, tokens), runs)
    dict_median, _, _ = cpu_median(plan.as_dict, runs)
    hours = plan.hours
    return {
        "case": name,
        "sizes": list(sizes),
        "divisible": divisible_sizes(sizes, 8),
        "quota_nodes": quota_nodes,
        "peak_nodes": int(hours["nodes"].max()),
        "peak_gpus": int(hours["granted_gpus"].max()),
        "fragmentation_gpus_max": int(hours["fragmentation_gpus"].max()),
        "above_lower_bound_hours": int((hours["nodes"] > hours["lower_bound"]).sum()),
        "throttled_hours": plan.throttled_hours,
        "migrations": int(hours["migrations"].sum()),
        "grants": grants_digest(plan),
        "plan_pool_cpu_s": median,
        "plan_pool_cpu_s_runs": seconds,
        "as_dict_cpu_s": dict_median,
    }


def grants_digest(plan: cap.PoolPlan) -> str:
    """A short digest of the GPUs granted to every member in every hour."""
    granted = plan.members["granted_gpus"].to_numpy(dtype=np.int64)
    return hashlib.sha1(granted.tobytes()).hexdigest()[:12]


def ffd_vs_exact(pools: int = 200, seed: int = 7) -> dict:
    """FFD, naive first fit and the exact optimum on seeded small pools (3-6 members of
    1/2/3/4/6/8-GPU replicas, 1-6 replicas each, 8-GPU nodes)."""
    rng = np.random.default_rng(seed)
    gaps, naive_gaps, above_bound, timeouts = [], [], 0, 0
    started = time.process_time()
    for _ in range(pools):
        count = int(rng.integers(3, 7))
        sizes = {f"m{i}": int(s) for i, s in enumerate(rng.choice([1, 2, 3, 4, 6, 8], count))}
        replicas = {name: int(rng.integers(1, 7)) for name in sizes}
        ffd = cap.first_fit_decreasing(replicas, sizes, 8)
        exact = cap.exact_pack(replicas, sizes, 8)
        naive = cap.naive_first_fit(replicas, sizes, 8)
        timeouts += exact.method != "exact"
        above_bound += exact.nodes_used > exact.lower_bound
        gaps.append(ffd.nodes_used - exact.nodes_used)
        naive_gaps.append(naive.nodes_used - exact.nodes_used)
    return {
        "pools": pools,
        "ffd_gap_mean": float(np.mean(gaps)),
        "ffd_gap_max": int(max(gaps)),
        "ffd_above_optimum": int(sum(g > 0 for g in gaps)),
        "naive_gap_mean": float(np.mean(naive_gaps)),
        "naive_gap_max": int(max(naive_gaps)),
        "optimum_above_lower_bound": above_bound,
        "exact_timeouts": timeouts,
        "cpu_s": time.process_time() - started,
    }


SPEED_CASES = [
    ("TP 1/2/4/8, no quota", (1, 2, 4, 8), False),
    ("TP 1/2/4/8, quota -20 %", (1, 2, 4, 8), True),
    ("TP 1/2/3/4/6/8, no quota", (1, 2, 3, 4, 6, 8), False),
    ("TP 1/2/3/4/6/8, quota -20 %", (1, 2, 3, 4, 6, 8), True),
]


def run_speed(runs: int) -> dict:
    results = [speed_case(name, sizes, quota, runs) for name, sizes, quota in SPEED_CASES]
    print(f"## Speed: 200 members x 24 h, plan_pool CPU, median of {runs} runs\n")
    print(
        "| case | quota nodes | peak nodes | hours above lower bound | max fragmentation GPUs "
        "| throttled hours | migrations | plan_pool CPU s | as_dict CPU s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for item in results:
        print(
            f"| {item['case']} | {item['quota_nodes'] or '-'} | {item['peak_nodes']} "
            f"| {item['above_lower_bound_hours']} | {item['fragmentation_gpus_max']} "
            f"| {item['throttled_hours']} | {item['migrations']} "
            f"| {item['plan_pool_cpu_s']:.3f} | {item['as_dict_cpu_s']:.3f} |"
        )
    worst = max(item["plan_pool_cpu_s"] for item in results)
    verdict = "met" if worst <= TARGET_CPU_S else f"missed by {worst - TARGET_CPU_S:.2f} s"
    print(f"\nslowest case {worst:.3f} s CPU (target <= {TARGET_CPU_S:.0f} s: {verdict})")
    packing = ffd_vs_exact()
    print(
        f"\nFFD vs exact_pack on {packing['pools']} seeded small pools (TP 1/2/3/4/6/8, 8-GPU "
        f"nodes): FFD above the optimum on {packing['ffd_above_optimum']} pools, gap mean "
        f"{packing['ffd_gap_mean']:.2f} / max {packing['ffd_gap_max']} node(s); naive first "
        f"fit gap mean {packing['naive_gap_mean']:.2f} / max {packing['naive_gap_max']}; the "
        f"optimum itself above ceil(GPUs/8) on {packing['optimum_above_lower_bound']}; exact "
        f"timeouts {packing['exact_timeouts']}; {packing['cpu_s']:.1f} s CPU"
    )
    fresh = fresh_hours()
    print(
        f"\nHours placed afresh on {fresh['pools']} seeded small pools (2-7 members of TP "
        f"1/2/4/8, 0-9 replicas each hour, a third spot-tolerant; half of them under a quota "
        f"20 % below their peak nodes): {fresh['fresh_hours']} of {fresh['hours']} hours, "
        f"running {fresh['replicas']} replicas; laid onto the previous hour's nodes "
        f"{fresh['moved']} of them move ({fresh['moved'] / max(fresh['replicas'], 1):.1%}; "
        f"counted as all restarted before, {fresh['replicas']}); "
        f"{fresh['cpu_s']:.1f} s CPU"
    )
    return {
        "cases": results,
        "target_cpu_s": TARGET_CPU_S,
        "ffd_vs_exact": packing,
        "fresh_hours": fresh,
    }


def fresh_hours(pools: int = 1000, seed: int = 3) -> dict:
    """Hours that :func:`capacity.plan_pool` placed afresh (the guard against costing more
    than separate fleets, or a quota), the replicas they run, and how many of those moved
    once the fresh placement is laid onto the previous hour's nodes."""
    rng = np.random.default_rng(seed)
    spot_prices = cap.Prices(32.0, 20.0, 12.0)
    totals = {"pools": pools, "hours": 0, "fresh_hours": 0, "replicas": 0, "moved": 0}
    started = time.process_time()
    for index in range(pools):
        sizes = [int(s) for s in rng.choice([1, 2, 4, 8], size=int(rng.integers(2, 8)))]
        members = [
            cap.PoolMember(f"m{i}", size, tokens_per_s_per_gpu=1.0, spot_ok=rng.random() < 0.3)
            for i, size in enumerate(sizes)
        ]
        demand = pd.DataFrame(
            {f"m{i}": rng.integers(0, 10, size=24) * size for i, size in enumerate(sizes)},
            index=HOURS,
        ).astype(float)
        pool = cap.PoolSpec("p", spot_prices, spot_interruption=0.0)
        if index % 2:
            peak = int(cap.plan_pool(pool, members, demand).hours["nodes"].max())
            pool = cap.PoolSpec(
                "p", spot_prices, spot_interruption=0.0, quota_nodes=max(1, int(peak * 0.8))
            )
        plan = cap.plan_pool(pool, members, demand)
        fresh = {
            note.split(": placed afresh")[0] for note in plan.notes if ": placed afresh" in note
        }
        hours = plan.hours
        afresh = np.array([hour.isoformat() in fresh for hour in hours["hour"]], dtype=bool)
        granted = np.array([sum(k for node in p.nodes for _, k in node) for p in plan.placements])
        totals["hours"] += len(hours)
        totals["fresh_hours"] += int(afresh.sum())
        totals["replicas"] += int(granted[afresh].sum())
        totals["moved"] += int(hours["moved_replicas"].to_numpy()[afresh].sum())
    totals["cpu_s"] = time.process_time() - started
    return totals


def child_speed() -> None:
    """One timed run of every speed case as JSON on stdout (the child of --baseline)."""
    cases = [speed_case(name, sizes, quota, 1) for name, sizes, quota in SPEED_CASES]
    print(json.dumps({"capacity": str(Path(cap.__file__).resolve().parents[1]), "cases": cases}))


def timed_tree(tree: Path) -> list[dict]:
    """The speed cases run once with ``tree``'s capacity package (a child process)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    answer = json.loads(done.stdout)
    if Path(answer["capacity"]) != tree:
        raise SystemExit(f"the child imported capacity from another tree than {tree.name}")
    return list(answer["cases"])


def run_against(baseline: Path, runs: int) -> dict:
    """Before (``baseline``) and after (this tree), alternating, ``runs`` rounds."""
    trees = {"before": baseline.resolve(), "after": REPO}
    seconds: dict[str, dict[str, list[float]]] = {label: {} for label in trees}
    grants: dict[str, dict[str, str]] = {label: {} for label in trees}
    for _ in range(runs):
        for label, tree in trees.items():
            for item in timed_tree(tree):
                seconds[label].setdefault(item["case"], []).append(item["plan_pool_cpu_s"])
                grants[label][item["case"]] = item["grants"]
    print(f"## Speed before/after: plan_pool CPU s, median of {runs} alternating runs\n")
    print("| case | before (runs) | after (runs) | after / before | same grants |")
    print("|---|---|---|---|---|")
    rows = []
    for name, *_ in SPEED_CASES:
        before, after = (statistics.median(seconds[label][name]) for label in trees)
        spread = {
            label: f"{min(seconds[label][name]):.2f}-{max(seconds[label][name]):.2f}"
            for label in trees
        }
        same = grants["before"][name] == grants["after"][name]
        rows.append({"case": name, "before_s": before, "after_s": after, "same_grants": same})
        print(
            f"| {name} | {before:.3f} ({spread['before']}) | {after:.3f} ({spread['after']}) "
            f"| {after / before:.2f} | {'yes' if same else 'no'} |"
        )
    print()
    return {"runs": runs, "rows": rows, "seconds": seconds}


# ------------------------------------------------------------------------ worked example


@dataclass(frozen=True)
class Service:
    """One real service: its hourly load (requests and tokens per hour) and GPU profile."""

    name: str
    source: str
    requests: np.ndarray  # per hour, scaled
    tokens: np.ndarray  # per hour, scaled
    model: str  # the catalog model whose size the profile assumes
    precision: str
    gpus_per_replica: int
    priority: str
    spot_ok: bool
    shape_note: str

    @property
    def per_gpu_tokens_per_s(self) -> float:
        """First-principles tokens/s of one H100 for the model (compute bound at MFU)."""
        spec = cap.get_model(self.model)
        return cap.theoretical_tokens_per_s(
            H100.peak_tflops(self.precision), spec.compute_parameters, utilization=MFU
        )

    @property
    def tokens_per_request(self) -> float:
        """The day's mean: total tokens ÷ total requests."""
        return float(self.tokens.sum() / self.requests.sum())

    @property
    def hourly_tokens_per_request(self) -> np.ndarray:
        """Each hour's tokens ÷ requests (the day's mean in an hour without requests)."""
        per_hour = np.full(len(self.requests), self.tokens_per_request)
        has = self.requests > 0
        per_hour[has] = self.tokens[has] / self.requests[has]
        return per_hour


def servegen_day(data_dir: Path, name: str) -> tuple[np.ndarray, np.ndarray, str]:
    """Requests and tokens per hour of the file's last full day. Tokens are the covered
    clients' estimates scaled up by the hour's coverage (their tokens per request taken as the
    service's); the coverage is 1.0 for reasoning and multimodal, 28-53 % for m-small."""
    frame = pd.read_csv(data_dir / "servegen" / f"servegen_{name}_hourly.csv")
    counts = frame.groupby("day_index")["hour_of_day"].count()
    day = int(counts[counts == 24].index.max())
    frame = frame[frame["day_index"] == day].sort_values("hour_of_day")
    tokens = frame["est_input_tokens_covered"] + frame["est_output_tokens_covered"]
    return (
        frame["requests"].to_numpy(dtype=float),
        (tokens / frame["token_coverage_frac"]).to_numpy(dtype=float),
        f"day {day} of {frame['day_index'].max() + 1}",
    )


def azure_hour(data_dir: Path, name: str) -> tuple[np.ndarray, np.ndarray, str]:
    """The one measured hour, held flat for the day: requests/s = requests ÷ the trace's span,
    tokens per request = mean prompt + completion tokens."""
    frame = pd.read_csv(data_dir / f"azure_llm_2023_{name}_1h.csv", parse_dates=["TIMESTAMP"])
    span_s = (frame["TIMESTAMP"].max() - frame["TIMESTAMP"].min()).total_seconds()
    rate = len(frame) / span_s
    per_request = float((frame["ContextTokens"] + frame["GeneratedTokens"]).mean())
    note = f"{len(frame):,} requests in {span_s:,.0f} s, held flat"
    return np.full(24, rate * 3600), np.full(24, rate * 3600 * per_request), note


def load_services(data_dir: Path) -> list[Service]:
    specs = [
        ("language", "servegen_language_m-small_hourly.csv", "llama-3.1-8b", "bf16", 1),
        ("reasoning", "servegen_reason_deepseek-r1_hourly.csv", "llama-3.1-70b", "fp8", 8),
        ("multimodal", "servegen_multimodal_mm-image_hourly.csv", "qwen2.5-72b", "fp8", 2),
        ("code", "azure_llm_2023_code_1h.csv", "llama-3.1-70b", "bf16", 4),
        ("conversation", "azure_llm_2023_conv_1h.csv", "llama-3.1-70b", "fp8", 2),
    ]
    classes = {
        "language": ("critical", False),
        "code": ("critical", False),
        "conversation": ("standard", False),
        "multimodal": ("standard", False),
        "reasoning": ("batch", True),
    }
    services = []
    for name, source, model, precision, tp in specs:
        if source.startswith("servegen"):
            key = source.removeprefix("servegen_").removesuffix("_hourly.csv")
            requests, tokens, note = servegen_day(data_dir, key)
        else:
            requests, tokens, note = azure_hour(data_dir, source.split("_")[3])
        priority, spot_ok = classes[name]
        services.append(
            Service(
                name,
                source,
                requests * SCALE,
                tokens * SCALE,
                model,
                precision,
                tp,
                priority,
                spot_ok,
                note,
            )
        )
    return services


def member_plans(
    services: list[Service],
) -> tuple[list[cap.PoolMember], pd.DataFrame, pd.DataFrame]:
    """Each service's plan_gpus on its actual day (tokens per hour as the forecast)."""
    members, gpus, tokens = [], {}, {}
    for service in services:
        forecast = pd.DataFrame({"ds": HOURS, "yhat": service.tokens})
        plan = cap.plan_gpus(
            forecast,
            per_gpu_tokens_per_s=service.per_gpu_tokens_per_s,
            gpus_per_replica=service.gpus_per_replica,
            utilization_target=UTILIZATION_TARGET,
            safety_factor=SAFETY_FACTOR,
        )
        gpus[service.name] = plan.frame["gpus"].to_numpy(dtype=float)
        tokens[service.name] = plan.frame["load_tokens_per_s"].to_numpy()
        members.append(
            cap.PoolMember(
                service.name,
                service.gpus_per_replica,
                tokens_per_s_per_gpu=service.per_gpu_tokens_per_s
                * UTILIZATION_TARGET
                / SAFETY_FACTOR,
                priority=service.priority,
                tokens_per_request=service.tokens_per_request,
                spot_ok=service.spot_ok,
            )
        )
    return members, pd.DataFrame(gpus, index=HOURS), pd.DataFrame(tokens, index=HOURS)


def print_services(
    services: list[Service], members: list[cap.PoolMember], gpus: pd.DataFrame
) -> None:
    print(
        "| member | source (day used) | model size, precision | TP | tokens/s per GPU "
        "(planned) | tokens/request | req/s mean (x10) | priority | spot_ok | plan GPUs "
        "min-max |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for service, member in zip(services, members, strict=True):
        column = gpus[service.name]
        print(
            f"| {service.name} | `{service.source}` ({service.shape_note}) | {service.model}, "
            f"{service.precision} | {service.gpus_per_replica} "
            f"| {service.per_gpu_tokens_per_s:,.0f} ({member.tokens_per_s_per_gpu:,.0f}) "
            f"| {service.tokens_per_request:,.0f} | {service.requests.mean() / 3600:,.1f} "
            f"| {service.priority} | {'yes' if service.spot_ok else 'no'} "
            f"| {column.min():.0f}-{column.max():.0f} |"
        )


def print_hours(plan: cap.PoolPlan, gpus: pd.DataFrame) -> None:
    names = list(gpus.columns)
    print(
        "| hour | "
        + " | ".join(f"{n} GPUs" for n in names)
        + " | nodes | lower bound | fragmentation GPUs | stable | reserved | on demand | spot "
        "| USD | moved replicas |"
    )
    print("|---" * (len(names) + 9) + "|")
    for index, row in enumerate(plan.hours.itertuples(index=False)):
        demand = " | ".join(f"{gpus.iloc[index][n]:.0f}" for n in names)
        print(
            f"| {row.hour:%H}:00 | {demand} | {row.nodes} | {row.lower_bound} "
            f"| {row.fragmentation_gpus} | {row.stable_nodes} | {row.reserved_nodes} "
            f"| {row.on_demand_nodes} "
            f"| {row.spot_nodes} | {row.cost_usd:,.2f} | {row.moved_replicas} |"
        )


def print_reservations(plan: cap.PoolPlan) -> None:
    res = plan.reservations
    print("| fleet | peak nodes | reserved nodes | cost for the day USD |")
    print("|---|---|---|---|")
    print(
        f"| pooled | {res.pooled_peak_nodes} | {res.pooled_reserved_nodes} "
        f"| {res.pooled_cost_usd:,.2f} |"
    )
    for item in res.per_service:
        print(
            f"| {item.member} alone | {item.peak_nodes} | {item.reserved_nodes} "
            f"| {item.cost_usd:,.2f} |"
        )
    print(
        f"| sum of per-service | {res.per_service_peak_nodes} "
        f"| {res.per_service_reserved_nodes} | {res.per_service_cost_usd:,.2f} |"
    )
    print(
        f"\npooling saves ${res.saving_usd:,.2f} for the day "
        f"({res.saving_usd / res.per_service_cost_usd:.1%} of the per-service cost)"
    )


def print_migrations(plan: cap.PoolPlan) -> None:
    listed = [
        (row.hour, migration.describe())
        for row, items in zip(plan.hours.itertuples(index=False), plan.migrations, strict=True)
        for migration in items
    ]
    print(f"migrations: {len(listed)}")
    for hour, text in listed:
        print(f"- {hour:%H}:00 {text}")
    for note in plan.notes:
        print(f"- note: {note}")


def print_throttling(
    plan: cap.PoolPlan, members: list[cap.PoolMember], services: list[Service]
) -> None:
    rows, hours = plan.members, plan.hours
    short = hours[hours["throttled"]]
    print(
        f"quota {plan.pool.quota_nodes} nodes: {len(short)} throttled hours "
        f"({', '.join(f'{h:%H}' for h in short['hour'])}), cost ${plan.total_cost_usd:,.2f}"
    )
    print(
        "\n| member | priority | throttled hours | GPU-hours short | hours the grant carries "
        "less than the load | tokens/s short (max) |"
    )
    print("|---|---|---|---|---|---|")
    for member in members:
        mine = rows[rows["member"] == member.name]
        print(
            f"| {member.name} | {member.priority} | {int(mine['throttled'].sum())} "
            f"| {int(mine['shortfall_gpus'].sum())} "
            f"| {int((mine['shortfall_tokens_per_s'] > 0).sum())} "
            f"| {mine['shortfall_tokens_per_s'].max():,.0f} |"
        )
    print(
        "\n| hour | member | demand GPUs | granted GPUs | load tokens/s | rate limit tokens/s "
        "| tokens/request that hour | rate limit req/s | measured req/s (x10) | a day-mean "
        "limit: req/s, tokens/s it admits | queued classes |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    measured = {s.name: s.requests / 3600 for s in services}
    day_mean = {member.name: member.tokens_per_request or math.nan for member in members}
    queued = dict(zip(hours["hour"], hours["queued_classes"], strict=True))
    for row in rows[rows["throttled"]].itertuples(index=False):
        arriving = measured[row.member][row.hour.hour]
        mean_limit = row.rate_limit_tokens_per_s / day_mean[row.member]
        admitted = min(mean_limit, arriving) * row.tokens_per_request
        print(
            f"| {row.hour:%H}:00 | {row.member} | {row.demand_gpus} | {row.granted_gpus} "
            f"| {row.demand_tokens_per_s:,.0f} | {row.rate_limit_tokens_per_s:,.0f} "
            f"| {row.tokens_per_request:,.0f} | {row.rate_limit_rps:,.1f} | {arriving:,.1f} "
            f"| {mean_limit:,.1f}, {admitted:,.0f} ({admitted / row.rate_limit_tokens_per_s:.0%}"
            f" of the grant) | {', '.join(queued[row.hour])} |"
        )


def run_example(data_dir: Path) -> dict:
    services = load_services(data_dir)
    members, gpus, tokens = member_plans(services)
    print("\n## Worked example: five real services on 8 x H100 nodes\n")
    print(
        f"node prices per node-hour: on demand ${NODE_PRICES.on_demand_usd_per_hour:.2f}, "
        f"reserved ${NODE_PRICES.reserved_usd_per_hour:.2f}, spot "
        f"${NODE_PRICES.spot_usd_per_hour:.2f} (spot interruption allowance 5 %); load x "
        f"{SCALE:g}; tokens/s per GPU = H100 peak x {MFU:.0%} / (2 x active parameters), "
        f"planned = x {UTILIZATION_TARGET} / {SAFETY_FACTOR}\n"
    )
    print_services(services, members, gpus)
    per_request = pd.DataFrame(
        {service.name: service.hourly_tokens_per_request for service in services}, index=HOURS
    )
    free = cap.plan_pool(
        cap.PoolSpec("shared-h100", NODE_PRICES),
        members,
        gpus,
        tokens,
        tokens_per_request=per_request,
    )
    print()
    print_hours(free, gpus)
    print()
    print_reservations(free)
    print()
    print_migrations(free)
    quota = math.floor((1 - QUOTA_CUT) * free.reservations.pooled_peak_nodes)
    tight = cap.plan_pool(
        cap.PoolSpec("shared-h100", NODE_PRICES, quota_nodes=quota),
        members,
        gpus,
        tokens,
        tokens_per_request=per_request,
    )
    print()
    print_throttling(tight, members, services)
    print()
    print_migrations(tight)
    return {"unconstrained": free.as_dict(), "quota": tight.as_dict()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--runs", type=int, default=5, help="timed runs per case (median)")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    parser.add_argument("--skip-speed", action="store_true", help="no speed cases")
    parser.add_argument("--skip-example", action="store_true", help="no worked example")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a gpucast source tree (e.g. a git worktree of an older commit) whose capacity "
        "package is timed against this one's, alternating runs in child processes",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be >= 1")
    if args.child:
        child_speed()
        return
    if args.baseline is not None and not (args.baseline / "capacity" / "__init__.py").is_file():
        parser.error("--baseline must be a gpucast source tree with a capacity package")
    figures: dict = {}
    if args.baseline is not None:
        figures["before_after"] = run_against(args.baseline, args.runs)
    if not args.skip_speed:
        figures["speed"] = run_speed(args.runs)
    if not args.skip_example:
        figures["example"] = run_example(args.data_dir)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, default=str))
        print(f"\nfigures written to {args.json}")


if __name__ == "__main__":
    main()
