"""How big a load test may be, and what its size costs: a row cap refused before parsing, a
mix cap, mixes of measured means grouped in O(rows), and a fit whose cost stops growing with
rows (each mix reduced to at most 32 load levels first)."""

from __future__ import annotations

import numpy as np
import pytest

import capacity as cap
from capacity.measured.loadtest_checks import (
    MAX_LOADTEST_MIXES,
    MAX_LOADTEST_ROWS,
    MIX_GROUP_TOLERANCE,
    group_mixes,
)
from capacity.measured.serving_model import MAX_FIT_LEVELS_PER_MIX, observations_of, reduced
from tests.capacity.loadtest_fixtures import synthetic_csv, synthetic_rows


def _group_by_definition(prompt: np.ndarray, completion: np.ndarray) -> tuple[list, list]:
    """The rule as documented, the slow way: each row joins the earliest group whose first
    row it is within 5 % of (prompt and completion), else starts one; groups get their mean."""
    anchors: list[tuple[float, float]] = []
    labels = []
    for p, c in zip(prompt, completion, strict=True):
        for k, (ap, ac) in enumerate(anchors):
            if abs(p - ap) <= MIX_GROUP_TOLERANCE * ap and abs(c - ac) <= MIX_GROUP_TOLERANCE * ac:
                labels.append(k)
                break
        else:
            anchors.append((p, c))
            labels.append(len(anchors) - 1)
    out_p, out_c = [], []
    for k in labels:
        members = [i for i, label in enumerate(labels) if label == k]
        out_p.append(round(float(np.mean(prompt[members])), 1))
        out_c.append(round(float(np.mean(completion[members])), 1))
    return out_p, out_c


@pytest.mark.parametrize("seed", range(20))
def test_grouping_mixes_follows_its_definition(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 200))
    centres = rng.choice([12.0, 130.0, 200.0, 1100.0, 5000.0], size=(6, 2))
    which = rng.integers(0, 6, n)
    # spread of 4 %: some rows fall outside their centre's group, some groups sit side by side
    prompt = centres[which, 0] * np.exp(rng.normal(0, 0.04, n))
    completion = centres[which, 1] * np.exp(rng.normal(0, 0.04, n))
    grouped_p, grouped_c = group_mixes(prompt, completion)
    expected_p, expected_c = _group_by_definition(prompt, completion)
    assert grouped_p.tolist() == expected_p and grouped_c.tolist() == expected_c


def test_grouping_many_distinct_mixes_is_linear() -> None:
    """100,000 rows that are each a mix of their own: quadratic grouping made 5e9 comparisons;
    the cells make it nine lookups a row."""
    rng = np.random.default_rng(7)
    prompt, completion = np.exp(rng.uniform(0, 12, (2, MAX_LOADTEST_ROWS)))
    grouped_p, _ = group_mixes(prompt, completion)
    assert len(grouped_p) == MAX_LOADTEST_ROWS
    # each row lies within 5 % of its group's first row, so within 10 % of the group's mean
    assert np.all(np.abs(grouped_p - prompt) <= 0.1 * prompt + 0.05)


def test_more_rows_than_the_cap_are_refused_before_parsing() -> None:
    # one header and 100,001 lines that are not even CSV: counted, never parsed
    text = "isl,osl,concurrency\n" + "not a row\n" * (MAX_LOADTEST_ROWS + 1)
    with pytest.raises(cap.LoadTestFormatError, match=r"^big.csv: 100,001 rows; at most 100,000"):
        cap.read_loadtest_files([("big.csv", text)])
    files = [(f"r{i}.json", "{}") for i in range(MAX_LOADTEST_ROWS + 1)]
    with pytest.raises(cap.LoadTestFormatError, match=r"^r0.json, r1.json, r2.json, …: 100,001"):
        cap.read_loadtest_files(files)


def test_the_cap_counts_rows_over_all_files() -> None:
    half = "isl,osl,concurrency\n" + "1,1,1\n" * (MAX_LOADTEST_ROWS // 2)
    with pytest.raises(cap.LoadTestFormatError, match="100,001 rows"):
        cap.read_loadtest_files([("a.csv", half), ("b.csv", half + "1,1,1\n")])


def test_more_mixes_than_the_cap_are_refused() -> None:
    mixes = tuple((100 + i, 100) for i in range(MAX_LOADTEST_MIXES + 1))
    text = synthetic_csv(synthetic_rows(mixes, (1, 2)))
    with pytest.raises(cap.LoadTestFormatError, match="101 prompt/completion mixes; at most 100"):
        cap.read_loadtest_csv(text, file_name="wide.csv")
    fits = synthetic_csv(synthetic_rows(mixes[:MAX_LOADTEST_MIXES], (1, 2)))
    assert len(cap.read_loadtest_csv(fits, file_name="ok.csv").mixes()) == MAX_LOADTEST_MIXES


def _long_sweep(levels: int, mixes: tuple[tuple[int, int], ...]) -> cap.LoadTestTable:
    return cap.read_loadtest_csv(
        synthetic_csv(synthetic_rows(mixes, tuple(range(1, levels + 1)))), file_name="long.csv"
    )


def test_a_long_sweep_is_averaged_down_to_32_levels_per_mix() -> None:
    table = _long_sweep(320, ((500, 100), (500, 500)))
    full = observations_of(table)
    fit = reduced(full)
    assert MAX_FIT_LEVELS_PER_MIX == 32 and len(fit.prompt) == 2 * 32
    # 320 levels in 32 runs of 10: the first run is concurrency 1..10 of mix 500/100
    assert fit.in_flight[0] == pytest.approx(5.5)
    assert fit.requests_per_s[0] == pytest.approx(np.mean(full.requests_per_s[:10]))
    assert fit.ttft_p95_s[31] == pytest.approx(np.mean(full.ttft_p95_s[310:320]))
    assert fit.prompt[32] == 500 and fit.completion[32] == 500
    assert np.isnan(fit.ttft_mean_s).sum() == np.isnan(full.ttft_mean_s).sum() == 0


def test_a_short_sweep_is_fitted_as_measured() -> None:
    table = _long_sweep(MAX_FIT_LEVELS_PER_MIX, ((500, 100), (900, 300)))
    full = observations_of(table)
    assert reduced(full) is full


def test_the_fit_of_a_long_sweep_is_the_fit_of_its_reduced_rows() -> None:
    """The fit sees no more than 32 levels a mix: 3 mixes × 3,000 levels fit exactly as the
    96 averaged rows do (so its cost is that of 96 rows)."""
    mixes = ((500, 100), (500, 500), (2000, 200))
    long = _long_sweep(3000, mixes)
    fit = reduced(observations_of(long))
    columns = {
        "prompt_tokens": fit.prompt,
        "completion_tokens": fit.completion,
        "concurrency": fit.in_flight,
        "request_throughput_rps": fit.requests_per_s,
        "ttft_p95_s": fit.ttft_p95_s,
        "tpot_p95_s": fit.tpot_p95_s,
        "ttft_mean_s": fit.ttft_mean_s,
        "tpot_mean_s": fit.tpot_mean_s,
    }
    records = [{k: float(v[i]) for k, v in columns.items()} for i in range(len(fit.prompt))]
    short = cap.LoadTestTable.from_records(records, **long.meta())
    assert len(short.frame) == 96
    assert (
        cap.fit_slo_model(long, gpus_per_replica=1).serving.values
        == cap.fit_slo_model(short, gpus_per_replica=1).serving.values
    )
