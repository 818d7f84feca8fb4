"""Shared fixtures. Databases: `database_url` runs a test once on SQLite and once on PostgreSQL."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from bot.db.store import Store, normalise_url

POSTGRES_URL_ENV = "SLUICE_TEST_POSTGRES_URL"
DEFAULT_TEST_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def running_in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture(autouse=True)
def private_state_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands that fall back to the default store (`status`, `pick`) write under a test directory, never
    under the home of whoever runs the tests."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.getbasetemp() / "state"))
    monkeypatch.delenv("SLUICE_DATABASE_URL", raising=False)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Engine]:
    """An engine on the test PostgreSQL. Missing server: the test fails in CI, is skipped elsewhere."""
    url = os.environ.get(POSTGRES_URL_ENV) or DEFAULT_TEST_POSTGRES_URL
    try:
        engine = create_engine(normalise_url(url), poolclass=NullPool, connect_args={"connect_timeout": 5})
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except (SQLAlchemyError, ImportError) as exc:
        reason = f"PostgreSQL is not reachable at {make_url(url)!r} (set {POSTGRES_URL_ENV}): {exc}"
        if running_in_ci():
            pytest.fail(f"{reason}. CI must run the PostgreSQL tests, never skip them.", pytrace=False)
        pytest.skip(reason)
    yield engine
    engine.dispose()


@pytest.fixture
def postgres_url(postgres_server: Engine) -> Iterator[str]:
    """A URL whose search_path is a fresh schema (Alembic's version table lands there too); dropped after."""
    with fresh_schema(postgres_server) as url:
        yield url


@contextlib.contextmanager
def fresh_schema(server: Engine) -> Iterator[str]:
    """A URL on the test PostgreSQL whose search_path is a new schema of its own, dropped at the end."""
    schema = f"sluice_test_{uuid.uuid4().hex[:12]}"
    with server.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = server.url.update_query_dict({"options": f"-csearch_path={schema}"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with server.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))


@pytest.fixture
def sqlite_url(tmp_path: os.PathLike[str]) -> str:
    return f"sqlite:///{os.path.join(tmp_path, 'sluice.db')}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest) -> str:
    """An empty database, once per backend."""
    url: str = request.getfixturevalue(f"{request.param}_url")
    return url


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    opened = Store.open(database_url)
    yield opened
    opened.close()
