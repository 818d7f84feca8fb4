"""The gate's state in the store, on SQLite and PostgreSQL: waivers, approvals, holds, pause, the throttle's
run of failures and audit records."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.core import audit
from bot.core.audit import AuditCommit, AuditConflict, AuditRecord, AuditState
from bot.core.gate import CheckResult, Waiver
from bot.core.ingestion import CheckName
from bot.db.gates import GateStore
from bot.db.store import Store

FORK = "meta/triton"
AT = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
H1, H2 = "1" * 40, "2" * 40


@pytest.fixture
def gates(database_url: str) -> Iterator[GateStore]:
    store = Store.open(database_url)
    yield GateStore(store)
    store.close()


def test_waivers_round_trip_per_pr_and_never_for_l1(gates: GateStore) -> None:
    waiver = Waiver(
        CheckName.L2, "@org/gpu", "pool down", "rerun Monday", AT + dt.timedelta(days=2), "lead", H1
    )
    gates.add_waiver(FORK, 7, waiver, at=AT)
    assert gates.waivers(FORK, 7) == [waiver]  # with the head it was given on
    assert gates.waivers(FORK, 8) == []
    with pytest.raises(ValueError, match="never waived"):
        gates.add_waiver(FORK, 7, Waiver(CheckName.L1, "@a", "r", "p", AT, "lead", H1), at=AT)
    for head in ("", "main", "1" * 39, "A" * 40):
        with pytest.raises(ValueError, match="names the head it waives"):
            gates.add_waiver(FORK, 7, dataclasses.replace(waiver, head_sha=head), at=AT)
    assert gates.waivers(FORK, 7) == [waiver]


def test_approvals_keep_the_head_they_were_given_on_and_the_time_of_the_latest(gates: GateStore) -> None:
    gates.record_approval(FORK, 7, login="alice", head_sha=H1, at=AT)
    gates.record_approval(FORK, 7, login="alice", head_sha=H1, at=AT + dt.timedelta(1))  # the same, again
    gates.record_approval(FORK, 7, login="alice", head_sha=H2, at=AT + dt.timedelta(2))
    assert [(a.login, a.head_sha, a.at, a.source) for a in gates.approvals(FORK, 7)] == [
        ("alice", H1, AT + dt.timedelta(1), "command"),
        ("alice", H2, AT + dt.timedelta(2), "command"),
    ]


def test_a_hold_is_set_replaced_and_cleared(gates: GateStore) -> None:
    assert gates.hold(FORK, 7) is None and gates.clear_hold(FORK, 7) is False
    gates.set_hold(FORK, 7, by="rm", reason="freeze", at=AT)
    gates.set_hold(FORK, 7, by="lead", reason="wait for 3.2", at=AT)
    hold = gates.hold(FORK, 7)
    assert hold is not None and (hold.by, hold.reason) == ("lead", "wait for 3.2")
    assert gates.clear_hold(FORK, 7) is True and gates.hold(FORK, 7) is None


def test_failures_in_a_row_count_each_pr_head_once_and_reset_on_success_or_resume(gates: GateStore) -> None:
    assert gates.consecutive_failures(FORK) == 0
    assert gates.record_failure(FORK, 7, head_sha=H1, tier="sluice/L1", at=AT) == 1
    assert gates.record_failure(FORK, 7, head_sha=H1, tier="sluice/L1", at=AT) == 1  # the same failure again
    assert gates.record_failure(FORK, 7, head_sha=H2, tier="sluice/L2", at=AT) == 2
    gates.record_success(FORK)
    assert gates.consecutive_failures(FORK) == 0
    assert gates.record_failure(FORK, 8, head_sha=H1, tier="sluice/L1", at=AT) == 1
    gates.pause(FORK, by="sluice", reason="3 failed ingestions in a row", at=AT)
    pause = gates.paused(FORK)
    assert pause is not None and pause.reason == "3 failed ingestions in a row"
    gates.resume(FORK)
    assert gates.paused(FORK) is None and gates.consecutive_failures(FORK) == 0
    assert gates.consecutive_failures("other/fork") == 0


def record(**changes: object) -> AuditRecord:
    base = AuditRecord(
        fork=FORK,
        ingestion_id="bundle-aaaaaaaaaa",
        kind="bundle",
        pr_number=7,
        head=H1,
        upstream_base="a" * 40,
        upstream_target="b" * 40,
        commits=(AuditCommit(upstream="b" * 40, subject="s", status="auto_resolved", commit=H1),),
        conflicts=(
            AuditConflict(upstream="b" * 40, path="x.cpp", cls="semantic", resolved=True, how="reused"),
        ),
    )
    return base.model_copy(update=changes)


def test_an_audit_record_is_refreshed_while_open_and_never_after_it_closed(gates: GateStore) -> None:
    gates.save_audit(record(), at=AT)
    gates.save_audit(record(head=H2), at=AT + dt.timedelta(hours=1))
    saved = gates.audit(FORK, 7)
    assert saved is not None and saved.head == H2 and saved.opened_at == AT  # opened when first saved
    gates.save_audit(saved.model_copy(update={"state": AuditState.CLOSED, "merge_sha": "c" * 40}), at=AT)
    gates.save_audit(record(head=H1), at=AT)  # a late re-plan does not reopen it
    closed = gates.audit(FORK, 7)
    assert closed is not None and closed.state is AuditState.CLOSED and closed.merge_sha == "c" * 40
    (found,) = gates.find_audits("bundle-aaaaaaaaaa")
    assert found[1] == closed and gates.find_audits(str(found[0])) == [found]


def waiver(tier: CheckName) -> Waiver:
    return Waiver(tier, "@perf-team", "flaky runner", "rerun nightly", AT + dt.timedelta(days=3), "alice", H1)


def test_a_closed_audit_record_keeps_every_failing_tier_that_was_waived() -> None:
    """A failing tier with no waiver (a person merged anyway) and a neutral one are no waived failures."""
    checks = {
        "sluice/L1": CheckResult("sluice/L1", H1, "completed", "success"),
        "sluice/L2": CheckResult("sluice/L2", H1, "completed", "failure"),
        "sluice/L3": CheckResult("sluice/L3", H1, "completed", "timed_out"),
        "sluice/gate": CheckResult("sluice/gate", H1, "completed", "failure"),
    }
    both = audit.closed(
        record(),
        checks=checks,
        approvals=(),
        waivers=[waiver(CheckName.L3), waiver(CheckName.L2)],
        merge_sha="c" * 40,
        rollback=(None, "d" * 40),
        at=AT,
        head=H1,
    )
    assert both.waived_tiers == ("sluice/L2", "sluice/L3")
    assert "  waived failing tiers: sluice/L2, sluice/L3\n" in audit.render(1, both)
    neutral = checks | {"sluice/L2": CheckResult("sluice/L2", H1, "completed", "neutral")}
    one = audit.closed(
        record(),
        checks=neutral,
        approvals=(),
        waivers=[waiver(CheckName.L2)],
        merge_sha="c" * 40,
        rollback=(None, "d" * 40),
        at=AT,
        head=H1,
    )
    assert one.waived_tiers == ()
    assert "  waived failing tiers: none\n" in audit.render(1, one)


def test_sluice_audit_prints_a_record_by_ingestion_id_or_number(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from bot.app.cli import main

    store = Store.open(database_url)
    GateStore(store).save_audit(record(), at=AT)
    store.close()
    assert main(["audit", "bundle-aaaaaaaaaa", "--database", database_url]) == 0
    text = capsys.readouterr().out
    assert "meta/triton #7 bundle-aaaaaaaaaa (open)" in text and "x.cpp: semantic, reused" in text
    assert main(["audit", "1", "--database", database_url, "--json"]) == 0
    assert '"ingestion_id": "bundle-aaaaaaaaaa"' in capsys.readouterr().out
    assert main(["audit", "chain-nothing", "--database", database_url]) == 2
    assert "no audit record 'chain-nothing'" in capsys.readouterr().err
    for odd in ("99999999999999999999", "²"):  # no 64-bit number, a digit that is no ASCII digit
        assert main(["audit", odd, "--database", database_url]) == 2
        assert f"no audit record {odd!r}" in capsys.readouterr().err


def test_sluice_audit_with_a_mistyped_store_says_so_and_creates_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bot.app.cli import main

    typo = tmp_path / "stroe.db"
    assert main(["audit", "7", "--database", f"sqlite:///{typo}"]) == 2
    assert f"no store at {typo}" in capsys.readouterr().err and not typo.exists()


def test_a_record_closed_unmerged_ends_and_goes_on_when_its_pr_is_picked_again_and_merged(
    gates: GateStore,
) -> None:
    """An unmerged record ends (`unmerged`, closed_at); its PR may be reopened: a refresh opens it again and
    the merge closes it, after which nothing rewrites it."""
    gates.save_audit(record(), at=AT)
    ended = audit.unmerged(record(), head=H1, at=AT + dt.timedelta(hours=1))
    gates.save_audit(ended, at=AT + dt.timedelta(hours=1))
    stored = gates.audit(FORK, 7)
    assert stored is not None and stored.state is AuditState.UNMERGED and stored.closed_at is not None

    gates.save_audit(record(), at=AT + dt.timedelta(hours=2))  # reopened and picked again
    assert gates.audit(FORK, 7).state is AuditState.OPEN  # type: ignore[union-attr]
    merged = audit.closed(
        record(),
        checks={},
        approvals=(),
        waivers=(),
        merge_sha="c" * 40,
        rollback=(None, "d" * 40),
        at=AT,
        head=H1,
    )
    gates.save_audit(merged, at=AT + dt.timedelta(hours=3))
    gates.save_audit(record(), at=AT + dt.timedelta(hours=4))
    final = gates.audit(FORK, 7)
    assert final is not None and final.state is AuditState.CLOSED and final.merge_sha == "c" * 40
