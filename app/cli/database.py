"""What every sub-command needs to reach the database (one module the command modules all
import, so they never import each other)."""

from __future__ import annotations

import argparse

from app.settings import Settings, get_settings


def settings_from(args: argparse.Namespace) -> Settings:
    overrides = {"database_url": args.database_url} if args.database_url else {}
    return get_settings(**overrides)


def open_db(args: argparse.Namespace, *, migrate: bool | None = None):  # type: ignore[no-untyped-def]
    """Open the database; SQLite is migrated automatically on first use."""
    from app.db import open_database

    settings = settings_from(args)
    database = open_database(settings.database_url, timeouts=settings.database_timeouts(jobs=True))
    database.ensure_schema(
        auto_migrate=settings.should_auto_migrate if migrate is None else migrate
    )
    return database
