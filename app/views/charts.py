"""Charts of one series: history, forecast with its 80/95 % bands, and the GPU plan, as PNG.

The GPU plan on the right axis is the executed schedule (cold-start lead, scale-down hold,
floor, quota); where the formula alone (``raw_gpus``) asks for a different count it is drawn
dashed, so the held dips and the quota's cuts are visible.

:func:`load_chart_data` (in :mod:`app.views.chart_data`) reads the database; :func:`render_png`
draws. Rendering uses matplotlib's object API on the Agg canvas, never pyplot, so no figure
state is global; a lock serialises drawing because matplotlib's font and text caches are not
documented as thread-safe and the server renders from a thread pool.
"""

from __future__ import annotations

import hashlib
import io
import textwrap
import threading
from collections import OrderedDict

import pandas as pd
from matplotlib import dates as mdates
from matplotlib import ticker
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from app.common.words import count
from app.views.chart_data import (
    METRIC_UNITS,
    STALE_NOTE,
    ChartData,
    PlanSummary,
    default_profile,
    load_chart_data,
    summarize_plan,
)

__all__ = [
    "METRIC_UNITS",
    "STALE_NOTE",
    "ChartData",
    "PlanSummary",
    "chart_subtitle",
    "default_profile",
    "fingerprint",
    "load_chart_data",
    "render_png",
    "summarize_plan",
]

HISTORY_COLOR = "#374151"
FORECAST_COLOR = "#2563eb"
PLAN_COLOR = "#d97706"
SEPARATOR = "  ·  "
_RENDER_LOCK = threading.Lock()


def fingerprint(data: ChartData, *, width_px: int = 1000, height_px: int = 480) -> str:
    """A digest of everything the chart shows: equal digests mean identical PNGs."""
    digest = hashlib.sha256()
    for frame in (data.history, data.forecast, data.plan):
        if frame is not None:
            digest.update(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
        digest.update(b"|")
    meta = (
        data.series,
        data.metric,
        data.model,
        data.backtest_metric,
        data.backtest_error,
        str(data.trained_until),
        data.profile,
        data.peak_gpus,
        data.plan_band,
        data.plan_note,
        data.plan_stale,
        width_px,
        height_px,
    )
    digest.update(repr(meta).encode())
    return digest.hexdigest()[:32]


class _PngCache:
    """A small thread-safe LRU of rendered charts keyed by their fingerprint."""

    def __init__(self, size: int = 64) -> None:
        self._items: OrderedDict[str, bytes] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: str) -> bytes | None:
        with self._lock:
            png = self._items.get(key)
            if png is not None:
                self._items.move_to_end(key)
            return png

    def put(self, key: str, png: bytes) -> None:
        with self._lock:
            self._items[key] = png
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)


_CACHE = _PngCache()


def render_png(
    data: ChartData, *, width_px: int = 1000, height_px: int = 480, use_cache: bool = True
) -> bytes:
    """Draw the chart and return PNG bytes (``width_px`` x ``height_px`` pixels).

    Drawing takes a few hundred milliseconds, so charts are memoised by :func:`fingerprint`.
    """
    key = fingerprint(data, width_px=width_px, height_px=height_px)
    if use_cache and (png := _CACHE.get(key)) is not None:
        return png
    dpi = 100
    with _RENDER_LOCK:
        figure = Figure(figsize=(width_px / dpi, height_px / dpi), dpi=dpi, layout="constrained")
        FigureCanvasAgg(figure)
        _draw(figure, data)
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", metadata={"Software": None})
    png = buffer.getvalue()
    _CACHE.put(key, png)
    return png


def _naive_utc(values: pd.Series) -> pd.DatetimeIndex:
    # matplotlib plots naive datetime64 as UTC; the axis formatter is told so explicitly.
    return pd.DatetimeIndex(pd.to_datetime(values, utc=True)).tz_localize(None)


def _draw(figure: Figure, data: ChartData) -> None:
    label, unit = METRIC_UNITS[data.metric]
    ax = figure.add_subplot()
    figure.suptitle(f"{data.series} — {data.metric} ({unit})", x=0.01, ha="left", fontsize=13)
    # Wrap the subtitle to the axes width: the figure less both axis labels, ~6 px a character.
    width_chars = max(30, int((figure.get_figwidth() * figure.dpi - 150) / 6))
    # Break lines only between the parts: spaces inside a part become non-breaking.
    parts = [part.replace(" ", "\u00a0") for part in chart_subtitle(data).split(SEPARATOR)]
    subtitle = textwrap.fill(
        SEPARATOR.join(parts), width=width_chars, break_on_hyphens=False, break_long_words=False
    )
    ax.set_title(subtitle, loc="left", fontsize=9, color="#4b5563")
    handles = []
    if len(data.history):
        (line,) = ax.plot(
            _naive_utc(data.history["hour"]),
            data.history["value"],
            color=HISTORY_COLOR,
            linewidth=1.2,
            label="history",
        )
        handles.append(line)
    if data.forecast is not None and len(data.forecast):
        handles += _draw_forecast(ax, data)
    if not handles:
        ax.text(0.5, 0.5, "no observations yet", transform=ax.transAxes, ha="center", va="center")
    if data.plan is not None and len(data.plan):
        handles += _draw_plan(ax, data)
    ax.set_ylabel(f"{label} ({unit})")
    ax.set_xlabel("time (UTC)")
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(_short_number))
    locator = mdates.AutoDateLocator(tz="UTC", minticks=4, maxticks=10)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz="UTC"))
    ax.grid(True, color="#e5e7eb", linewidth=0.8)
    ax.set_axisbelow(True)
    ax.spines["top"].set_visible(False)
    if handles:
        labels = [str(h.get_label()) for h in handles]
        figure.legend(
            handles=handles,
            loc="outside lower center",
            ncols=_legend_columns(labels, width_px=figure.get_figwidth() * figure.dpi),
            frameon=False,
            fontsize="small",
        )


def _legend_columns(labels: list[str], *, width_px: float) -> int:
    """The most legend columns that fit the figure width."""
    for columns in range(len(labels), 1, -1):
        # matplotlib fills column by column: the first len % columns columns get one more.
        rows, longer = divmod(len(labels), columns)
        sizes = [rows + 1] * longer + [rows] * (columns - longer)
        starts = [sum(sizes[:i]) for i in range(columns)]
        chunks = [labels[start : start + size] for start, size in zip(starts, sizes, strict=True)]
        # About 6.5 px per character at the "small" font size, plus the line sample and padding.
        needed = sum(max(len(label) for label in chunk) * 6.5 + 50 for chunk in chunks)
        if needed <= width_px:
            return columns
    return 1


def _draw_forecast(ax, data: ChartData) -> list:  # type: ignore[no-untyped-def]
    forecast = data.forecast
    assert forecast is not None
    hours = _naive_utc(forecast["ds"])
    band95 = ax.fill_between(
        hours, forecast["lo_95"], forecast["hi_95"], color=FORECAST_COLOR, alpha=0.13, lw=0
    )
    band80 = ax.fill_between(
        hours, forecast["lo_80"], forecast["hi_80"], color=FORECAST_COLOR, alpha=0.28, lw=0
    )
    (line,) = ax.plot(hours, forecast["yhat"], color=FORECAST_COLOR, linewidth=1.8)
    ax.axvline(hours[0], color="#9ca3af", linestyle="--", linewidth=0.9)
    ax.annotate(
        "forecast",
        xy=(hours[0], 1),
        xycoords=("data", "axes fraction"),
        xytext=(4, -4),
        textcoords="offset points",
        va="top",
        fontsize=8,
        color="#6b7280",
    )
    line.set_label(f"forecast ({data.model})" if data.model else "forecast")
    band80.set_label("80 % interval")
    band95.set_label("95 % interval")
    return [line, band80, band95]


def _draw_plan(ax, data: ChartData) -> list:  # type: ignore[no-untyped-def]
    """The executed GPU schedule as a solid step line and, dashed, the formula's own count
    where it differs (a held dip, a quota cut)."""
    plan = data.plan
    assert plan is not None
    hours = _plan_steps(plan["hour"])
    executed = _step_values(plan["gpus"])
    right = ax.twinx()
    (line,) = right.step(hours, executed, where="post", color=PLAN_COLOR, linewidth=1.8)
    stale = f", {STALE_NOTE}" if data.plan_stale else ""
    line.set_label(
        f"GPUs executed ({data.profile}, {data.plan_band}, peak {data.peak_gpus}{stale})"
    )
    handles = [line]
    top = max(executed)
    if "raw_gpus" in plan and (plan["raw_gpus"] != plan["gpus"]).any():
        raw = _step_values(plan["raw_gpus"])
        (dashed,) = right.step(
            hours, raw, where="post", color=PLAN_COLOR, linewidth=1.2, linestyle="--", alpha=0.8
        )
        dashed.set_label("GPUs by the formula alone")
        handles.append(dashed)
        top = max(top, max(raw))
    right.set_ylabel(f"GPUs ({data.profile}; solid: executed)", color=PLAN_COLOR)
    right.tick_params(axis="y", colors=PLAN_COLOR)
    right.set_ylim(0, top * 1.25 + 1)
    right.yaxis.set_major_locator(ticker.MaxNLocator(integer=True))
    right.spines["top"].set_visible(False)
    return handles


def _plan_steps(hours: pd.Series) -> list:
    # Repeat the last hour one hour on so the final planned hour is drawn as a full step.
    steps = list(_naive_utc(hours))
    return [*steps, steps[-1] + pd.Timedelta(hours=1)]


def _step_values(values: pd.Series) -> list[int]:
    counts = [int(v) for v in values]
    return [*counts, counts[-1]]


def _short_number(value: float, _position: int | None = None) -> str:
    """Tick labels like 0.75, 12, 3.4k, 1.2M (SI prefixes, but never milli)."""
    for scale, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def chart_subtitle(data: ChartData) -> str:
    """The line under the title: model, backtest error, training cut-off and peak GPUs."""
    if data.forecast is None:
        parts = ["no forecast yet"]
    else:
        parts = [f"model {data.model}"]
        if data.backtest_error is not None:
            parts.append(
                f"backtest {(data.backtest_metric or 'error').upper()} {data.backtest_error:.3g}"
            )
        if data.trained_until is not None:
            parts.append(f"trained until {pd.Timestamp(data.trained_until):%Y-%m-%d %H:%M} UTC")
    if data.plan is not None:
        parts.append(
            f"tomorrow's peak {count(data.peak_gpus or 0, 'GPU')} executed ({data.profile})"
        )
        if data.plan_stale:
            parts.append(STALE_NOTE)
    elif data.plan_note:
        parts.append(data.plan_note)
    return SEPARATOR.join(parts)
