"""Keep third-party warnings and log lines off the console, but keep them (private)."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager


class _Recorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def captured(*logger_names: str) -> Iterator[list[str]]:
    """Record warnings and WARNING+ log records of ``logger_names`` instead of printing them.

    Yields a list that, on exit, holds one line per captured warning or log record. The
    loggers' handlers, level and propagation are restored afterwards.
    """
    lines: list[str] = []
    recorder = _Recorder()
    saved = []
    for name in logger_names:
        log = logging.getLogger(name)
        saved.append((log, log.handlers[:], log.propagate))
        log.handlers = [recorder]
        log.propagate = False
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield lines
    finally:
        for log, handlers, propagate in saved:
            log.handlers = handlers
            log.propagate = propagate
        lines.extend(f"{type(w.message).__name__}: {w.message}" for w in caught)
        lines.extend(
            f"{r.name}: {r.getMessage()}" for r in recorder.records if r.levelno >= logging.WARNING
        )
