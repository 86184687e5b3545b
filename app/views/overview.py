"""The HTML overview page: every series with its chart, chosen model, backtest error, how
fresh its forecast is (refreshed or fitted, from which hours), the fleet expected to run
tomorrow (GPU-hours, cost and peak at P50/P90, measured by the plan band's replayed days) above
the floor the plan trigger holds (its peak GPUs, marked when the plan is stale), the band the
plan is sized on with its band=auto calibration, and the latest stored plan replay; and one
card per shared pool (:mod:`app.views.overview_pools`). Self-contained (inline CSS, no
external assets), so it works on closed networks and without Grafana. Every user-chosen
string is escaped. The page never replays and never calibrates band auto: it shows the replay
stored by ``gpucast backtest``, the REST backtest or Grafana's ``plan_backtest``, and the
stored band=auto choice (see :mod:`app.views.overview_status`)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape
from typing import Any
from urllib.parse import quote, urlencode

import pandas as pd
from sqlalchemy.orm import Session

from app import plans
from app.common.words import count
from app.db import repository
from app.forecasts import store as forecast_store
from app.forecasts.work import METRICS
from app.plans.backtest import latest_replay
from app.plans.summary import replay_summary
from app.views import chart_data
from app.views.overview_compare import comparison_html, load_comparison
from app.views.overview_pools import POOL_STYLE, PoolSummary, load_pool_summaries, pool_card
from app.views.overview_status import (
    Freshness,
    band_html,
    card_params,
    freshness_html,
    load_freshness,
    plan_run,
)

__all__ = ["Overview", "SeriesSummary", "load_overview", "render_page"]


@dataclass(frozen=True)
class RunSummary:
    metric: str
    model: str | None
    backtest_metric: str | None
    backtest_error: float | None
    trained_until: datetime | None
    created_at: datetime


@dataclass(frozen=True)
class SeriesSummary:
    name: str
    observations: int
    last_hour: datetime | None
    runs: tuple[RunSummary, ...]
    plan: chart_data.PlanSummary
    replay: dict[str, Any] | None = None  # the latest stored replay on the card's profile
    freshness: Freshness | None = None  # the run the plan comes from
    asked_band: str = "auto"
    calibration_pending: bool = False  # band auto asked, no choice stored for this night yet
    comparison: dict[str, Any] | None = None  # the plan on each profile of the deployed model

    @property
    def forecast_created_at(self) -> datetime | None:
        return max((r.created_at for r in self.runs), default=None)


@dataclass(frozen=True)
class Overview:
    series: tuple[SeriesSummary, ...]
    profiles: tuple[str, ...]
    profile: str | None
    pools: tuple[PoolSummary, ...] = ()
    total_series: int | None = None  # every series, when ``series`` is one page of them
    offset: int = 0  # the page's first series (0-based)


PAGE_SIZE = 50  # series cards per overview page


def load_overview(
    session: Session,
    *,
    profile_name: str | None = None,
    params: plans.PlanParams | None = None,
    plan_cache: plans.PlanCache | None = None,
    offset: int = 0,
    limit: int | None = None,
) -> Overview:
    """Summaries of every series (or of one page: ``offset``, ``limit``) and pool; a series'
    GPU plan uses ``profile_name``, else the series' deployment, else the first profile; a
    pool member its own."""
    profile = chart_data.default_profile(session, name=profile_name)
    params = params or plans.PlanParams()
    summaries = []
    for series in repository.list_series(session, offset=offset, limit=limit):
        card_profile = chart_data.series_profile(
            session, series_name=series.name, name=profile_name
        )
        stats = repository.series_stats(session, series_id=series.id)
        latest = {
            metric: forecast_store.latest_run(session, series_id=series.id, metric=metric)
            for metric in METRICS
        }
        runs = [
            RunSummary(
                metric=metric,
                model=run.model,
                backtest_metric=run.backtest_metric,
                backtest_error=run.backtest_error,
                trained_until=run.trained_until,
                created_at=run.created_at,
            )
            for metric, run in latest.items()
            if run is not None
        ]
        run = plan_run(latest)
        sized_params, pending = card_params(
            session,
            series_id=series.id,
            series_name=series.name,
            run=run,
            profile=card_profile,
            params=params,
        )
        plan = chart_data.summarize_plan(
            session,
            series_name=series.name,
            profile=card_profile,
            params=sized_params,
            plan_cache=plan_cache,
        )
        replay = (
            latest_replay(session, series_id=series.id, profile=card_profile.name)
            if card_profile is not None
            else None
        )
        summaries.append(
            SeriesSummary(
                name=series.name,
                observations=stats["observations"],
                last_hour=stats["last_hour"],
                runs=tuple(runs),
                plan=plan,
                replay=replay.result if replay is not None else None,
                freshness=load_freshness(session, run),
                asked_band=params.band,
                calibration_pending=pending,
                comparison=load_comparison(
                    session,
                    series_name=series.name,
                    params=sized_params,
                    sized_band=plan.sized_band,
                    plan_cache=plan_cache,
                ),
            )
        )
    profiles = tuple(p.name for p in repository.list_gpu_profiles(session))
    return Overview(
        series=tuple(summaries),
        profiles=profiles,
        profile=profile.name if profile else None,
        pools=load_pool_summaries(session, params=params, plan_cache=plan_cache),
        total_series=repository.count_series(session),
        offset=offset,
    )


# -- HTML -----------------------------------------------------------------------------------

STYLE = """
:root { color-scheme: light; --ink: #111827; --muted: #6b7280; --line: #e5e7eb; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif;
       color: var(--ink); background: #f3f4f6; }
header { padding: 16px 24px; background: #111827; color: #f9fafb; display: flex;
         flex-wrap: wrap; gap: 8px 24px; align-items: baseline; }
header h1 { font-size: 18px; margin: 0; }
header a { color: #93c5fd; }
header form { margin-left: auto; display: flex; gap: 8px; align-items: center; }
main { padding: 16px 24px; display: grid; gap: 16px;
       grid-template-columns: repeat(auto-fit, minmax(min(720px, 100%), 1fr)); }
.card { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 14px 16px; }
.card h2 { font-size: 16px; margin: 0 0 8px; word-break: break-all; }
.card img { width: 100%; max-width: 1000px; height: auto; aspect-ratio: 1000 / 480;
            display: block; margin: 10px auto 0; border-top: 1px solid var(--line); }
.card.chart-failed img { display: none; }
.chart-error { display: none; color: #b91c1c; }
.card.chart-failed .chart-error { display: block; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; margin: 0; }
dt { color: var(--muted); }
dd { margin: 0; }
.peak { font-weight: 600; font-size: 15px; }
.stale { color: #b45309; }
.stale-plan { border-left: 4px solid #d97706; }
.stale-plan .stale { font-weight: 600; }
.note { color: var(--muted); }
.empty { grid-column: 1 / -1; background: #fff; border: 1px dashed #9ca3af; padding: 24px;
         border-radius: 8px; }
code, pre { background: #f3f4f6; border-radius: 4px; padding: 1px 4px; }
pre { padding: 10px; overflow-x: auto; }
.pager { padding: 0 24px 8px; display: flex; gap: 12px; }
footer { padding: 8px 24px 24px; color: var(--muted); font-size: 12px; }
"""

# Counts the chart images that loaded into data-images-loaded on <body> (and failed ones into
# data-images-failed), so people and monitoring checks can see at a glance that charts work.
SCRIPT = """
(function () {
  var body = document.body, images = document.querySelectorAll("img.chart");
  function update() {
    var loaded = 0, failed = 0;
    images.forEach(function (img) {
      if (!img.complete) { return; }
      if (img.naturalWidth > 0) { loaded++; } else { failed++; }
    });
    body.setAttribute("data-images-loaded", String(loaded));
    body.setAttribute("data-images-failed", String(failed));
  }
  images.forEach(function (img) {
    img.addEventListener("load", update);
    img.addEventListener("error", function () {
      img.closest(".card").classList.add("chart-failed");
      update();
    });
  });
  window.addEventListener("load", update);
  update();
})();
"""

EMPTY_STATE = """<section class="empty">
<h2>No series yet</h2>
<p>Load some history, forecast it, and the charts appear here:</p>
<pre>gpucast demo                                   # the bundled real sample, forecast and served
gpucast ingest hourly load.csv --series prod-us/llama-3.1-70b
gpucast forecast --all</pre>
<p>or over REST: <code>POST /v1/series/{name}/observations</code>, then
<code>POST /v1/series/{name}/forecast</code>. A GPU profile
(<code>POST /v1/gpu-profiles</code>) adds tomorrow's GPU plan.</p>
</section>"""


def chart_url(name: str, **params: str | int | None) -> str:
    """``/v1/series/{name}/plot.png?…`` with each path segment percent-encoded, ``/`` kept."""
    query = urlencode({k: v for k, v in params.items() if v is not None})
    path = f"/v1/series/{quote(name, safe='/')}/plot.png"
    return f"{path}?{query}" if query else path


def render_page(
    overview: Overview,
    *,
    metric: str = "requests",
    days: int = 7,
    now: datetime | None = None,
) -> str:
    """The whole page as one HTML string."""
    now = now or datetime.now(UTC)
    cards = [pool_card(p, now) for p in overview.pools]
    cards += [_card(s, s.plan.profile, metric, days, now) for s in overview.series]
    total = len(overview.series)
    return "\n".join(
        [
            "<!doctype html>",
            '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            "<title>gpucast — forecasts and GPU plans</title>",
            f"<style>{STYLE}{POOL_STYLE}</style></head>",
            f'<body data-images-total="{total}" data-images-loaded="0" data-images-failed="0">',
            _header(overview, metric, days, now),
            "<main>",
            *(cards or [EMPTY_STATE]),
            "</main>",
            _pager(overview, metric, days),
            "<footer>Charts: history, forecast with 80 % and 95 % intervals, the executed GPU "
            "schedule on the right axis (dashed: the formula alone). Times in UTC. Charts are "
            "PNGs from <code>/v1/series/{name}/plot.png</code>. Pool cards: "
            "<code>/v1/pools/{name}/plan</code> under the default plan parameters; "
            '"now" is the current UTC hour.</footer>',
            f"<script>{SCRIPT}</script>",
            "</body></html>",
        ]
    )


def _header(overview: Overview, metric: str, days: int, now: datetime) -> str:
    profile_options = "".join(
        f'<option value="{escape(p)}"{" selected" if p == overview.profile else ""}>'
        f"{escape(p)}</option>"
        for p in overview.profiles
    )
    metric_options = "".join(
        f'<option value="{m}"{" selected" if m == metric else ""}>{m}</option>' for m in METRICS
    )
    profile_select = (
        f'<label>GPU profile <select name="profile">{profile_options}</select></label>'
        if overview.profiles
        else '<span class="note">no GPU profile</span>'
    )
    return (
        "<header><h1>gpucast</h1>"
        f"<span>{_total(overview):,} series · {_pools(len(overview.pools))}"
        f"{now:%Y-%m-%d %H:%M} UTC</span>"
        '<a href="/docs">API docs</a>'
        f'<form method="get" action="/">{profile_select}'
        f'<label>metric <select name="metric">{metric_options}</select></label>'
        f'<input type="hidden" name="days" value="{int(days)}">'
        "<button>show</button></form></header>"
    )


def _total(overview: Overview) -> int:
    return overview.total_series if overview.total_series is not None else len(overview.series)


def _pager(overview: Overview, metric: str, days: int) -> str:
    """'series 51-100 of 1,234' with links to the pages beside it; nothing on a single page."""
    total, shown = _total(overview), len(overview.series)
    if shown >= total and overview.offset == 0:
        return ""
    page = overview.offset // PAGE_SIZE + 1
    query: dict[str, str | int] = {"metric": metric, "days": int(days)}
    if overview.profile is not None:
        query["profile"] = overview.profile
    links = []
    if page > 1:
        links.append(
            f'<a rel="prev" href="/?{escape(urlencode({**query, "page": page - 1}))}">'
            "&larr; previous</a>"
        )
    if overview.offset + shown < total:
        links.append(
            f'<a rel="next" href="/?{escape(urlencode({**query, "page": page + 1}))}">'
            "next &rarr;</a>"
        )
    first = overview.offset + 1 if shown else overview.offset
    return (
        f'<nav class="pager">series {first:,}–{overview.offset + shown:,} of {total:,} '
        f"{' · '.join(links)}</nav>"
    )


def _pools(count: int) -> str:
    return "" if count == 0 else f"{count} {'pool' if count == 1 else 'pools'} · "


def _card(
    summary: SeriesSummary, profile: str | None, metric: str, days: int, now: datetime
) -> str:
    name = escape(summary.name)
    # the chart's GPU line is sized on the card's band: band auto when its headroom choice is
    # stored (read, never calibrated, as the card did), else the fallback the card plans on
    # until a choice is stored, so chart and card agree
    sized = summary.plan.sized_band if summary.plan is not None else None
    if summary.plan is not None and (summary.plan.band_choice or {}).get("headroom"):
        sized = "auto"
    src = chart_url(summary.name, metric=metric, days=days, profile=profile, band=sized)
    rows = [("observations", f"{summary.observations:,} hours{_last_hour(summary)}")]
    for run in summary.runs:
        error = (
            f", backtest {escape((run.backtest_metric or 'error').upper())} "
            f"{run.backtest_error:.3g}"
            if run.backtest_error is not None
            else ""
        )
        rows.append((f"{run.metric} model", f"<b>{escape(run.model or '-')}</b>{error}"))
    if not summary.runs:
        rows.append(("forecast", '<span class="note">no forecast yet</span>'))
    elif summary.freshness is not None:
        age = _age(summary.freshness.created_at, now)
        rows.append(("forecast", freshness_html(summary.freshness, age)))
    if summary.plan.peak_gpus is not None:
        rows.append(("expected fleet", _expected(summary.plan)))
    rows.append(("floor peak", _peak(summary.plan)))
    if summary.plan.peak_gpus is not None and profile is not None:
        band = band_html(
            asked=summary.asked_band,
            sized=summary.plan.sized_band,
            choice=summary.plan.band_choice,
            pending=summary.calibration_pending,
            series=summary.name,
            profile=profile,
        )
        rows.append(("band", band))
    if profile is not None:
        rows.append(("plan replay", _replay(summary.replay, summary.name, profile)))
    if summary.comparison is not None:
        rows.append(("GPU types", comparison_html(summary.comparison)))
    details = "".join(f"<dt>{label}</dt><dd>{value}</dd>" for label, value in rows)
    alt = f"{metric} history, forecast and GPU plan of {summary.name}"
    classes = "card stale-plan" if summary.plan.stale else "card"
    return (
        f'<section class="{classes}" data-series="{name}"><h2>{name}</h2><dl>{details}</dl>'
        f'<img class="chart" src="{escape(src)}" alt="{escape(alt)}" loading="lazy" '
        'width="1000" height="480">'
        '<p class="chart-error">The chart did not load; open it directly to see why: '
        f'<a href="{escape(src)}">{escape(src)}</a></p></section>'
    )


def _last_hour(summary: SeriesSummary) -> str:
    if summary.last_hour is None:
        return ""
    return f", last {summary.last_hour:%Y-%m-%d %H:%M} UTC"


def _expected(plan: chart_data.PlanSummary) -> str:
    """What the deployment is expected to run tomorrow (the floor plus what the reactive
    trigger, the scale-down hold and the cold start add), or why it is not measured."""
    expected = plan.expected
    if expected is None or expected.fleet is None:
        note = expected.note if expected is not None else "not measured"
        return f'<span class="note">{escape(note)}</span>'
    fleet = expected.fleet
    cost = f", ${expected.cost.total_usd:,.0f}" if expected.cost is not None else ""
    return (
        f'<span class="peak">{fleet.gpu_hours:,.0f} GPU-hours{cost}</span> for '
        f"{len(fleet.mean)} h (P90 {fleet.gpu_hours_p90:,.0f}); peak "
        f"{count(int(fleet.p50.max()), 'GPU')} at P50, {count(int(fleet.p90.max()), 'GPU')} "
        f'at P90 <span class="note">({escape(expected.note)})</span>'
    )


def _peak(plan: chart_data.PlanSummary) -> str:
    if plan.peak_gpus is None:
        return f'<span class="note">{escape(plan.note or "no GPU plan")}</span>'
    peak = (
        f'<span class="peak">{count(plan.peak_gpus, "GPU")}</span> ({escape(plan.profile or "")})'
    )
    if plan.hours_note:
        peak += f' <span class="stale">{escape(plan.hours_note)}</span>'
    if not plan.stale:
        return peak
    trained = (
        f", trained until {_utc(plan.trained_until):%Y-%m-%d %H:%M} UTC"
        if plan.trained_until is not None
        else ""
    )
    return f'{peak} <span class="stale">{escape(chart_data.STALE_NOTE)}{trained}</span>'


def _replay(result: dict[str, Any] | None, series: str, profile: str) -> str:
    """The stored replay in one line, or the command that stores one."""
    if result is None:
        command = f"gpucast backtest {shlex.quote(series)} --profile {shlex.quote(profile)}"
        return f'<span class="note">none stored yet; run <code>{escape(command)}</code></span>'
    end = f"{_utc(result['end']):%Y-%m-%d %H:%M} UTC"
    band = str(result.get("params", {}).get("band", "?"))
    if band == "auto":  # the margins chosen night by night, in order of first use
        nights = result.get("gpucast_plans") or []
        chosen = dict.fromkeys(str(n.get("label") or n["band"]) for n in nights if n.get("band"))
        band += f" → {', '.join(chosen)}" if chosen else ""
    return (
        f"{escape(replay_summary(result))} "
        f'<span class="note">(replay to {end}, band {escape(band)})</span>'
    )


def _utc(value: Any) -> pd.Timestamp:
    stamp = pd.Timestamp(value)
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")


def _age(created_at: datetime | None, now: datetime) -> str:
    if created_at is None:
        return "-"
    hours = max(0.0, (now - created_at).total_seconds() / 3600)
    if hours < 1.5:
        text = f"{round(hours * 60)} min ago"
    elif hours < 48:
        text = f"{round(hours)} h ago"
    else:
        text = f"{count(round(hours / 24), 'day')} ago"
    # A nightly job should leave no forecast older than a day and a bit.
    return f'<span class="stale">{text}</span>' if hours > 30 else text
