"""Keep third-party warnings and log lines off the console, but keep them (private)."""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

logger = logging.getLogger(__name__)


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


# What a captured library line means for an operator, or None when it does not matter to one
# (kept in the debug log only). Matched in order against "Category: message".
_TRANSLATIONS: tuple[tuple[re.Pattern[str], str | None], ...] = (
    # KPSS p-value beyond its table: the stationarity decision is only clearer, nothing to do.
    (re.compile(r"^InterpolationWarning:"), None),
    # Starting values are only where the optimiser begins.
    (re.compile(r"starting (autoregressive|seasonal autoregressive|MA|seasonal MA)"), None),
    (re.compile(r"^FutureWarning:|^DeprecationWarning:|^ValueWarning:"), None),
    (
        re.compile(r"^ConvergenceWarning:|failed to converge", re.I),
        "the fit did not fully converge; its intervals may be less reliable",
    ),
    (
        re.compile(r"terminated abnormally|optimization.*(error|fail)", re.I),
        "the optimiser stopped early; the fit may be poorer than usual",
    ),
    (
        re.compile(r"^RuntimeWarning:.*(overflow|divide by zero|invalid value)", re.I),
        "numerical trouble during the fit (overflow or division by zero)",
    ),
)


def operator_notes(model: str, lines: list[str]) -> list[str]:
    """Notes an operator can act on for the library ``lines`` captured while fitting ``model``:
    each meaningful kind once, in plain words; the rest only in the debug log."""
    if lines:
        logger.debug("%s: library output while fitting: %s", model, lines)
    meanings: dict[str, int] = {}
    for line in lines:
        meaning = next((text for pattern, text in _TRANSLATIONS if pattern.search(line)), None)
        if meaning is not None:
            meanings[meaning] = meanings.get(meaning, 0) + 1
    return [
        f"{model}: {meaning}" + (f" ({count} times)" if count > 1 else "")
        for meaning, count in meanings.items()
    ]
