"""The store's schema revisions: upgrading on open, where a database stands, and undoing the newest ones."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, inspect, text

from bot.core.errors import BadInput

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
HEAD_REVISION = "0024_fork_dashboard_issue"  # the newest migration (a test checks it is Alembic's head)
# pg_advisory_xact_lock key for schema changes: replicas starting together, and `sluice db downgrade`.
MIGRATION_LOCK_KEY = 0x534C_5549_4345_0001
FIRST_SENTENCE = re.compile(r"\.\s+(?=[A-Z`])")


@dataclass(frozen=True)
class Revision:
    """One migration: its id (what `alembic_version` records) and the first sentence of its docstring."""

    id: str
    doc: str


@dataclass(frozen=True)
class SchemaState:
    """Where a database stands: its revision (None before Sluice's first migration) and, without one, the
    tables it holds that are someone else's."""

    revision: str | None
    foreign_tables: tuple[str, ...] = ()

    @property
    def known(self) -> bool:
        return self.revision is None or self.revision in {r.id for r in known_revisions()}


@functools.cache  # the migration scripts ship with this Sluice: read once per process
def known_revisions() -> tuple[Revision, ...]:
    """Every migration this Sluice has, oldest first."""
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory.from_config(_config()).walk_revisions()
    return tuple(Revision(s.revision, _first_sentence(s.doc or "")) for s in reversed(list(scripts)))


def _first_sentence(doc: str) -> str:
    return FIRST_SENTENCE.split(" ".join(doc.split()), maxsplit=1)[0].removesuffix(".")


def migrate(engine: Engine) -> None:
    """Upgrade to head inside one transaction that holds a lock, so concurrent openers take turns."""
    with _locked(engine) as conn:
        revision = _revision(conn)
        if revision == HEAD_REVISION:
            return  # the usual case: importing and running Alembic would cost every command ~0.2 s
        if revision is None:
            _refuse_foreign(conn)
        elif revision not in {r.id for r in known_revisions()}:
            raise BadInput(
                f"the store is at schema revision {revision!r}, which this Sluice does not know "
                f"(its newest is {HEAD_REVISION!r}): a newer Sluice's store?",
                "run the Sluice that wrote it, or give another store (--database or SLUICE_DATABASE_URL); to "
                "roll back a release, run the newer one's `sluice db downgrade` first (deploy/README.md)",
            )
        from alembic import command

        command.upgrade(_config(conn), "head")


def state_of(engine: Engine) -> SchemaState:
    """Where the database stands, read without changing anything."""
    with engine.connect() as conn:
        revision = _revision(conn)
        foreign = tuple(sorted(inspect(conn).get_table_names())) if revision is None else ()
    return SchemaState(revision, foreign)


def undone_by(current: str, target: str) -> tuple[Revision, ...]:
    """The migrations that going from `current` back to `target` undoes, newest first; a clear error when
    `target` is not a revision this Sluice knows or is not older than `current`."""
    known = known_revisions()
    ids = [r.id for r in known]
    target = resolved(target)
    if current not in ids:
        raise BadInput(
            f"the store is at schema revision {current!r}, which this Sluice does not know",
            "run the downgrade with the Sluice release that wrote it",
        )
    if ids.index(target) >= ids.index(current):
        raise BadInput(
            f"the store is at {current!r}, not newer than {target!r}: nothing to undo",
            "give an older revision, or none: opening the store upgrades it",
        )
    return tuple(reversed(known[ids.index(target) + 1 : ids.index(current) + 1]))


def resolved(target: str) -> str:
    """The revision `target` names: its id, or a prefix of only one (`0018`)."""
    named = [r.id for r in known_revisions() if r.id.startswith(target)] if target else []
    if len(named) != 1:
        raise BadInput(
            f"{target!r} names {'no' if not named else 'more than one'} schema revision this Sluice knows",
            "give one that `sluice db status` lists, or its number (the release you roll back to names its "
            "newest in `sluice db status`)",
        )
    return named[0]


def downgrade(engine: Engine, target: str) -> tuple[Revision, ...]:
    """Undo the migrations newer than `target` in one transaction, under the migration lock; what was
    undone, newest first."""
    from alembic import command

    with _locked(engine) as conn:
        revision = _revision(conn)
        if revision is None:
            raise BadInput("the database holds no Sluice schema: nothing to undo", "check --database")
        undone = undone_by(revision, target)
        command.downgrade(_config(conn), resolved(target))
    return undone


@contextmanager
def _locked(engine: Engine) -> Iterator[Connection]:
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
        yield conn


def _config(conn: Connection | None = None) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if conn is not None:
        config.attributes["connection"] = conn
    return config


def _refuse_foreign(conn: Connection) -> None:
    """A database Alembic never migrated must be empty: Sluice adds its tables to no one else's."""
    found = sorted(inspect(conn).get_table_names())
    if found:
        shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
        raise BadInput(
            f"the database holds tables that are not Sluice's ({shown}) and no Sluice schema: Sluice will "
            "not add its tables to it",
            "give an empty database or an existing Sluice store (--database or SLUICE_DATABASE_URL)",
        )


def _revision(conn: Connection) -> str | None:
    """The schema revision Alembic recorded, or None in a database it has not migrated."""
    if not inspect(conn).has_table("alembic_version"):
        return None
    return conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one_or_none()
