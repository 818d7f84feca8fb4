"""`sluice db`: the store's schema revision, and undoing migrations to roll a release back."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text

from bot.app.cli import main
from bot.app.cli.database import store_failure
from bot.core.audit import AuditRecord, AuditState, AuditTier, AuditWaiver
from bot.core.errors import BadInput
from bot.db.gates import GateStore
from bot.db.revisions import HEAD_REVISION, known_revisions, undone_by
from bot.db.store import Store, metadata
from tests.test_gate_store import FORK, H1, record
from tests.test_store import TABLE_MODULES, raw_connection

__all__ = ["TABLE_MODULES"]  # imported for its import of every table module: all tables on the metadata

AT = dt.datetime(2026, 5, 1, 12, tzinfo=dt.UTC)
FIRST = "0001_plans_chains_dispositions"


def revision_of(url: str) -> str | None:
    with raw_connection(url) as conn:
        if not inspect(conn).has_table("alembic_version"):
            return None
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one()


def stored_record(url: str) -> dict[str, object]:
    with raw_connection(url) as conn:
        loaded: dict[str, object] = json.loads(conn.execute(text("SELECT record FROM audits")).scalar_one())
        return loaded


def closed_audit() -> AuditRecord:
    """A merged bundle: its L2 failed and was waived; its L3 failed with no waiver (a person merged)."""
    return record(
        tiers=(
            AuditTier(name="sluice/L1", head_sha=H1, status="completed", conclusion="success"),
            AuditTier(name="sluice/L2", head_sha=H1, status="completed", conclusion="failure"),
            AuditTier(name="sluice/L3", head_sha=H1, status="completed", conclusion="timed_out"),
        ),
        waived_tiers=("sluice/L2",),
        waivers=(
            AuditWaiver(
                tier="sluice/L2",
                owner="@perf",
                reason="flaky runner",
                recovery_plan="rerun",
                expires_at=AT,
                granted_by="alice",
                head_sha=H1,
            ),
        ),
        merge_sha="c" * 40,
        state=AuditState.CLOSED,
    )


def sluice(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_every_migration_undoes_down_to_the_first_and_redoes_to_the_tables_the_store_queries(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = Store.open(database_url)
    GateStore(store).save_audit(closed_audit(), at=AT)
    store.close()

    code, out, _ = sluice(capsys, "db", "downgrade", "--to", FIRST, "--database", database_url, "--yes")

    assert code == 0 and f"The store is at {FIRST}" in out
    assert revision_of(database_url) == FIRST
    with raw_connection(database_url) as conn:
        assert sorted(inspect(conn).get_table_names()) == [
            "alembic_version",
            "chain_members",
            "chains",
            "dispositions",
            "plans",
        ]
    Store.open(database_url).close()  # the next release's start upgrades it again
    assert revision_of(database_url) == HEAD_REVISION
    with raw_connection(database_url) as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        assert compare_metadata(context, metadata) == []


def test_undoing_0021_gives_audit_records_back_the_failing_tier_the_older_release_reads(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = Store.open(database_url)
    GateStore(store).save_audit(closed_audit(), at=AT)
    store.close()

    code, _, _ = sluice(capsys, "db", "downgrade", "--to", "0020", "--database", database_url, "--yes")

    older = stored_record(database_url)
    assert code == 0 and older["failing_tier"] == "sluice/L2" and "waived_tiers" not in older
    store = Store.open(database_url)
    try:
        again = GateStore(store).audit(FORK, 7)
    finally:
        store.close()
    assert again is not None and again.waived_tiers == ("sluice/L2",)


def test_a_downgrade_without_yes_says_what_it_would_undo_and_changes_nothing(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    Store.open(sqlite_url).close()

    code, out, _ = sluice(capsys, "db", "downgrade", "--to", "0019", "--database", sqlite_url)

    assert code == 0
    assert out.splitlines()[:6] == [
        f"Going back from {HEAD_REVISION} to 0019_bisect_culprits_first_at undoes (newest first):",
        "  0024_fork_dashboard_issue    Forks remember their dashboard issue's number (`dashboard_issue`): "
        "the dash…",
        "  0023_waiver_expiry_judged    Waivers keep when the gate was judged again at their expiry "
        "(`expiry_judged…",
        "  0022_command_audit_reply     A command's row keeps the reply Sluice gave it (`reply`), so that a "
        "job run…",
        "  0021_audit_waived_tiers      Audit records keep every failing tier a waiver let through "
        "(`waived_tiers`)…",
        "  0020_command_audit_line_len  command_audit.line holds a whole command line: a first line read as "
        "a comma…",
    ]
    assert "Nothing was changed" in out and "--yes" in out
    assert revision_of(sqlite_url) == HEAD_REVISION


@pytest.mark.parametrize(
    ("to", "refusal"),
    [
        ("0099_from_the_future", "'0099_from_the_future' names no schema revision"),
        ("00", "'00' names more than one schema revision"),
        ("--yes", "'--yes' names no schema revision"),
        (HEAD_REVISION, f"not newer than '{HEAD_REVISION}': nothing to undo"),
    ],
)
def test_a_bad_revision_is_refused_and_the_store_is_left_as_it_was(
    sqlite_url: str, capsys: pytest.CaptureFixture[str], to: str, refusal: str
) -> None:
    Store.open(sqlite_url).close()

    code, out, err = sluice(capsys, "db", "downgrade", f"--to={to}", "--database", sqlite_url, "--yes")

    assert code != 0 and out == "" and refusal in err
    assert revision_of(sqlite_url) == HEAD_REVISION


def test_a_store_that_is_not_there_or_not_sluices_is_not_downgraded(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = sluice(capsys, "db", "downgrade", "--to", FIRST, "--database", sqlite_url, "--yes")

    assert code != 0 and "holds no Sluice schema: nothing to undo" in err
    assert revision_of(sqlite_url) is None


@pytest.mark.parametrize("command", [("status",), ("downgrade", "--to", FIRST, "--yes")])
def test_db_names_a_store_it_cannot_open_as_the_other_commands_do(
    capsys: pytest.CaptureFixture[str], command: tuple[str, ...]
) -> None:
    """The same words as `sluice audit` (tests/test_cli.py): one helper says it for both."""
    url = "postgresql+psycopg2://u:pw@127.0.0.1/x"
    code, out, err = sluice(capsys, "db", *command, "--database", url)
    assert (code, out) == (2, "")
    assert err.startswith(
        "sluice: error: cannot open the store at postgresql+psycopg2://u:***@127.0.0.1/x: its driver is not "
        "installed (psycopg2)"
    )
    assert "postgresql+psycopg://" in err and "pw" not in err


def test_a_store_failure_says_which_store_without_its_password_and_what_failed() -> None:
    used = store_failure("postgresql+psycopg://u:pw@127.0.0.1/x", OSError("refused\nmore"), doing="use")
    assert used.message == "cannot use the store at postgresql+psycopg://u:***@127.0.0.1/x: OSError: refused"
    assert used.remedy.startswith("check --database or SLUICE_DATABASE_URL (sqlite:///PATH")
    broken = store_failure("sqlite:///x.db", ImportError("cannot import name 'c' from 'm'"))
    assert isinstance(broken, BadInput)
    assert broken.message.endswith("its driver is not installed (cannot import name 'c' from 'm')")


def test_db_status_says_where_the_store_stands_and_whether_this_sluice_can_use_it(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = sluice(capsys, "db", "status", "--database", sqlite_url)
    assert (code, out.splitlines()[1]) == (
        0,
        "Schema: none yet (an empty database): the first sluice command that opens it creates the schema",
    )
    assert revision_of(sqlite_url) is None  # reading it created nothing

    Store.open(sqlite_url).close()
    sluice(capsys, "db", "downgrade", "--to", "0018", "--database", sqlite_url, "--yes")
    code, out, _ = sluice(capsys, "db", "status", "--database", sqlite_url)
    assert code == 0 and out.splitlines()[1].startswith(
        "Schema: 0018_ingestion_heads, 6 migrations behind this Sluice's newest"
    )
    assert "* 0018_ingestion_heads " in out

    with raw_connection(sqlite_url) as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0099_from_the_future'"))
        conn.commit()
    code, out, _ = sluice(capsys, "db", "status", "--database", sqlite_url, "--json")
    status = json.loads(out)
    assert code == 1 and (status["revision"], status["known"]) == ("0099_from_the_future", False)
    assert status["newest"] == HEAD_REVISION == status["revisions"][-1]["id"]


def test_db_status_of_someone_elses_database_exits_1(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with raw_connection(sqlite_url) as conn:
        conn.execute(text("CREATE TABLE invoices (id INTEGER PRIMARY KEY)"))
        conn.commit()

    code, out, _ = sluice(capsys, "db", "status", "--database", sqlite_url)

    assert code == 1 and "tables that are not Sluice's (invoices)" in out


def test_a_newer_stores_refusal_says_how_to_roll_back(sqlite_url: str) -> None:
    Store.open(sqlite_url).close()
    with raw_connection(sqlite_url) as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0099_from_the_future'"))
        conn.commit()
    with pytest.raises(BadInput) as refused:
        Store.open(sqlite_url)
    assert "`sluice db downgrade`" in (refused.value.remedy or "")


def test_undone_by_lists_newest_first_and_knows_every_revision_in_order() -> None:
    ids = [r.id for r in known_revisions()]
    assert ids[0] == FIRST and ids[-1] == HEAD_REVISION and ids == sorted(ids)
    assert [r.id for r in undone_by(HEAD_REVISION, "0019")] == [
        HEAD_REVISION,
        "0023_waiver_expiry_judged",
        "0022_command_audit_reply",
        "0021_audit_waived_tiers",
        "0020_command_audit_line_len",
    ]
