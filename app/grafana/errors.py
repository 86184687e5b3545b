"""The datasource's input error: a query it cannot answer as posted is a 400."""

from __future__ import annotations

from app.errors import InputError


class GrafanaInputError(InputError):
    """A query the datasource cannot answer as posted (unknown target, bad payload value)."""

    status_code = 400
