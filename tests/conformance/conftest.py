"""The conformance suite checks gpucast's outputs against its clients' own rules; the
dashboard checks run against the app, on SQLite and PostgreSQL, with the app's fixtures."""

from tests.app.conftest import (  # noqa: F401 - fixtures shared with the app tests
    client,
    database,
    database_url,
    postgres_migrated,
    settings,
    sqlite_template,
)
