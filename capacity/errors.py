"""Exceptions raised by gpucast.capacity.

The tree::

    CapacityError
    ├── InvalidParameterError (also ValueError)   a parameter is out of range or malformed
    │   ├── ContextLengthError                    prompt + completion beyond the context length
    │   └── ExtrapolationError                    a mix far beyond the measured range
    ├── UnknownNameError (also LookupError)       a GPU, model or precision name is not known
    ├── DoesNotFitError (also ValueError)         a model does not fit even at the largest TP
    ├── UnstableQueueError (also ValueError)      arrivals exceed what the servers can serve
    ├── SLOUnreachableError (also ValueError)     no measured operating point meets the SLO
    │   └── SloUnreachableError                   a mix misses the SLO even at the lowest load
    └── LoadTestFormatError (also ValueError)     a load-test file is malformed (names file,
                                                  row and column)

Callers that only care whether the library rejected their input catch ``CapacityError``.
"""

from __future__ import annotations

__all__ = [
    "CapacityError",
    "ContextLengthError",
    "DoesNotFitError",
    "ExtrapolationError",
    "InvalidParameterError",
    "LoadTestFormatError",
    "SLOUnreachableError",
    "SloUnreachableError",
    "UnknownNameError",
    "UnstableQueueError",
]


class CapacityError(Exception):
    """Base class of every error raised by gpucast.capacity."""


class InvalidParameterError(CapacityError, ValueError):
    """A parameter is out of range, missing or not a number."""


class ContextLengthError(InvalidParameterError):
    """Prompt plus completion tokens per request exceed the model's context length."""


class ExtrapolationError(InvalidParameterError):
    """A mix lies far beyond the measured range of a load test (answered only when asked)."""


class UnknownNameError(CapacityError, LookupError):
    """A catalog name (GPU, model, precision, policy) is not known."""


class DoesNotFitError(CapacityError, ValueError):
    """Weights plus KV cache do not fit in GPU memory even at the largest tensor-parallel degree."""


class UnstableQueueError(CapacityError, ValueError):
    """The offered load is at or above the service capacity, so the queue grows without bound."""


class SLOUnreachableError(CapacityError, ValueError):
    """No operating point of a load-test table meets the latency SLO."""


class SloUnreachableError(SLOUnreachableError):
    """A prompt/completion mix violates the latency SLO even at the lowest load (concurrency 1).

    ``limit`` is ``"ttft"`` or ``"tpot"``: the limit missed at the lowest load;
    ``value_s`` the p95 latency there and ``limit_s`` the SLO it exceeds.
    """

    def __init__(self, message: str, *, limit: str, value_s: float, limit_s: float) -> None:
        super().__init__(message)
        self.limit = limit
        self.value_s = value_s
        self.limit_s = limit_s


class LoadTestFormatError(CapacityError, ValueError):
    """A load-test file cannot be read: the message names the file, the row and the column."""
