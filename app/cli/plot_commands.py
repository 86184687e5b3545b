"""Sub-command: plot (a series chart as PNG)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from app.cli.shared import BANDS, whole_number
from app.common import options
from app.common.words import count
from app.errors import InputError


def register(sub: Any) -> None:
    plot = sub.add_parser(
        "plot",
        help="chart a series as PNG: history, forecast with 80/95 %% bands, GPU plan",
        description="Draw the last DAYS days of history, the latest forecast with its 80 % "
        "and 95 % intervals and, when a GPU profile exists, tomorrow's GPU plan on a "
        "second axis. Exit codes: 0 ok, 2 bad input or unknown series/profile, "
        "3 database unavailable.",
    )
    plot.add_argument("series", help="series name")
    plot.add_argument("-o", "--output", required=True, help="PNG file to write")
    plot.add_argument(
        "--metric",
        choices=("requests", "tokens"),
        default="requests",
        help="requests (shown as QPS) or tokens (tokens/s) (default %(default)s)",
    )
    plot.add_argument(
        "--days",
        type=whole_number,
        default=options.PLOT_DAYS,
        help=f"days of history, {options.PLOT_DAYS_MIN}-{options.PLOT_DAYS_MAX} "
        "(default %(default)s)",
    )
    plot.add_argument(
        "--profile",
        help="GPU profile (default: the series' deployment, else the first by name)",
    )
    plot.add_argument(
        "--band",
        choices=BANDS,
        default=options.PLOT_BAND,
        help="band the GPU plan is sized on (default %(default)s)",
    )
    plot.add_argument("--width", type=whole_number, default=1000, help="pixels (default 1000)")
    plot.add_argument("--height", type=whole_number, default=480, help="pixels (default 480)")
    plot.set_defaults(handler=cmd_plot)


def cmd_plot(args: argparse.Namespace) -> int:
    from app import plans
    from app.cli.shared import open_db
    from app.views import charts

    output = _output_path(args.output)
    if not options.PLOT_DAYS_MIN <= args.days <= options.PLOT_DAYS_MAX:
        raise InputError(
            f"--days must be between {options.PLOT_DAYS_MIN} and {options.PLOT_DAYS_MAX}, "
            f"got {args.days}"
        )
    if not (200 <= args.width <= 4000 and 150 <= args.height <= 3000):
        raise InputError("--width must be 200-4000 and --height 150-3000 pixels")
    database = open_db(args)
    try:
        with database.transaction() as session:
            data = charts.load_chart_data(
                session,
                series_name=args.series,
                metric=args.metric,
                days=args.days,
                profile_name=args.profile,
                params=plans.PlanParams(band=args.band),
            )
    finally:
        database.dispose()
    png = charts.render_png(data, width_px=args.width, height_px=args.height)
    output.write_bytes(png)
    plan = (
        f"peak {count(data.peak_gpus, 'GPU')} ({data.profile})"
        if data.peak_gpus is not None
        else data.plan_note
    )
    forecast = f"model {data.model}" if data.model else "no forecast yet"
    print(f"wrote {output} ({len(png) / 1024:.0f} KiB): {args.series}, {forecast}, {plan}")
    return 0


def _output_path(name: str) -> Path:
    path = Path(name)
    if path.is_dir():
        raise InputError(f"{name} is a directory; give a file name like chart.png")
    if not path.parent.exists():
        raise InputError(f"directory {path.parent} does not exist")
    return path
