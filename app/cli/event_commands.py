"""Sub-command: events (the business calendar: promotions, launches, holidays), beside
``/v1/events``. Exit codes: 0 ok, 2 bad input or unknown event/series, 3 database unavailable."""

from __future__ import annotations

import argparse
import json
from typing import Any

from app.cli.shared import number, open_db, whole_number
from app.errors import InputError

EXIT_CODES = "Exit codes: 0 ok, 2 bad input or unknown event/series, 3 database unavailable."


def register(sub: Any) -> None:
    events = sub.add_parser(
        "events",
        help="business calendar: list, add, delete events",
        description="Promotions, launches and holidays: the forecast models them (Prophet "
        "holidays) and Grafana shows them as annotations. " + EXIT_CODES,
    )
    events_sub = events.add_subparsers(dest="events_command", required=True, metavar="ACTION")
    listing = events_sub.add_parser("list", help="list events (oldest first)")
    listing.add_argument("--series", help="only this series' events and the global ones")
    listing.add_argument("--json", action="store_true", help="print the API's JSON")
    listing.set_defaults(handler=cmd_events_list)

    add = events_sub.add_parser("add", help="add an event; prints its id")
    add.add_argument("name", help="what happens, e.g. 'black friday'")
    add.add_argument("--start", required=True, help="ISO 8601 with a zone, e.g. 2026-11-27T00:00Z")
    add.add_argument("--end", required=True, help="ISO 8601 with a zone, after --start")
    add.add_argument("--series", help="the series it affects (default: every series)")
    add.add_argument("--multiplier", help="expected load multiplier, (0, 1000]")
    add.add_argument("--description", help="free text")
    add.set_defaults(handler=cmd_events_add)

    delete = events_sub.add_parser("delete", help="delete an event by id")
    delete.add_argument("id", type=whole_number, help="the event's id (see 'gpucast events list')")
    delete.set_defaults(handler=cmd_events_delete)


def _validated(args: argparse.Namespace) -> Any:
    from pydantic import ValidationError

    from app.api.schemas import EventCreate

    body = {
        "name": args.name,
        "start": args.start,
        "end": args.end,
        "series": args.series,
        "multiplier": number(args.multiplier, "--multiplier"),
        "description": args.description,
    }
    try:
        return EventCreate.model_validate(body)
    except ValidationError as exc:
        error = exc.errors(include_url=False, include_input=False)[0]
        where = f"--{error['loc'][0]}" if error["loc"] else "event"
        message = str(error["msg"]).removeprefix("Value error, ")
        raise InputError(f"{where}: {message}") from None


def cmd_events_add(args: argparse.Namespace) -> int:
    from app.db import repository

    body = _validated(args)
    database = open_db(args)
    try:
        with database.transaction() as session:
            event = repository.create_event(
                session,
                name=body.name,
                start=body.start,
                end=body.end,
                series_name=body.series,
                multiplier=body.multiplier,
                description=body.description,
            )
            event_id = event.id
    finally:
        database.dispose()
    print(f"event {event_id} added: {body.name}")
    return 0


def cmd_events_list(args: argparse.Namespace) -> int:
    from app.api.schemas import EventOut
    from app.db import repository

    database = open_db(args)
    try:
        with database.transaction() as session:
            events = [
                EventOut(
                    id=e.id,
                    name=e.name,
                    start=e.start,
                    end=e.end,
                    series=n,
                    multiplier=e.multiplier,
                    description=e.description,
                )
                for e, n in repository.list_events(
                    session, series_name=args.series, start=None, end=None
                )
            ]
    finally:
        database.dispose()
    if args.json:
        print(json.dumps([e.model_dump(mode="json") for e in events], indent=2))
        return 0
    if not events:
        print("no events; add one with 'gpucast events add NAME --start ISO --end ISO'")
        return 0
    print(f"{'ID':>5}  {'START (UTC)':<16}  {'END (UTC)':<16}  {'SERIES':<20}  {'x':>6}  NAME")
    for e in events:
        multiplier = f"{e.multiplier:g}" if e.multiplier is not None else "-"
        print(
            f"{e.id:>5}  {e.start:%Y-%m-%d %H:%M}  {e.end:%Y-%m-%d %H:%M}  "
            f"{e.series or '(all)':<20}  {multiplier:>6}  {e.name}"
        )
    return 0


def cmd_events_delete(args: argparse.Namespace) -> int:
    from app.db import repository

    if not 1 <= args.id <= 2**31 - 1:
        raise InputError(f"no event {args.id}: ids are 1 to {2**31 - 1}")
    database = open_db(args)
    try:
        with database.transaction() as session:
            repository.delete_event(session, event_id=args.id)
    finally:
        database.dispose()
    print(f"event {args.id} deleted")
    return 0
