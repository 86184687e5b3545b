"""End to end: a deployment's serving metrics, served by a real Prometheus, imported by the
hourly cycle into its profile's production hours, then read by the SLO answer and the plan.

The engine's series are built from real rows of the NIM Llama-3-8B / H100 table
(../shared/data/loadtests) at the 2000/200 mix: each row is one past hour of two replicas at
the row's load — tokens as NIM's counters, requests as its end-to-end latency histogram's
count, every request's TTFT and TPOT as NIM's histograms (spread so that their p95 is the
row's) — backfilled into Prometheus with promtool.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

import capacity as cap
from app import sources
from app.db import Database
from app.jobs.hourly import run_hourly
from tests.app.test_plan_surfaces import SERIES, _load, history_rows
from tests.app.test_profile_learning import PRODUCTION_MIX, SLO, capacity_at, csv_text, import_lab
from tests.app.test_profile_learning import nim_8b as nim_8b  # noqa: F401 - a fixture
from tests.support.clock import settled_hour
from tests.support.pg_cluster import free_port
from tests.support.prometheus import running_prometheus

REPLICAS = 2
QUARTER_S = 900
SLOWER = 1.3


def bounds(low: float, high: float, step: float = 1.02) -> np.ndarray:
    """Histogram bucket bounds 2 % apart, as written in the exposition (6 digits)."""
    count = int(np.ceil(np.log(high / low) / np.log(step))) + 1
    return np.array([float(f"{low * step**k:.6g}") for k in range(count)])


TTFT_LE = bounds(0.005, 30.0)
TPOT_LE = bounds(0.002, 1.0)


def spread(p95_s: float, n: int) -> np.ndarray:
    """``n`` latencies from half ``p95_s`` up, 95 % of them at most ``p95_s``."""
    return p95_s * (0.5 + 0.5 * ((np.arange(n) + 0.5) / n) / 0.95)


@dataclass(frozen=True)
class Hour:
    """One hour of the fleet as its engine counts it (no latencies: no histogram increment)."""

    start: datetime
    requests: int
    prompt_tokens: int
    completion_tokens: int
    ttft_s: np.ndarray | None = None
    tpot_s: np.ndarray | None = None

    def buckets(self, le: np.ndarray, latencies: np.ndarray | None) -> np.ndarray:
        """Observations per bucket (the last: above every bound, +Inf)."""
        if latencies is None:
            return np.zeros(len(le) + 1, dtype=np.int64)
        return np.bincount(np.searchsorted(le, latencies, side="left"), minlength=len(le) + 1)


def production_hours(nim: pd.DataFrame, now: datetime) -> list[Hour]:
    """Five rows as measured (10 .. 6 h before ``now``), an hour whose requests finished but
    whose histograms did not move (5 h before), three rows 30 % slower (4 .. 2 h before)."""
    full = cap.read_loadtest_csv(csv_text(nim), file_name="full.csv")
    found = full.mix_rows(*PRODUCTION_MIX)
    assert found is not None
    rows = found.to_dict("records")

    def hour(ago: int, row: dict[str, Any], factor: float = 1.0) -> Hour:
        requests = round(row["request_throughput_rps"] * 3600 * REPLICAS)
        return Hour(
            start=now - timedelta(hours=ago),
            requests=requests,
            prompt_tokens=requests * int(PRODUCTION_MIX[0]),
            completion_tokens=requests * int(PRODUCTION_MIX[1]),
            ttft_s=spread(row["ttft_p95_s"] * factor, requests),
            tpot_s=spread(row["tpot_p95_s"] * factor, requests),
        )

    measured = [hour(10 - i, row) for i, row in enumerate(rows[:5])]
    stalled = Hour(now - timedelta(hours=5), 100, 200_000, 20_000)
    slow = [hour(4 - i, row, SLOWER) for i, row in enumerate(rows[:3])]
    return [*measured, stalled, *slow]


def quarters(total: np.ndarray | int) -> list[Any]:
    """A total split over the hour's four quarters (the remainder in the last)."""
    part = np.asarray(total) // 4
    return [part, part, part, np.asarray(total) - 3 * part]


def openmetrics(
    hours: list[Hour],
    *,
    first: datetime,
    last: datetime,
    prefix: str = "",
    models: tuple[tuple[str, int], ...] = (("", 1),),
    kube: tuple[tuple[str, int], ...] = (),
) -> str:
    """The engine's series (NIM's names, or ``prefix`` + them) every 15 min from ``first`` to
    ``last``: the counters and histograms grow by each hour's counts, times the factor of each
    of ``models`` (label matchers, factor); a running-requests gauge per replica and
    kube-state-metrics' available replicas of each of ``kube`` every minute."""
    by_start = {hour.start: hour for hour in hours}
    counters = {"requests": 0, "prompt_tokens": 0, "generation_tokens": 0}
    ttft = np.zeros(len(TTFT_LE) + 1, dtype=np.int64)
    tpot = np.zeros(len(TPOT_LE) + 1, dtype=np.int64)
    points: list[tuple[int, dict[str, int], np.ndarray, np.ndarray]] = []
    moment = first
    while moment <= last:
        # the quarter ending at ``moment`` belongs to the hour that starts before it
        hour = by_start.get((moment - timedelta(seconds=1)).replace(minute=0, second=0))
        if moment > first and hour is not None:
            q = int((moment - hour.start).total_seconds()) // QUARTER_S - 1
            counters["requests"] += int(quarters(hour.requests)[q])
            counters["prompt_tokens"] += int(quarters(hour.prompt_tokens)[q])
            counters["generation_tokens"] += int(quarters(hour.completion_tokens)[q])
            ttft = ttft + quarters(hour.buckets(TTFT_LE, hour.ttft_s))[q]
            tpot = tpot + quarters(hour.buckets(TPOT_LE, hour.tpot_s))[q]
        points.append((int(moment.timestamp()), dict(counters), ttft.copy(), tpot.copy()))
        moment += timedelta(seconds=QUARTER_S)

    def braces(*labels: str) -> str:
        shown = ",".join(label for label in labels if label)
        return f"{{{shown}}}" if shown else ""

    lines: list[str] = []
    for name in ("prompt_tokens", "generation_tokens"):
        lines.append(f"# TYPE {prefix}{name} counter")
        for model, k in models:
            lines += [
                f"{prefix}{name}_total{braces(model)} {k * values[name]} {t}"
                for t, values, _, _ in points
            ]
    # NIM counts finished requests in its end-to-end latency histogram (vLLM exports it too)
    lines.append(f"# TYPE {prefix}e2e_request_latency_seconds histogram")
    for model, k in models:
        for t, values, _, _ in points:
            n = k * values["requests"]
            inf = braces(model, 'le="+Inf"')
            lines.append(f"{prefix}e2e_request_latency_seconds_bucket{inf} {n} {t}")
            lines.append(f"{prefix}e2e_request_latency_seconds_count{braces(model)} {n} {t}")
            lines.append(f"{prefix}e2e_request_latency_seconds_sum{braces(model)} 0 {t}")
    for name, le, position in (
        ("time_to_first_token_seconds", TTFT_LE, 2),
        ("time_per_output_token_seconds", TPOT_LE, 3),
    ):
        lines.append(f"# TYPE {prefix}{name} histogram")
        bounds_shown = [f"{bound:.6g}" for bound in le] + ["+Inf"]
        for model, k in models:
            for point in points:
                cumulative = k * np.cumsum(point[position])
                labelled = [braces(model, 'le="' + bound + '"') for bound in bounds_shown]
                lines += [
                    f"{prefix}{name}_bucket{labels} {n} {point[0]}"
                    for labels, n in zip(labelled, cumulative, strict=True)
                ]
                lines.append(f"{prefix}{name}_count{braces(model)} {cumulative[-1]} {point[0]}")
                lines.append(f"{prefix}{name}_sum{braces(model)} 0 {point[0]}")
    minutes = range(int((last - first).total_seconds() // 60) + 1)
    start = int(first.timestamp())
    lines.append(f"# TYPE {prefix}num_requests_running gauge")
    for model, _ in models:
        for pod in range(REPLICAS):
            labels = braces(model, f'pod="p{pod}"')
            lines += [f"{prefix}num_requests_running{labels} 4 {start + 60 * m}" for m in minutes]
    if kube:
        lines.append("# TYPE kube_deployment_status_replicas_available gauge")
        for deployment, replicas in kube:
            labels = braces(f'deployment="{deployment}"', 'namespace="prod"')
            lines += [
                f"kube_deployment_status_replicas_available{labels} {replicas} {start + 60 * m}"
                for m in minutes
            ]
    return "\n".join([*lines, "# EOF", ""])


def histogram_quantile(q: float, le: np.ndarray, counts: np.ndarray) -> float:
    """What Prometheus' histogram_quantile gives for per-bucket ``counts`` (last: +Inf),
    computed here independently of gpucast."""
    cumulative = np.cumsum(counts).astype(float)
    upper = [*le.tolist(), float("inf")]
    rank = q * cumulative[-1]
    reached = np.flatnonzero(cumulative[:-1] >= rank)
    b = int(reached[0]) if len(reached) else len(upper) - 1
    if b == len(upper) - 1:
        return upper[-2]
    start, count = 0.0, cumulative[b]
    if b > 0:
        start = upper[b - 1]
        count -= cumulative[b - 1]
        rank -= cumulative[b - 1]
    return start + (upper[b] - start) * (rank / count)


def bucket_width(le: np.ndarray, value: float) -> float:
    b = int(np.searchsorted(le, value, side="left"))
    return float(le[b] - (le[b - 1] if b > 0 else 0.0))


def check_stored(client: TestClient, hours: list[Hour], *, replicas: int) -> None:
    """The profile holds the served hours: replicas, requests and tokens exact, each p95 what
    histogram_quantile gives from the hour's buckets and within a bucket of the true p95."""
    stored = client.get("/v1/gpu-profiles/h100-8b/observations").json()
    served = [hour for hour in hours if hour.ttft_s is not None]
    assert [row["hour"] for row in stored] == [
        hour.start.isoformat().replace("+00:00", "Z") for hour in served
    ]
    for row, hour in zip(stored, served, strict=True):
        assert row["replicas"] == replicas
        assert (row["requests"], row["prompt_tokens"], row["completion_tokens"]) == (
            hour.requests,
            hour.prompt_tokens,
            hour.completion_tokens,
        )
        for name, le, latencies in (
            ("ttft_p95_s", TTFT_LE, hour.ttft_s),
            ("tpot_p95_s", TPOT_LE, hour.tpot_s),
        ):
            assert latencies is not None
            counts = hour.buckets(le, latencies)
            assert row[name] == pytest.approx(histogram_quantile(0.95, le, counts), rel=1e-9)
            p95 = float(np.quantile(latencies, 0.95))
            assert abs(row[name] - p95) <= bucket_width(le, p95)


def test_the_hourly_cycle_imports_a_real_prometheus_into_the_profile_the_answer_and_the_plan(
    nim_8b: pd.DataFrame,  # noqa: F811 - the fixture
    client: TestClient,
    database: Database,
    tmp_path: Path,
) -> None:
    now = settled_hour().to_pydatetime()
    # the series' load at the production mix, so each plan hour is near the production hours
    history = history_rows(pd.Timestamp(now))
    for row in history:
        row["prompt_tokens"] = float(row["requests"]) * PRODUCTION_MIX[0]
    _load(client, history)
    import_lab(client, nim_8b, one_mix=False)
    deployed = client.put(f"/v1/series/{SERIES}/deployment", json={"profile": "h100-8b", **SLO})
    assert deployed.status_code == 200, deployed.text
    before = client.get(f"/v1/series/{SERIES}/capacity")
    assert before.status_code == 200, before.text
    assert not before.json()["production_hours"]  # the lab's answer alone
    assert client.post("/v1/series", json={"name": "prod-eu/other"}).status_code == 201
    other = client.put("/v1/series/prod-eu/other/deployment", json={"profile": "l4-small"})
    assert other.status_code == 200, other.text
    hours = production_hours(nim_8b, now)
    metrics = openmetrics(hours, first=now - timedelta(hours=11), last=now)
    with running_prometheus(tmp_path, metrics) as prometheus:
        body = {"url": prometheus.url, "engine": "nim", "lookback_hours": 12}
        put = client.put(f"/v1/series/{SERIES}/serving-source", json=body)
        assert put.status_code == 200, put.text
        assert put.json()["queries"]["ttft_p95_s"] == (
            "histogram_quantile(0.95, sum by (le) "
            "(increase(time_to_first_token_seconds_bucket[1h])))"
        )
        # a second deployment whose Prometheus is down fails alone
        down = {"url": f"http://127.0.0.1:{free_port()}", "timeout_s": 2.0}
        assert client.put("/v1/series/prod-eu/other/serving-source", json=down).status_code == 200
        report = run_hourly(database, now=now + timedelta(minutes=5))
        again = run_hourly(database, now=now + timedelta(minutes=6))
    first, failing = report.serving
    assert (first.series, first.status, first.rows, first.skipped) == (SERIES, "imported", 8, 4)
    assert "3 hours skipped: no traffic" in first.notes
    assert any(note.startswith("1 hour skipped: no ttft_p95_s") for note in first.notes)
    assert failing.failed and "cannot reach Prometheus" in (failing.error or "")
    assert report.failed == ["prod-eu/other serving import"]
    assert "1 of 2 serving sources, 1 failures" in report.lines()[-1]
    assert again.serving[0].rows == 0  # stored hours are never imported again
    assert again.serving[0].skipped == 4  # the empty ones are measured again
    with database.transaction() as session:
        source = sources.get_serving_source(session, series_name=SERIES)
        # each closed hour skipped is counted once, however often it is measured again
        assert (source.last_error, source.hours_skipped_total) == (None, 4)

    check_stored(client, hours, replicas=REPLICAS)

    answer = capacity_at(client, PRODUCTION_MIX, allow_extrapolation=True)
    assert answer["production_hours"] == 8
    plan = client.get(f"/v1/series/{SERIES}/capacity")
    assert plan.status_code == 200, plan.text
    assert plan.json()["capacity_basis"] == "slo capacity at each hour's mix"
    assert plan.json()["production_hours"] == 8  # its capacity learned from them
    (note,) = [n for n in plan.json()["notes"] if "slower than profile h100-8b" in n]
    assert "3 of its newest 6 production hours" in note

    scraped = {
        (sample.name, sample.labels.get("series")): sample.value
        for family in text_string_to_metric_families(client.get("/metrics").text)
        for sample in family.samples
        if sample.name.startswith("gpucast_serving_source_")
    }
    assert scraped[("gpucast_serving_source_import_failures", SERIES)] == 0
    assert scraped[("gpucast_serving_source_import_failures", "prod-eu/other")] == 2
    assert scraped[("gpucast_serving_source_imports_failed_total", "prod-eu/other")] == 2
    assert scraped[("gpucast_serving_source_hours_skipped_total", SERIES)] == 4
    stamps = [key for key in scraped if key[0].endswith("last_success_timestamp_seconds")]
    assert stamps == [("gpucast_serving_source_last_success_timestamp_seconds", SERIES)]


def test_vllm_names_a_selector_and_kube_state_metrics_replicas(
    nim_8b: pd.DataFrame,  # noqa: F811 - the fixture
    client: TestClient,
    database: Database,
    tmp_path: Path,
) -> None:
    now = settled_hour().to_pydatetime()
    import_lab(client, nim_8b, one_mix=False)
    assert client.post("/v1/series", json={"name": "prod/llama"}).status_code == 201
    deployed = client.put("/v1/series/prod/llama/deployment", json={"profile": "h100-8b"})
    assert deployed.status_code == 200, deployed.text
    hours = production_hours(nim_8b, now)
    # another model on the same Prometheus, three times as busy, and another deployment
    metrics = openmetrics(
        hours,
        first=now - timedelta(hours=11),
        last=now,
        prefix="vllm:",
        models=(('model_name="llama"', 1), ('model_name="other"', 3)),
        kube=(("llama-8b", 3), ("other", 9)),
    )
    with running_prometheus(tmp_path, metrics) as prometheus:
        body = {
            "url": prometheus.url,
            "selector": 'model_name="llama"',
            "kube_deployment": "llama-8b",
            "requests_counter": "vllm:e2e_request_latency_seconds_count",
            "lookback_hours": 12,
        }
        put = client.put("/v1/series/prod/llama/serving-source", json=body)
        assert put.status_code == 200, put.text
        (outcome,) = sources.import_serving_sources(database, now=now + timedelta(minutes=5))
    assert (outcome.status, outcome.rows, outcome.skipped) == ("imported", 8, 4), outcome.line()
    check_stored(client, hours, replicas=3)
