"""The current UTC hour for tests whose expectations depend on which hour it is."""

from __future__ import annotations

import time

import pandas as pd

MARGIN = pd.Timedelta(seconds=90)


def settled_hour(margin: pd.Timedelta = MARGIN) -> pd.Timestamp:
    """The current UTC hour, at least ``margin`` before the next one begins.

    A test that loads data relative to "now" and then asks how many plan hours are ahead must
    not straddle an hour turn; closer than ``margin`` to one, wait until it has passed.
    """
    now = pd.Timestamp.now(tz="UTC")
    remaining = now.floor("h") + pd.Timedelta(hours=1) - now
    if remaining < margin:
        time.sleep(remaining.total_seconds() + 1)
        now = pd.Timestamp.now(tz="UTC")
    return now.floor("h")
