"""``gpucast demo``: load the bundled real sample into the embedded database."""

from __future__ import annotations

from datetime import UTC, datetime
from importlib import resources

import pandas as pd

from app import ingest
from app.db import open_database
from app.settings import Settings

DEMO_SERIES = "demo/servegen-m-small"
SAMPLE_FILE = "servegen_m_small_hourly.csv"


def load_sample(*, now: datetime | None = None) -> pd.DataFrame:
    """The bundled ServeGen sample as a canonical frame, shifted to end at the last full hour."""
    with resources.files("app.data").joinpath(SAMPLE_FILE).open("rb") as handle:
        frame = ingest.read_hourly_csv(handle, ingest.HourlyOptions(series=DEMO_SERIES))
    last_full_hour = pd.Timestamp(now or datetime.now(UTC)).floor("h") - pd.Timedelta(hours=1)
    frame["hour"] = frame["hour"] + (last_full_hour - frame["hour"].max())
    return frame


def run_demo(settings: Settings) -> ingest.IngestSummary:
    database = open_database(settings.database_url)
    database.ensure_schema(auto_migrate=settings.should_auto_migrate)
    frame = load_sample()
    with database.transaction() as session:
        summary = ingest.store(session, frame, create_series=True)
    database.dispose()
    print(f"gpucast demo — database: {settings.database_url}")
    print(
        "loaded 14 days of real LLM traffic (ServeGen m-small, Apache-2.0; see app/data/SOURCES.md)"
    )
    print("timestamps shifted so the sample ends at the last full hour")
    print("\n".join(summary.lines()))
    peak = frame.loc[frame["requests"].idxmax()]
    print(
        f"busiest hour: {peak['hour']:%Y-%m-%d %H:00}Z with {peak['requests'] / 3600:,.0f} req/s "
        f"on average; mean {frame['requests'].mean() / 3600:,.0f} req/s"
    )
    return summary
