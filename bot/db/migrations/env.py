"""Alembic environment for Sluice's store; `bot.db.store.Store.open` runs it programmatically."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

config = context.config


def run_online() -> None:
    # Store.open hands over a connection already inside a transaction (and holding the migration lock).
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(config.get_main_option("sqlalchemy.url") or "")
    with engine.begin() as conn:
        context.configure(connection=conn, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


def run_offline() -> None:
    context.configure(url=config.get_main_option("sqlalchemy.url"), literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
