"""Tier runs in the store, on SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt

import pytest

from bot.core.errors import BadInput
from bot.core.tiers import Level, RunState, TierRun
from bot.db.store import Store
from bot.db.tier_runs import TierRuns

BRANCH_NAME_MAX = 255  # GitHub's limit on a branch name, in bytes

FORK = "meta/triton"
AT = dt.datetime(2026, 12, 1, 12, tzinfo=dt.UTC)
HEAD = "a" * 40


def attempt(ingestion: str = "bundle-0123456789", *, pull: int = 7, attempt: int = 1) -> TierRun:
    return TierRun(FORK, pull, ingestion, Level.L1, HEAD, attempt, RunState.DISPATCHED, AT)


def test_an_ingestion_id_as_long_as_a_branch_name_is_kept(store: Store) -> None:
    """A fork PR from the fork's own `sluice/ingest/<name>` branch takes `<name>` as its id: a person's
    branch name, up to GitHub's 255 bytes, not one of Sluice's short ids."""
    runs = TierRuns(store)
    long_id = "x" * BRANCH_NAME_MAX
    added = runs.add(attempt(long_id))
    assert added is not None and added.id is not None
    got = runs.get(added.id)
    assert got is not None and got.ingestion == long_id


def test_an_ingestion_id_longer_than_the_column_is_refused_and_nothing_is_written(store: Store) -> None:
    runs = TierRuns(store)
    with pytest.raises(BadInput, match="256 characters long, over 255"):
        runs.add(attempt("x" * (BRANCH_NAME_MAX + 1)))
    assert runs.for_pull(FORK, 7) == []
