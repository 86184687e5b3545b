"""Load-test tables: every import format on real files, the malformed files, the measured knee."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import capacity as cap
from capacity.measured.loadtest import unreachable_error
from tests.capacity.loadtest_fixtures import (
    HEADER,
    NIM_70B_H100,
    VLLM_CSV,
    genai_perf_export,
    synthetic_csv,
    synthetic_rows,
    vllm_result,
)


def test_nim_table_splits_into_its_four_setups_with_repeats_averaged(loadtests: Path) -> None:
    text = (loadtests / NIM_70B_H100).read_text()
    with pytest.raises(
        cap.LoadTestFormatError,
        match=r"mixes setups \(tensor-parallel degrees "
        r"4, 8; precisions fp16, fp8\)",
    ):
        cap.read_loadtest_csv(text, file_name=NIM_70B_H100)
    tables = cap.read_loadtest_csv_setups(text, file_name=NIM_70B_H100)
    assert [(t.tensor_parallel, t.precision) for t in tables] == [
        (4, "fp16"),
        (4, "fp8"),
        (8, "fp16"),
        (8, "fp8"),
    ]
    tp4 = tables[0]
    assert tp4.model == "meta-llama3-70b-instruct" and tp4.gpu_type == "H100-SXM-80GB-HBM3"
    assert tp4.mixes() == [
        (200.0, 200.0),
        (200.0, 1000.0),
        (200.0, 2000.0),
        (2000.0, 200.0),
        (2000.0, 2000.0),
        (7000.0, 1000.0),
    ]
    # 11 load levels per mix in the file, the two runs at concurrency 5 averaged into one.
    assert len(tp4.frame) == 60 and "200/200 at 5" in tp4.notes[0]
    mix = tp4.frame[(tp4.frame.prompt_tokens == 2000) & (tp4.frame.completion_tokens == 200)]
    assert list(mix.concurrency) == [1, 2, 5, 10, 25, 50, 100, 150, 200, 250]
    at5 = mix[mix.concurrency == 5].iloc[0]
    assert at5.request_throughput_rps == pytest.approx((1.020518 + 1.020310) / 2, rel=1e-5)
    # TPOT falls back to the ITL columns; no p50/p99 in this source.
    assert mix.tpot_p95_s.iloc[0] == pytest.approx(0.0203175, rel=1e-4)
    assert mix.ttft_p50_s.isna().all() and mix.tpot_p99_s.isna().all()


def test_vllm_json_files_give_the_same_rows_as_the_published_csv(loadtests: Path) -> None:
    files = [
        (p.name, p.read_text()) for p in sorted((loadtests / "vllm-bench-json").glob("*.json"))
    ]
    from_json = cap.read_loadtest_files(files)
    from_csv = cap.read_loadtest_csv((loadtests / VLLM_CSV).read_text(), file_name=VLLM_CSV)
    assert from_json.source_format == "vllm-bench-json" and from_csv.source_format == "csv"
    assert from_json.model == "meta-llama/Meta-Llama-3-8B-Instruct" and from_json.engine == "vllm"
    assert from_json.load_column == "request_rate"
    assert list(from_json.frame.request_rate) == [1, 4, 8, 16, 32]  # sorted, not file order
    assert from_json.mixes() == from_csv.mixes() == [(205.8, 201.8)]
    for column in ("request_throughput_rps", "ttft_p95_s", "tpot_p95_s", "tpot_p99_s"):
        np.testing.assert_allclose(from_json.frame[column], from_csv.frame[column], rtol=1e-9)


def test_latency_only_table_derives_throughput_by_littles_law(loadtests: Path) -> None:
    name = "Llama-3.1-70B-FP8__H100-SXM__vllm_aiconfigurator-silicon_latency-only.csv"
    tables = cap.read_loadtest_csv_setups((loadtests / name).read_text(), file_name=name)
    assert [t.tensor_parallel for t in tables] == [2, 4, 8]
    table = tables[0]
    assert table.throughput_derived and table.latency_statistic == "single value"
    row = table.frame.iloc[0]
    assert row.concurrency == 4 and row.ttft_p95_s == pytest.approx(0.12130772704258562)
    expected = 4 / (row.ttft_p95_s + row.tpot_p95_s * (1024 - 1))
    assert row.request_throughput_rps == pytest.approx(expected)


def test_genai_perf_exports_are_read_with_their_units() -> None:
    files = [(f"c{n}.json", genai_perf_export(n, unit="ns")) for n in (8, 1, 4)]
    table = cap.read_loadtest_files(files)
    assert table.source_format == "genai-perf-json" and table.model == "toy/toy-7b"
    assert list(table.frame.concurrency) == [1, 4, 8] and table.mixes() == [(1000.0, 250.0)]
    assert table.frame.ttft_p95_s.iloc[0] == pytest.approx(0.09 * 1.3)  # 90 ms × 1.3, from ns
    assert table.frame.tpot_p95_s.iloc[0] == pytest.approx(0.0103 * 1.3)


def test_records_round_trip_through_json() -> None:
    table = cap.read_loadtest_csv(synthetic_csv(), file_name="toy.csv")
    records = json.loads(json.dumps(table.to_records()))
    assert all(value is None or isinstance(value, float) for r in records for value in r.values())
    again = cap.LoadTestTable.from_records(records, **table.meta())
    assert again.frame.equals(table.frame) and again.meta() == table.meta()
    assert again.tensor_parallel == 2 and again.precision == "fp8"


def test_vllm_without_p95_uses_p99_and_says_so() -> None:
    files = [(f"r{r}.json", vllm_result(r, p95=False)) for r in (1, 2, 4)]
    table = cap.read_vllm_bench_json(files)
    assert table.frame.ttft_p95_s.isna().all()
    assert (
        "p99 stands in for p95" in table.notes[0]
        and "--metric-percentiles 50,95,99" in table.notes[0]
    )
    # p99 TPOT is 19.52 ms at rate 1 and 19.84 ms at rate 2: the knee lies halfway between.
    knee = cap.measured_knee(
        table, prompt_tokens=300, completion_tokens=150, ttft_p95_s=1.0, tpot_p95_s=0.01968
    )
    assert knee is not None and knee.binding == "tpot"
    assert knee.request_rate == pytest.approx(1.5) and knee.requests_per_s == pytest.approx(1.455)


def _replace(rows: list[str], row: int, column: str, value: str) -> list[str]:
    index = HEADER.split(",").index(column)
    cells = rows[row].split(",")
    cells[index] = value
    return [*rows[:row], ",".join(cells), *rows[row + 1 :]]


ROWS = synthetic_rows()
MALFORMED_CSV = [
    (
        "a repeated column",
        synthetic_csv(header=HEADER + ",ttft_p95_s", rows=[r + ",9" for r in ROWS]),
        r"lt\.csv: column 'ttft_p95_s' appears more than once",
    ),
    (
        "non-numeric",
        synthetic_csv(_replace(ROWS, 6, "ttft_p95_s", "abc")),
        r"lt\.csv, row 7, column ttft_p95_s: 'abc' is not a number",
    ),
    (
        "NaN",
        synthetic_csv(_replace(ROWS, 2, "request_throughput_rps", "NaN")),
        r"row 3, column request_throughput_rps: 'NaN' is not a finite number",
    ),
    (
        "inf",
        synthetic_csv(_replace(ROWS, 3, "concurrency", "inf")),
        r"row 4, column concurrency: 'inf' is not a finite number",
    ),
    (
        "negative",
        synthetic_csv(_replace(ROWS, 1, "request_throughput_rps", "-2")),
        r"row 2, column request_throughput_rps: -2 must be > 0",
    ),
    (
        "zero concurrency",
        synthetic_csv(_replace(ROWS, 0, "concurrency", "0")),
        r"row 1, column concurrency: 0 must be > 0",
    ),
    (
        "TTFT in ms",
        synthetic_csv(_replace(ROWS, 4, "ttft_p95_s", "2500")),
        r"row 5, column ttft_p95_s: 2500 s is implausible .*looks like milliseconds",
    ),
    (
        "TPOT in ms",
        synthetic_csv(_replace(ROWS, 4, "itl_p95_s", "14")),
        r"row 5, column tpot_p95_s: 14 s is implausible .*looks like milliseconds",
    ),
    (
        "small TTFT in ms",
        synthetic_csv(
            [
                ",".join(
                    r.split(",")[:9]
                    + [str(float(r.split(",")[9]) * 1000)]
                    + r.split(",")[10:11]
                    + [str(float(r.split(",")[11]) * 1000)]
                    + r.split(",")[12:]
                )
                for r in synthetic_rows(concurrencies=(1, 2, 4))
            ]
        ),
        r"row 1, column ttft_mean_s: 70 s at the lowest load is implausible for 500 prompt "
        r"tokens .*milliseconds",
    ),
    (
        "non-monotone",
        synthetic_csv([ROWS[0], ROWS[2], ROWS[1], *ROWS[3:]]),
        r"row 3, column concurrency: 2 after 4: within mix 500/100 the concurrency must rise",
    ),
    ("single row", synthetic_csv(ROWS[:1]), r"a single load level; no knee"),
    (
        "single level in one mix",
        synthetic_csv([*ROWS[:5], ROWS[5]]),
        r"mix 500/500 has a single concurrency level",
    ),
    (
        "mixed TP",
        synthetic_csv(ROWS[:5] + synthetic_rows(((500, 500),), tp=4)),
        r"mixes setups \(tensor-parallel degrees 2, 4\)",
    ),
    (
        "mixed precision",
        synthetic_csv(ROWS[:5] + synthetic_rows(((500, 500),), precision="fp16")),
        r"mixes setups \(precisions fp16, fp8\)",
    ),
    (
        "missing column",
        synthetic_csv(
            [",".join(r.split(",")[:8] + r.split(",")[9:]) for r in ROWS],
            HEADER.replace("request_throughput_rps,", ""),
        ),
        r"lt\.csv: missing required column\(s\): request_throughput_rps",
    ),
    (
        "no latency percentile",
        synthetic_csv([",".join(r.split(",")[:9] + ["", ""] + r.split(",")[11:]) for r in ROWS]),
        r"mix 500/100 has no TTFT percentile at all",
    ),
    (
        "missing value",
        synthetic_csv(_replace(ROWS, 8, "itl_p95_s", "")),
        r"row 9, column tpot_p95_s: no p95 \(nor p99\) TPOT",
    ),
    ("empty file", "", r"lt\.csv: empty file"),
    ("header only", HEADER + "\n", r"lt\.csv: no data rows"),
]


@pytest.mark.parametrize(
    ("text", "message"), [c[1:] for c in MALFORMED_CSV], ids=[c[0] for c in MALFORMED_CSV]
)
def test_malformed_csv_names_file_row_and_column(text: str, message: str) -> None:
    with pytest.raises(cap.LoadTestFormatError, match=message) as info:
        cap.read_loadtest_files([("lt.csv", text)])
    assert isinstance(info.value, ValueError) and "\n" not in str(info.value)


MALFORMED_FILES = [
    ("unknown text", [("x.txt", "hello world\n")], r"x\.txt: unknown format"),
    ("unknown JSON", [("x.json", '{"a": 1}')], r"x\.json: unknown JSON format"),
    ("broken JSON", [("x.json", '{"request_throughput": ')], r"x\.json: not valid JSON"),
    (
        "an integer of 5,000 digits",
        [("x.json", '{"completed": ' + "9" * 5000 + "}")],
        r"x\.json: not readable JSON \(Exceeds the limit \(4300 digits\)",
    ),
    (
        "mixed formats",
        [("a.csv", synthetic_csv()), ("b.json", vllm_result(1))],
        r"one format per import",
    ),
    (
        "infinite rate",
        [("a.json", vllm_result(1)), ("b.json", vllm_result("inf"))],
        r"b\.json, column request_rate: an infinite rate without --max-concurrency",
    ),
    (
        "ms in a JSON number",
        [("a.json", vllm_result(1)), ("b.json", vllm_result(2, p95_ttft_ms="x"))],
        r"b\.json, column p95_ttft_ms: 'x' is not a number",
    ),
    (
        "two models",
        [("a.json", vllm_result(1)), ("b.json", vllm_result(2, model_id="other"))],
        r"mix models \(other, toy/toy-7b\)",
    ),
    ("one JSON file", [("a.json", vllm_result(1))], r"a single load level"),
    (
        "completed beyond the tokens",
        [("a.json", vllm_result(1)), ("b.json", vllm_result(2, completed=1e9))],
        r"b\.json, column total_input_tokens: 60000 tokens over 1e\+09 completed requests is "
        r"6e-05 per request, below 1 \(is completed right\?\)",
    ),
    (
        "nothing completed",
        [("a.json", vllm_result(1)), ("b.json", vllm_result(2, completed=0))],
        r"b\.json, column completed: no request completed",
    ),
    (
        "genai-perf unit",
        [("a.json", genai_perf_export(1, unit="min")), ("b.json", genai_perf_export(2))],
        r"a\.json, column time_to_first_token: unknown time unit 'min'",
    ),
    ("no files", [], r"no load-test files given"),
]


@pytest.mark.parametrize(
    ("files", "message"), [c[1:] for c in MALFORMED_FILES], ids=[c[0] for c in MALFORMED_FILES]
)
def test_malformed_files_are_refused(files: list[tuple[str, str]], message: str) -> None:
    with pytest.raises(cap.LoadTestFormatError, match=message):
        cap.read_loadtest_files(files)


def test_measured_knee_interpolates_between_the_levels_around_the_limit() -> None:
    rows = [
        f"toy,G,1,fp8,e,100,100,{n},{x},{t},{u},,"
        for n, x, t, u in (
            (1, 1.0, 0.1, 0.010),
            (2, 2.0, 0.2, 0.011),
            (4, 3.5, 0.4, 0.013),
            (8, 5.0, 0.8, 0.020),
        )
    ]
    table = cap.read_loadtest_csv(synthetic_csv(rows), file_name="toy.csv")
    knee = cap.measured_knee(
        table, prompt_tokens=100, completion_tokens=100, ttft_p95_s=0.3, tpot_p95_s=0.05
    )
    assert knee is not None
    assert (knee.binding, knee.requests_per_s, knee.concurrency) == ("ttft", 2.75, 3.0)
    knee = cap.measured_knee(
        table, prompt_tokens=100, completion_tokens=100, ttft_p95_s=1.0, tpot_p95_s=0.012
    )
    assert knee is not None and knee.binding == "tpot"
    assert knee.requests_per_s == pytest.approx(2.0 + 0.5 * 1.5)
    loose = cap.measured_knee(
        table, prompt_tokens=100, completion_tokens=100, ttft_p95_s=5.0, tpot_p95_s=1.0
    )
    assert loose is not None and (loose.binding, loose.requests_per_s) == ("measured range", 5.0)
    assert (
        cap.measured_knee(
            table, prompt_tokens=300, completion_tokens=100, ttft_p95_s=0.3, tpot_p95_s=0.05
        )
        is None
    )
    with pytest.raises(
        cap.SloUnreachableError, match="p95 TTFT is 0.1 s at the lowest load"
    ) as info:
        cap.measured_knee(
            table, prompt_tokens=100, completion_tokens=100, ttft_p95_s=0.05, tpot_p95_s=0.05
        )
    assert info.value.limit == "ttft" and info.value.value_s == 0.1
    assert isinstance(info.value, cap.SLOUnreachableError) and not math.isnan(info.value.limit_s)


def test_an_unreachable_mix_shows_its_latency_apart_from_the_limit() -> None:
    # 1.0004 s against a 1 s limit read "1 s ... above the 1 s limit" with 3 digits
    error = unreachable_error((500.0, 100.0), 1.0004, 0.01, 1.0, 0.05, "measured")
    assert "p95 TTFT is 1.0004 s at the lowest load (measured), above the 1 s limit" in str(error)
    assert error.limit == "ttft" and error.value_s == 1.0004


def test_one_setup_of_a_csv_holding_several_is_selected(loadtests: Path) -> None:
    text = (loadtests / NIM_70B_H100).read_text()
    with pytest.raises(cap.LoadTestFormatError, match="tensor-parallel degrees 4, 8"):
        cap.read_loadtest_files([(NIM_70B_H100, text)])
    table = cap.read_loadtest_files([(NIM_70B_H100, text)], tensor_parallel=8, precision="FP8")
    assert (table.tensor_parallel, table.precision, len(table.mixes())) == (8, "fp8", 6)
    with pytest.raises(cap.LoadTestFormatError, match="holds TP4 fp16, TP4 fp8, TP8 fp16"):
        cap.read_loadtest_files([(NIM_70B_H100, text)], tensor_parallel=1)
    with pytest.raises(cap.LoadTestFormatError, match="only in a CSV import"):
        cap.read_loadtest_files([("a.json", vllm_result(1))], precision="fp8")


def test_a_p95_tpot_below_its_mean_is_noted_where_the_table_says_so(loadtests: Path) -> None:
    """genai-perf's p95 before its change #694 is over the pooled gaps between streamed tokens:
    on the NIM tables it sits below the mean TPOT where prefill stalls are rare (2,000/200 and
    7,000/1,000 under load). The import says so; tables whose p95 never falls below the mean
    carry no such note."""
    text = (loadtests / NIM_70B_H100).read_text()
    tp4 = cap.read_loadtest_csv_setups(text, file_name=NIM_70B_H100)[0]
    (note,) = [n for n in tp4.notes if n.startswith("p95 TPOT below its mean")]
    below = (tp4.frame.tpot_p95_s < 0.99 * tp4.frame.tpot_mean_s).sum()
    assert f"in {below} of 60 rows" in note and below > 0
    assert "genai-perf before its change #694" in note and "over-stated" in note
    files = [(p.name, p.read_text()) for p in (loadtests / "vllm-bench-json").glob("*.json")]
    assert not any("p95 TPOT below" in n for n in cap.read_loadtest_files(files).notes)
    synthetic = cap.read_loadtest_csv(synthetic_csv(), file_name="t.csv")
    assert not any("p95 TPOT below" in n for n in synthetic.notes)
    # one synthetic row whose p95 TPOT (5 ms) falls below its mean (10 ms): named as the example
    rows = synthetic_rows()
    fields = rows[3].split(",")
    fields[10] = "0.005"
    rows[3] = ",".join(fields)
    table = cap.read_loadtest_csv(synthetic_csv(rows), file_name="t.csv")
    (note,) = [n for n in table.notes if n.startswith("p95 TPOT below its mean")]
    assert note.startswith("p95 TPOT below its mean in 1 of 10 rows (e.g. 500/100 at concurrency 8")
