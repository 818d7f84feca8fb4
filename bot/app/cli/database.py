"""`sluice db`: where the store's schema stands, and undoing its newest migrations to roll back a release."""

from __future__ import annotations

import argparse
import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from sqlalchemy import Engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from bot.core.errors import BadInput, SluiceError, first_line
from bot.db.revisions import (
    HEAD_REVISION,
    Revision,
    SchemaState,
    downgrade,
    known_revisions,
    resolved,
    state_of,
    undone_by,
)
from bot.db.store import default_database_url, engine_for

T = TypeVar("T")
DOC_WIDTH = 76  # of a migration's first sentence in a listing: an id and that fit in 110 columns
GIVEN_BY = "--database or SLUICE_DATABASE_URL"
STORE_URLS = "sqlite:///PATH or postgresql+psycopg://USER@HOST/DB"
DATABASE_HELP = "the store (default: $SLUICE_DATABASE_URL, else the SQLite file)"
STOP_FIRST = (
    "back up the store first (deploy/README.md, Backups) and stop every Sluice service that uses it, then "
    "run this again with --yes"
)


def shown_url(url: str | None) -> str:
    """The store's URL as it may be printed: without its password."""
    try:
        return make_url(url or default_database_url()).render_as_string(hide_password=True)
    except (SQLAlchemyError, ValueError):
        return "the given database URL"


def store_failure(
    url: str | None, exc: BaseException, *, doing: str = "open", given_by: str = GIVEN_BY
) -> SluiceError:
    """The error for a store that cannot be opened or used: which store (without its password), what failed,
    and what to check."""
    where = f"cannot {doing} the store at {shown_url(url)}"
    if isinstance(exc, ImportError):  # a driver Sluice does not install, e.g. postgresql+psycopg2://
        return BadInput(
            f"{where}: its driver is not installed ({exc.name or first_line(exc)})",
            f"check {given_by}: Sluice speaks to PostgreSQL through psycopg 3 (postgresql+psycopg://USER@HOST/DB)",
        )
    return SluiceError(
        f"{where}: {type(exc).__name__}: {first_line(exc)}", f"check {given_by} ({STORE_URLS})"
    )


def add_parser(sub: argparse._SubParsersAction) -> None:
    db = sub.add_parser(
        "db", help="the store's schema: where it stands, and rolling it back for an older release"
    )
    commands = db.add_subparsers(dest="db_command", required=True, metavar="{status,downgrade}")
    status = commands.add_parser(
        "status", help="the store's schema revision and the ones this Sluice knows (changes nothing)"
    )
    status.add_argument("--database", help=DATABASE_HELP)
    status.add_argument("--json", action="store_true", help="the same as JSON")
    status.set_defaults(run=cmd_status)
    back = commands.add_parser(
        "downgrade", help="undo the migrations newer than a revision, for the older release that knows it"
    )
    back.add_argument("--to", required=True, metavar="REVISION", help="the revision to go back to")
    back.add_argument("--database", help=DATABASE_HELP)
    back.add_argument("--yes", action="store_true", help="do it (without: say what it would undo)")
    back.set_defaults(run=cmd_downgrade)


def cmd_status(args: argparse.Namespace) -> int:
    """Exit 0 when this Sluice can use the store (empty, older, or at its newest revision), else 1."""
    state = SchemaState(None) if missing_file(args.database) else _on_store(args.database, state_of)
    usable = state.known and not state.foreign_tables
    if args.json:
        print(json.dumps(_status_json(args.database, state), indent=2))
    else:
        print(f"Store: {shown_url(args.database)}\nSchema: {_verdict(state)}\n")
        print("\n".join(_listing(known_revisions(), state.revision)))
    return 0 if usable else 1


def cmd_downgrade(args: argparse.Namespace) -> int:
    state = SchemaState(None) if missing_file(args.database) else _on_store(args.database, state_of)
    if state.revision is None:
        raise BadInput(
            f"{shown_url(args.database)} holds no Sluice schema: nothing to undo", "check --database"
        )
    undone = undone_by(state.revision, args.to)  # a bad --to is refused before anything changes
    target = resolved(args.to)
    if not args.yes:
        print(f"Going back from {state.revision} to {target} undoes (newest first):")
        print("\n".join(_listing(undone, None)))
        print(f"\nNothing was changed: {STOP_FIRST}.")
        return 0
    undone = _on_store(args.database, lambda engine: downgrade(engine, target))
    print(f"Undid {len(undone)} migration{'s' * (len(undone) != 1)}: " + ", ".join(r.id for r in undone))
    print(f"The store is at {target}: run the Sluice release whose newest migration that is.")
    return 0


def _verdict(state: SchemaState) -> str:
    if state.revision is None and state.foreign_tables:
        shown = ", ".join(state.foreign_tables[:5]) + (" …" if len(state.foreign_tables) > 5 else "")
        return f"none, and tables that are not Sluice's ({shown}): Sluice will not use this database"
    if state.revision is None:
        return "none yet (an empty database): the first sluice command that opens it creates the schema"
    if state.revision == HEAD_REVISION:
        return f"{state.revision}, the newest this Sluice knows"
    if not state.known:
        return (
            f"{state.revision}, which this Sluice does not know (its newest is {HEAD_REVISION}): a newer "
            "release wrote it; that release's `sluice db downgrade` takes it back"
        )
    behind = len(undone_by(HEAD_REVISION, state.revision))
    return (
        f"{state.revision}, {behind} migration{'s' * (behind != 1)} behind this Sluice's newest "
        f"({HEAD_REVISION}): the first sluice command that opens the store upgrades it"
    )


def _listing(revisions: tuple[Revision, ...], current: str | None) -> Iterator[str]:
    width = max((len(r.id) for r in revisions), default=0)
    for r in revisions:
        mark = "*" if r.id == current else " "
        doc = r.doc if len(r.doc) <= DOC_WIDTH else r.doc[: DOC_WIDTH - 1].rstrip() + "…"
        yield f"{mark} {r.id:<{width}}  {doc}".rstrip()


def _status_json(url: str | None, state: SchemaState) -> dict[str, object]:
    return {
        "store": shown_url(url),
        "revision": state.revision,
        "known": state.known,
        "foreign_tables": list(state.foreign_tables),
        "newest": HEAD_REVISION,
        "revisions": [{"id": r.id, "doc": r.doc} for r in known_revisions()],
    }


def missing_file(url: str | None) -> str | None:
    """The path of a SQLite store whose file is not there yet (opening it would create it); None for any
    other store, or a URL that does not parse (opening it says what is wrong with it)."""
    try:
        parsed = make_url(url or default_database_url())
    except (SQLAlchemyError, ValueError):
        return None
    path = parsed.database
    if parsed.get_backend_name() != "sqlite" or path in (None, "", ":memory:") or Path(path).exists():
        return None
    return path


def _on_store(url: str | None, work: Callable[[Engine], T]) -> T:
    """`work` on an engine for the store, its failure to connect a clear error naming the store."""
    with _engine(url) as engine:
        try:
            return work(engine)
        except (SQLAlchemyError, OSError, sqlite3.Error) as exc:
            raise store_failure(url, exc, doing="use") from exc


@contextmanager
def _engine(url: str | None) -> Iterator[Engine]:
    try:
        engine = engine_for(url)
    except (SQLAlchemyError, ValueError, ImportError) as exc:
        raise store_failure(url, exc) from exc
    try:
        yield engine
    finally:
        engine.dispose()
