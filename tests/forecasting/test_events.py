from __future__ import annotations

import pandas as pd
import pytest

from forecasting import InvalidParameterError, validate_events


def test_valid_events_are_normalised_to_utc() -> None:
    events = validate_events(
        pd.DataFrame(
            {"name": ["launch"], "start": ["2026-01-01 10:00"], "end": ["2026-01-01 12:00"]}
        )
    )
    assert str(events.start.dt.tz) == "UTC" and events.multiplier.isna().all()
    assert validate_events(None) is None


@pytest.mark.parametrize(
    ("frame", "match"),
    [
        (pd.DataFrame({"name": ["x"], "start": ["2026-01-01"]}), r"lack column\(s\) \['end'\]"),
        (
            pd.DataFrame({"name": ["x"], "start": ["2026-01-02"], "end": ["2026-01-01"]}),
            "event 'x' ends at or before it starts",
        ),
        (
            pd.DataFrame(
                {"name": ["x"], "start": ["2026-01-01"], "end": ["2026-01-02"], "multiplier": [0.0]}
            ),
            "multipliers must be positive",
        ),
        (
            pd.DataFrame({"name": ["x"], "start": ["soon"], "end": ["2026-01-02"]}),
            "events.start is not a timestamp",
        ),
    ],
)
def test_invalid_events(frame, match) -> None:
    with pytest.raises(InvalidParameterError, match=match):
        validate_events(frame)
