"""Charts: the PNG route, `gpucast plot` and the HTML overview page, on SQLite and PostgreSQL."""

from __future__ import annotations

import struct
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from app import ingest, plans
from app.cli import main
from app.db import Database
from app.db.models import GpuProfile, Series
from app.jobs import ForecastOptions, run_forecasts
from app.views import charts
from app.views.overview import chart_url

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SERIES = "prod-us/llama-3.1-70b"
ODD = "team-a/chat+v2@eu"  # '+' and '@' must be percent-encoded in the chart URL
FAST = ("seasonal_naive", "seasonal_ma")


def hourly(days: int = 14, *, level: float = 36_000.0, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    hours = pd.date_range("2026-11-01T00:00Z", periods=days * 24, freq="h")
    shape = 1 + 0.5 * np.sin(2 * np.pi * (hours.hour.to_numpy() - 8) / 24)
    requests = level * shape * rng.lognormal(0, 0.03, len(hours))
    return pd.DataFrame(
        {
            "hour": hours,
            "requests": requests,
            "prompt_tokens": requests * 800,
            "completion_tokens": requests * 200,
            "total_tokens": requests * 1000,
            "peak_rps": requests / 1800,
        }
    )


def load(database: Database, name: str, frame: pd.DataFrame) -> None:
    with database.transaction() as session:
        ingest.store(session, frame.assign(series=name), create_series=True)


def add_profile(database: Database, name: str = "h100-70b") -> None:
    with database.transaction() as session:
        session.add(
            GpuProfile(
                name=name,
                gpu_type="H100-80G",
                model="llama-3.1-70b",
                tokens_per_s_per_gpu=2000.0,
                gpus_per_replica=2,
            )
        )


@pytest.fixture
def forecasted(database: Database) -> Database:
    load(database, SERIES, hourly())
    load(database, ODD, hourly(level=9_000.0, seed=1))
    add_profile(database)
    run_forecasts(database, ForecastOptions(models=FAST, workers=1))
    return database


def png_size(png: bytes) -> tuple[int, int]:
    assert png[:8] == PNG_SIGNATURE
    return struct.unpack(">II", png[16:24])


# -- PNG route ------------------------------------------------------------------------------


def test_plot_png_with_forecast_and_plan(forecasted: Database, client: TestClient) -> None:
    response = client.get(f"/v1/series/{SERIES}/plot.png")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/png"
    assert "max-age" in response.headers["cache-control"]
    assert png_size(response.content) == (1000, 480)
    assert len(response.content) > 20_000  # a drawn chart, not an empty canvas
    again = client.get(
        f"/v1/series/{SERIES}/plot.png", headers={"If-None-Match": response.headers["etag"]}
    )
    assert again.status_code == 304 and not again.content


def test_plot_params_change_the_chart(forecasted: Database, client: TestClient) -> None:
    base = client.get(f"/v1/series/{SERIES}/plot.png").headers["etag"]
    for params in ({"metric": "tokens"}, {"days": 3}, {"band": "hi_95"}):
        response = client.get(f"/v1/series/{SERIES}/plot.png", params=params)
        assert response.status_code == 200, (params, response.text)
        assert response.headers["etag"] != base, params


def test_plot_of_encoded_name_and_of_a_series_called_plot_png(
    forecasted: Database, client: TestClient
) -> None:
    url = chart_url(ODD)
    assert url == "/v1/series/team-a/chat%2Bv2%40eu/plot.png"
    assert client.get(url).status_code == 200
    assert client.post("/v1/series", json={"name": "plot.png"}).status_code == 201
    assert client.get("/v1/series/plot.png").json()["name"] == "plot.png"
    assert client.get("/v1/series/plot.png/plot.png").content[:8] == PNG_SIGNATURE


def test_plot_errors(forecasted: Database, client: TestClient) -> None:
    response = client.get("/v1/series/nope/plot.png")
    assert response.status_code == 404
    assert response.json() == {"detail": "series 'nope' not found"}
    response = client.get(f"/v1/series/{SERIES}/plot.png", params={"profile": "missing"})
    assert response.status_code == 404 and "GPU profile 'missing'" in response.json()["detail"]
    for params in (
        {"days": 0},
        {"days": 91},
        {"days": "week"},
        {"metric": "qps"},
        {"band": "p99"},
        {"profile": ""},
    ):
        response = client.get(f"/v1/series/{SERIES}/plot.png", params=params)
        assert response.status_code == 422, params
        assert response.headers["content-type"] == "application/json"


def test_no_forecast_yet_still_renders_history(database: Database, client: TestClient) -> None:
    load(database, SERIES, hourly(days=3))
    response = client.get(f"/v1/series/{SERIES}/plot.png")
    assert response.status_code == 200 and response.content[:8] == PNG_SIGNATURE
    with database.transaction() as session:
        data = charts.load_chart_data(session, series_name=SERIES)
    assert data.forecast is None and len(data.history) == 72
    assert data.plan is None and data.plan_note == "no GPU profile"
    assert charts.chart_subtitle(data).startswith("no forecast yet")


def requests_plan_band(database: Database) -> str:
    with database.transaction() as session:
        plan = plans.series_plan(
            session, series_name=SERIES, profile_name="h100-70b", params=plans.PlanParams()
        )
    assert plan.band_choice is not None and plan.band_choice["note"]
    return plan.band_label


def test_chart_data_units_window_and_plan(forecasted: Database) -> None:
    with forecasted.transaction() as session:
        requests = charts.load_chart_data(session, series_name=SERIES, days=2)
        tokens = charts.load_chart_data(session, series_name=SERIES, metric="tokens")
    assert len(requests.history) == 48
    assert requests.history["hour"].iloc[-1] == pd.Timestamp("2026-11-14T23:00Z")
    # Stored counts per hour are shown per second: 36,000 requests/h is about 10 QPS.
    assert requests.history["value"].mean() == pytest.approx(10, rel=0.1)
    assert tokens.history["value"].mean() == pytest.approx(10_000, rel=0.1)
    assert requests.forecast is not None and len(requests.forecast) == 24
    assert requests.plan is not None and len(requests.plan) == 24
    assert requests.profile == "h100-70b" and requests.peak_gpus == requests.plan["gpus"].max()
    # the default band is auto: the chart names the margin it sized on (yhat x headroom)
    label = requests_plan_band(forecasted)
    assert requests.plan_band == label and label.startswith("auto (")
    subtitle = charts.chart_subtitle(requests)
    assert "backtest MASE" in subtitle and f"peak {requests.peak_gpus} GPUs" in subtitle


def test_empty_series_renders_a_placeholder(database: Database, client: TestClient) -> None:
    assert client.post("/v1/series", json={"name": "empty/one"}).status_code == 201
    response = client.get("/v1/series/empty/one/plot.png")
    assert response.status_code == 200 and response.content[:8] == PNG_SIGNATURE


def test_concurrent_renders_match_sequential_ones(forecasted: Database) -> None:
    with forecasted.transaction() as session:
        frames = [
            charts.load_chart_data(session, series_name=name, metric=metric)
            for name in (SERIES, ODD)
            for metric in ("requests", "tokens")
        ]
    sequential = [charts.render_png(d, use_cache=False) for d in frames]
    with ThreadPoolExecutor(max_workers=4) as pool:
        concurrent = list(pool.map(lambda d: charts.render_png(d, use_cache=False), frames * 2))
    assert concurrent == sequential * 2


# -- CLI --------------------------------------------------------------------------------------


def test_cli_plot_writes_png(
    forecasted: Database, database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "chart.png"
    args = ["--database-url", database_url, "plot", SERIES, "-o", str(target)]
    assert main([*args, "--metric", "tokens", "--days", "3"]) == 0
    assert png_size(target.read_bytes()) == (1000, 480)
    out = capsys.readouterr().out
    assert out.startswith(f"wrote {target}") and "peak" in out and "h100-70b" in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--width", "10"], "--width must be 200-4000"),
        (["--days", "0"], "--days must be between 1 and 90"),
        (["--profile", "missing"], "GPU profile 'missing' not found"),
    ],
)
def test_cli_plot_bad_input_exits_2(
    forecasted: Database,
    database_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    message: str,
) -> None:
    args = ["--database-url", database_url, "plot", SERIES, "-o", str(tmp_path / "c.png")]
    assert main([*args, *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err
    assert not (tmp_path / "c.png").exists()


def test_cli_plot_unknown_series_exits_2(
    database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--database-url", database_url, "plot", "nope", "-o", str(tmp_path / "c.png")])
    assert code == 2
    assert capsys.readouterr().err == "gpucast: error: series 'nope' not found\n"


# -- HTML overview ----------------------------------------------------------------------------


def test_overview_lists_series_with_charts_and_peaks(
    forecasted: Database, client: TestClient
) -> None:
    response = client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    page = response.text
    assert 'data-images-total="2"' in page
    assert page.count('<img class="chart"') == 2 and page.count('loading="lazy"') == 2
    assert 'src="/v1/series/prod-us/llama-3.1-70b/plot.png?metric=requests' in page
    assert 'src="/v1/series/team-a/chat%2Bv2%40eu/plot.png?metric=requests' in page
    assert "&amp;days=7&amp;profile=h100-70b" in page  # query separators escaped in HTML
    assert 'alt="requests history, forecast and GPU plan of team-a/chat+v2@eu"' in page
    assert "backtest MASE" in page and "seasonal_" in page
    # No band=auto choice is stored yet and the page never calibrates: the card sizes on
    # hi_80, what band auto serves uncalibrated, and says so (tests/app/test_overview.py).
    with forecasted.transaction() as session:
        fallback = plans.PlanParams(band="hi_80")
        peak = charts.load_chart_data(session, series_name=SERIES, params=fallback).peak_gpus
    assert f'<span class="peak">{peak} GPUs</span> (h100-70b)' in page
    assert 'auto → hi_80: <span class="stale">not yet calibrated' in page
    assert "min ago" in page  # forecast age
    assert "http://" not in page and "https://" not in page  # no external assets


def test_overview_escapes_names_and_passes_params(forecasted: Database, client: TestClient) -> None:
    # Names are validated on the way in; the page escapes anyway (defence in depth).
    with forecasted.transaction() as session:
        session.add(Series(name='x/<script>alert("1")</script>&', labels={}))
    page = client.get("/", params={"metric": "tokens", "days": 3}).text
    assert "<script>alert" not in page
    assert "x/&lt;script&gt;alert(&quot;1&quot;)&lt;/script&gt;&amp;" in page
    assert "/v1/series/x/%3Cscript%3Ealert%28%221%22%29%3C/script%3E%26/plot.png" in page
    assert 'src="/v1/series/prod-us/llama-3.1-70b/plot.png?metric=tokens&amp;days=3&amp;' in page
    assert client.get("/", params={"days": 0}).status_code == 422
    assert client.get("/", params={"profile": "missing"}).status_code == 404


def test_overview_without_profile_or_forecast(database: Database, client: TestClient) -> None:
    load(database, SERIES, hourly(days=2))
    page = client.get("/").text
    assert "no forecast yet" in page and "no GPU profile" in page
    assert 'data-images-total="1"' in page


def test_overview_empty_state_says_how_to_load_data(client: TestClient) -> None:
    page = client.get("/").text
    assert "No series yet" in page and "gpucast demo" in page and "gpucast ingest hourly" in page
    assert 'data-images-total="0"' in page


def test_overview_follows_read_auth(database_url: str) -> None:
    from app.api import create_app
    from app.settings import get_settings

    settings = get_settings(
        database_url=database_url, auto_migrate=False, api_keys="k1", read_requires_key=True
    )
    with TestClient(create_app(settings)) as client:
        assert client.get("/").status_code == 401
        assert client.get("/", headers={"X-API-Key": "k1"}).status_code == 200
        assert client.get("/v1/series/a/plot.png").status_code == 401


# -- GPU schedule on the chart ----------------------------------------------------------------


def drawn(data: charts.ChartData) -> Figure:
    figure = Figure(figsize=(10, 4.8), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    charts._draw(figure, data)
    figure.canvas.draw()
    return figure


def plan_lines(figure: Figure) -> dict[str, Line2D]:
    right = figure.axes[1]
    return {str(line.get_label()): line for line in right.get_lines()}


def test_chart_draws_the_executed_schedule_and_the_formula_dashed(forecasted: Database) -> None:
    with forecasted.transaction() as session:
        data = charts.load_chart_data(session, series_name=SERIES)
        plan = plans.series_plan(
            session, series_name=SERIES, profile_name="h100-70b", params=plans.PlanParams()
        )
    assert data.plan is not None
    assert data.plan["gpus"].tolist() == plan.plan.frame["gpus"].tolist()
    assert data.plan["raw_gpus"].tolist() == plan.plan.frame["raw_gpus"].tolist()
    assert data.plan["gpus"].tolist() != data.plan["raw_gpus"].tolist()  # a dip is held
    lines = plan_lines(drawn(data))
    [executed] = [line for label, line in lines.items() if label.startswith("GPUs executed")]
    formula = lines["GPUs by the formula alone"]
    assert executed.get_linestyle() == "-" and formula.get_linestyle() == "--"
    assert list(executed.get_ydata()) == [*data.plan["gpus"], data.plan["gpus"].iloc[-1]]
    assert list(formula.get_ydata()) == [*data.plan["raw_gpus"], data.plan["raw_gpus"].iloc[-1]]
    assert "executed" in drawn(data).axes[1].get_ylabel()

    same = replace(data, plan=data.plan.assign(raw_gpus=data.plan["gpus"]))
    assert list(plan_lines(drawn(same))) == [str(executed.get_label())]  # nothing to tell apart
    assert charts.fingerprint(same) != charts.fingerprint(data)


def test_chart_of_a_stale_plan_says_so(forecasted: Database) -> None:
    with forecasted.transaction() as session:
        data = charts.load_chart_data(session, series_name=SERIES)
    assert data.plan_stale  # history in November, so the forecast is older than 36 h
    assert charts.STALE_NOTE in charts.chart_subtitle(data)
    assert any(charts.STALE_NOTE in label for label in plan_lines(drawn(data)))
    fresh = replace(data, plan_stale=False)
    assert charts.STALE_NOTE not in charts.chart_subtitle(fresh)
    assert charts.fingerprint(fresh) != charts.fingerprint(data)


def test_the_legend_fits_inside_the_chart(forecasted: Database) -> None:
    with forecasted.transaction() as session:
        data = charts.load_chart_data(session, series_name=ODD, metric="tokens")
    # the widest legend: the formula drawn apart from the executed plan (band auto's floor may
    # sit on the minimum, where the two coincide and the formula is not drawn)
    data = replace(data, plan=data.plan.assign(raw_gpus=data.plan["gpus"] + 1))
    figure = drawn(data)
    renderer = figure.canvas.get_renderer()
    [legend] = figure.legends
    box = legend.get_window_extent(renderer)
    assert len(legend.get_texts()) == 6  # history, forecast, two bands, executed, formula
    assert box.x0 >= 0 and box.x1 <= figure.bbox.width, (box, figure.bbox)
