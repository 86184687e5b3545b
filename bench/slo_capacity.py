"""Leave-one-mix-out accuracy of the SLO capacity model on every real load-test table.

For every table (one setup of one CSV) in ``../shared/data/loadtests`` with three or more
prompt/completion mixes: for each mix, fit the model on the other mixes only, predict the SLO
capacity (requests/s per replica) of the held-out mix, and compare with the knee measured at
that mix. SLO levels per table are fixed by a rule, not by looking at results: pairs of the
1/3, 1/2 and 2/3 quantiles of the table's p95 TTFT and p95 TPOT over all its rows.

Cases where either side says the SLO cannot be met at the lowest load are counted apart
(agreement of the two); the others give absolute % errors. Targets: median <= 15 %, worst
<= 35 % per table. Each prediction also says whether its binding limit sits on a flat stretch
of the latency curve (``capacity.limit_sensitivity``: 5 % on the limit moves the capacity by
more than 30 %), the warning the service attaches to such answers; the worst error among the
predictions not so flagged is reported beside the worst overall.

Each prediction's range (``requests_per_s_per_replica_low/high``) is checked for holding the
measured knee, and mixes the far-beyond rule refuses are counted. ``--grid`` also checks the
surface of the model fitted to each whole table over a grid of mixes within the context at the
same SLO levels: answers above the physical ceiling, monotonicity violations (more prompt or
completion tokens, or a looser SLO level, moving the answer the wrong way) and jumps between a
measured knee and the answers at mixes within 1 % of it, and the largest change between the
answers at a grid mix and at 1 % more prompt or completion tokens (both reachable: where the
model stops meeting the SLO at all the answer ends, as it does when measured).

    python bench/slo_capacity.py [--data ../shared/data/loadtests] [--workers 2] [--grid]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import capacity as cap  # noqa: E402
from capacity.measured.loadtest import slo_latency_s  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SLO_QUANTILES = (1 / 3, 1 / 2, 2 / 3)


@dataclass(frozen=True)
class Case:
    table: str
    mix: tuple[float, float]
    slo: tuple[float, float]
    measured_rps: float | None  # None: unreachable at the lowest load
    predicted_rps: float | None
    measured_binding: str
    predicted_binding: str
    method: str
    flat: bool  # the prediction's binding limit sits on a flat stretch (capacity.limit_sensitivity)
    low_rps: float | None = None  # the answer's range
    high_rps: float | None = None
    refused: bool = False  # far beyond the measured range: refused without allow_extrapolation


def slo_levels(table: cap.LoadTestTable) -> list[cap.SloTarget]:
    ttft, tpot = slo_latency_s(table.frame, "ttft"), slo_latency_s(table.frame, "tpot")
    return [
        cap.SloTarget(float(np.quantile(ttft, q)), float(np.quantile(tpot, q)))
        for q in SLO_QUANTILES
    ]


def without_mix(table: cap.LoadTestTable, mix: tuple[float, float]) -> cap.LoadTestTable:
    frame = table.frame
    keep = ~((frame.prompt_tokens == mix[0]) & (frame.completion_tokens == mix[1]))
    records = [r for r, k in zip(table.to_records(), keep, strict=True) if k]
    return cap.LoadTestTable.from_records(records, **table.meta())


def table_label(file_name: str, table: cap.LoadTestTable) -> str:
    model, gpu = file_name.split("__")[:2]
    return f"{model} · {gpu} · TP{table.tensor_parallel} {table.precision}"


def hold_out(job: tuple[str, cap.LoadTestTable, tuple[float, float]]) -> list[Case]:
    label, table, mix = job
    model = cap.fit_slo_model(without_mix(table, mix))
    cases = []
    for slo in slo_levels(table):
        measured = _measured(table, mix, slo)
        low = high = None
        try:
            model.capacity(prompt_tokens=mix[0], completion_tokens=mix[1], slo=slo)
            refused = False
        except cap.ExtrapolationError:
            refused = True
        except cap.SloUnreachableError:
            refused = False
        try:
            got = model.capacity(
                prompt_tokens=mix[0], completion_tokens=mix[1], slo=slo, allow_extrapolation=True
            )
            predicted, binding, method = got.requests_per_s_per_replica, got.binding, got.method
            low, high = got.requests_per_s_per_replica_low, got.requests_per_s_per_replica_high
            sensitivity = cap.limit_sensitivity(model, got, slo)
            flat = sensitivity is not None and sensitivity.flat
        except cap.SloUnreachableError as exc:
            predicted, binding, method, flat = None, f"unreachable ({exc.limit})", "-", False
        cases.append(
            Case(
                label,
                mix,
                (slo.ttft_p95_s, slo.tpot_p95_s),
                None if measured is None else measured.requests_per_s,
                predicted,
                "unreachable" if measured is None else measured.binding,
                binding,
                method,
                flat,
                low,
                high,
                refused,
            )
        )
    return cases


def _measured(
    table: cap.LoadTestTable, mix: tuple[float, float], slo: cap.SloTarget
) -> cap.MeasuredKnee | None:
    try:
        return cap.measured_knee(
            table,
            prompt_tokens=mix[0],
            completion_tokens=mix[1],
            ttft_p95_s=slo.ttft_p95_s,
            tpot_p95_s=slo.tpot_p95_s,
        )
    except cap.SloUnreachableError:
        return None


def jobs(data: Path) -> list[tuple[str, cap.LoadTestTable, tuple[float, float]]]:
    out = []
    for path in sorted(data.glob("*.csv")):
        for table in cap.read_loadtest_csv_setups(path.read_text(), file_name=path.name):
            if len(table.mixes()) >= 3:
                out.extend((table_label(path.name, table), table, mix) for mix in table.mixes())
    return out


def summarise(cases: list[Case]) -> list[str]:
    lines = [
        "| table | cases | median abs error | worst abs error | median signed | "
        "unreachable agree | flagged flat | worst abs error, not flagged | refused | "
        "worst abs error, not refused | knee inside range | median range width |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label in dict.fromkeys(c.table for c in cases):
        mine = [c for c in cases if c.table == label]
        errors = np.array(
            [
                c.predicted_rps / c.measured_rps - 1
                for c in mine
                if c.measured_rps is not None and c.predicted_rps is not None
            ]
        )
        split = [c for c in mine if c.measured_rps is None or c.predicted_rps is None]
        agree = sum(c.measured_rps is None and c.predicted_rps is None for c in split)
        steep = [
            abs(c.predicted_rps / c.measured_rps - 1)
            for c in mine
            if c.measured_rps is not None and c.predicted_rps is not None and not c.flat
        ]
        flagged = sum(c.flat for c in mine if c.measured_rps is not None)
        both = [c for c in mine if c.measured_rps is not None and c.predicted_rps is not None]
        answered = [abs(c.predicted_rps / c.measured_rps - 1) for c in both if not c.refused]
        inside = sum(c.low_rps <= c.measured_rps <= c.high_rps for c in both)
        width = _median_width(both)
        lines.append(
            f"| {label} | {len(errors)} | {np.median(np.abs(errors)):.1%} | "
            f"{np.max(np.abs(errors)):.1%} | {np.median(errors):+.1%} | "
            f"{agree}/{len(split)} | {flagged} | {max(steep, default=0.0):.1%} | "
            f"{sum(c.refused for c in mine)} | {max(answered, default=0.0):.1%} | "
            f"{inside}/{len(both)} ({inside / max(len(both), 1):.0%}) | {width:.2f}x |"
        )
    return lines


def _median_width(cases: list[Case]) -> float:
    """The median of high ÷ low over the answers' ranges (an unmeasured mix's answer)."""
    widths = [c.high_rps / c.low_rps for c in cases if c.low_rps and c.high_rps]
    return float(np.median(widths)) if widths else float("nan")


def _rps(value: float | None) -> str:
    return "unreachable" if value is None else f"{value:.3g}"


def details(cases: list[Case]) -> list[str]:
    lines = [
        "| table | mix | SLO TTFT/TPOT (s) | measured req/s | predicted req/s | error | "
        "binding measured/predicted | method | flat |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cases:
        error = (
            "-"
            if c.measured_rps is None or c.predicted_rps is None
            else f"{c.predicted_rps / c.measured_rps - 1:+.0%}"
        )
        lines.append(
            f"| {c.table} | {c.mix[0]:g}/{c.mix[1]:g} | {c.slo[0]:.3g} / "
            f"{c.slo[1]:.3g} | {_rps(c.measured_rps)} | {_rps(c.predicted_rps)} | "
            f"{error} | {c.measured_binding}/{c.predicted_binding} | {c.method} | "
            f"{'flat' if c.flat else ''} |"
        )
    return lines


GRID_PROMPTS = np.geomspace(1, 32_000, 28)
GRID_COMPLETIONS = np.geomspace(1, 4_096, 24)
NEAR_STEPS = (0.99, 0.995, 1.005, 1.01)
STEP = 1.01  # the step between neighbouring inputs anywhere on the grid


def grid_checks(job: tuple[str, cap.LoadTestTable]) -> dict[str, object]:
    """On the model fitted to the whole table: answers above the physical ceiling, monotonicity
    violations (more prompt or completion tokens giving more requests/s; a looser SLO giving
    less) over a grid of mixes within the context, and the largest jump between a measured
    knee and the answers at mixes within 1 % of it."""
    label, table = job
    model = cap.fit_slo_model(table)
    gpus = model.gpus_per_replica
    context = model.ceilings.context_tokens or np.inf
    prompts, completions = np.meshgrid(GRID_PROMPTS, GRID_COMPLETIONS, indexing="ij")
    servable = prompts + completions <= context
    surfaces = []
    for slo in slo_levels(table):
        per_gpu = model.tokens_per_s_per_gpu(prompts, completions, slo)
        surfaces.append(np.where(servable, per_gpu * gpus / (prompts + completions), np.nan))
    ceiling = np.vectorize(model.ceilings.requests_per_s)(prompts, completions)
    above = sum(int(np.nansum(s > ceiling * (1 + 1e-9))) for s in surfaces)
    tol = 1 + 1e-9
    violations = 0
    for s in surfaces:
        violations += int(np.nansum(s[1:, :] > s[:-1, :] * tol))  # more prompt
        violations += int(np.nansum(s[:, 1:] > s[:, :-1] * tol))  # more completion
    for looser, tighter in zip(surfaces[1:], surfaces[:-1], strict=True):
        violations += int(np.nansum(looser * tol < tighter))  # a looser SLO
    steps: list[float] = []  # answers 1 % apart anywhere on the grid (both reachable)
    for slo, s in zip(slo_levels(table), surfaces, strict=True):
        for fp, fc in ((STEP, 1.0), (1.0, STEP)):
            moved_p, moved_c = prompts * fp, completions * fc
            inside = servable & (moved_p + moved_c <= context)
            per_gpu = model.tokens_per_s_per_gpu(moved_p, moved_c, slo)
            moved = per_gpu * gpus / (moved_p + moved_c)
            both = inside & (s > 0) & (moved > 0)
            steps.extend(np.abs(moved[both] / s[both] - 1).tolist())
    jumps = []
    for slo in slo_levels(table):
        for prompt, completion in table.mixes():
            try:
                knee = model.capacity(prompt_tokens=prompt, completion_tokens=completion, slo=slo)
            except cap.SloUnreachableError:
                continue
            for fp in NEAR_STEPS + (1.0,):
                for fc in NEAR_STEPS + (1.0,):
                    if fp == fc == 1.0:
                        continue
                    try:
                        near = model.capacity(
                            prompt_tokens=prompt * fp,
                            completion_tokens=completion * fc,
                            slo=slo,
                            allow_extrapolation=True,
                            with_range=False,
                        )
                    except cap.SloUnreachableError:
                        jumps.append(1.0)
                        continue
                    ratio = near.requests_per_s_per_replica / knee.requests_per_s_per_replica
                    jumps.append(abs(ratio - 1))
    return {
        "table": label,
        "answers": int(sum(np.isfinite(s).sum() for s in surfaces)),
        "unreachable": int(sum((s == 0).sum() for s in surfaces)),
        "above": above,
        "violations": violations,
        "jumps_over_5": sum(j > 0.05 for j in jumps),
        "near": len(jumps),
        "worst_jump": max(jumps, default=0.0),
        "steps": len(steps),
        "steps_over_5": sum(j > 0.05 for j in steps),
        "worst_step": max(steps, default=0.0),
    }


def grid_lines(rows: list[dict[str, object]]) -> list[str]:
    lines = [
        "| table | grid answers | SLO not met | above the ceiling | monotonicity violations | "
        "mixes within 1 % of a knee | jumps > 5 % | largest jump | 1 % steps anywhere | "
        "steps > 5 % | largest step |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['table']} | {r['answers']} | {r['unreachable']} | {r['above']} | "
            f"{r['violations']} | "
            f"{r['near']} | {r['jumps_over_5']} | {float(r['worst_jump']):.1%} | "  # type: ignore[arg-type]
            f"{r['steps']} | {r['steps_over_5']} | {float(r['worst_step']):.1%} |"  # type: ignore[arg-type]
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "loadtests")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--details", action="store_true", help="print every case")
    parser.add_argument(
        "--grid", action="store_true", help="also check the surface over a grid of mixes"
    )
    args = parser.parse_args()
    started = time.perf_counter()
    todo = jobs(args.data)
    with ProcessPoolExecutor(args.workers) as pool:
        cases = [case for batch in pool.map(hold_out, todo) for case in batch]
    print("\n".join(summarise(cases)))
    both = [c for c in cases if c.measured_rps is not None and c.predicted_rps is not None]
    inside = sum(c.low_rps <= c.measured_rps <= c.high_rps for c in both)
    print(
        f"\nknee inside the answer's range: {inside}/{len(both)} ({inside / len(both):.1%}); "
        f"median range width (high / low) {_median_width(both):.2f}x"
    )
    if args.grid:
        tables = list(dict.fromkeys((label, table) for label, table, _ in todo))
        with ProcessPoolExecutor(args.workers) as pool:
            rows = list(pool.map(grid_checks, tables))
        print("\n" + "\n".join(grid_lines(rows)))
    errors = np.abs(
        [
            c.predicted_rps / c.measured_rps - 1
            for c in cases
            if c.measured_rps is not None and c.predicted_rps is not None
        ]
    )
    flagged = sum(c.flat for c in cases if c.measured_rps is not None)
    print(
        f"\nall tables: {len(errors)} cases ({flagged} flagged flat), "
        f"median {np.median(errors):.1%}, "
        f"90th percentile {np.quantile(errors, 0.9):.1%}, worst {np.max(errors):.1%}; "
        f"{len(todo)} fits in {time.perf_counter() - started:.0f} s"
    )
    if args.details:
        print("\n" + "\n".join(details(cases)))


if __name__ == "__main__":
    main()
