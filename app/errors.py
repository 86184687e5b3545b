"""Exception tree of the service layer.

AppError
├── NotFoundError        (LookupError)   -> 404
├── ConflictError                          -> 409
├── InputError           (ValueError)     -> 422 / CLI exit 2
│   └── IngestError                        bad file or body, names row and column
├── PayloadTooLargeError                   -> 413
├── AuthError                              -> 401
└── DatabaseUnavailableError               -> 503
"""

from __future__ import annotations


class AppError(Exception):
    """Base class for gpucast service errors; ``status_code`` drives the HTTP mapping."""

    status_code = 400


class NotFoundError(AppError, LookupError):
    status_code = 404


class ConflictError(AppError):
    status_code = 409


class InputError(AppError, ValueError):
    status_code = 422


class IngestError(InputError):
    """A file or request body failed validation; nothing of it was written."""


class PayloadTooLargeError(AppError):
    status_code = 413


class UnsupportedMediaTypeError(AppError):
    status_code = 415


class AuthError(AppError):
    status_code = 401


class DatabaseUnavailableError(AppError):
    status_code = 503


class TooManyRequestsError(AppError):
    status_code = 429
