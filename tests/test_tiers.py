"""The tier state machine and triage (core.tiers), the tier check runs (core.tier_checks): tables."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.core.config import ConfigError, SluiceConfig, parse_config
from bot.core.limits import GITHUB_TEXT_MAX_CHARS, fit_for_github
from bot.core.tier_checks import MAX_ANNOTATIONS, Shown, completed, refused
from bot.core.tiers import (
    INFRA_MARKERS,
    ONE_SUITE,
    OUTSIDE_WAITS,
    Blocked,
    Dispatch,
    FailedTest,
    Level,
    NotNow,
    Obstacle,
    ReportFacts,
    RunState,
    Selection,
    Subject,
    SubjectKind,
    SuiteFacts,
    TierRun,
    TimeOut,
    Triage,
    Verdict,
    Want,
    decode_selection,
    failed_levels,
    next_actions,
    overdue,
    selection_code,
    stale_runs,
    suites_for,
    triage,
    why_not,
    workflow_inputs,
)
from bot.core.webhooks import CheckRun, Pull
from bot.flows.tiers import (
    MAX_ZIP_MEMBERS,
    Finished,
    compared,
    parse_report,
    read_report,
    regressed,
    rendered,
    subject_of,
    unpack,
)

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)
HEAD, OLD, BASE = "a" * 40, "b" * 40, "c" * 40
BUNDLE = Subject("o/f", 7, HEAD, BASE, SubjectKind.BUNDLE, "bundle-1")


def run(
    level: Level,
    state: RunState = RunState.COMPLETED,
    *,
    verdict: Verdict | None = Verdict.PASSED,
    attempt: int = 1,
    head: str = HEAD,
    at: datetime = NOW,
    detail: str = "",
    suite: int | None = None,
) -> TierRun:
    return TierRun(
        "o/f", 7, "bundle-1", level, head, attempt, state, at, verdict=verdict, detail=detail, suite=suite
    )


CONFIG = SluiceConfig()
L1, L2, L3 = Level.L1, Level.L2, Level.L3


@pytest.mark.parametrize(
    ("runs", "want", "expected"),
    [
        ([], Want(), [Dispatch(L1, 1, Selection.FULL, "every ingestion and fork PR runs L1")]),
        ([run(L1)], Want(), [Dispatch(L2, 1, Selection.FULL, "L1 passed")]),
        ([run(L1, RunState.DISPATCHED, verdict=None)], Want(), []),  # waits
        # L2 never starts after L1 failed; the tiers above say so
        ([run(L1, verdict=Verdict.FAILED)], Want(), [Blocked(L2, "L1 failed"), Blocked(L3, "L1 failed")]),
        (
            [run(L1, verdict=Verdict.BROKEN_TRUNK)],
            Want(),
            [Blocked(L2, "L1 failed"), Blocked(L3, "L1 failed")],
        ),
        (
            [run(L1, RunState.REFUSED, verdict=None)],
            Want(),
            [Blocked(L2, "L1 failed"), Blocked(L3, "L1 failed")],
        ),
        # infrastructure: retried up to `retries` (2) times, then it counts as failed
        (
            [run(L1, verdict=Verdict.INFRA, detail="GPU busy")],
            Want(),
            [Dispatch(L1, 2, Selection.FULL, "retry 1 of 2: GPU busy")],
        ),
        (
            [run(L1, verdict=Verdict.INFRA, attempt=3)],
            Want(),
            [Blocked(L2, "L1 failed"), Blocked(L3, "L1 failed")],
        ),
        # L3: on request (the default policy), not by itself
        ([run(L1), run(L2)], Want(), []),
        ([run(L1), run(L2)], Want(l3=True), [Dispatch(L3, 1, Selection.FULL, "L2 passed; L3 requested")]),
        # asked again where L3 ran (passed or failed): its next attempt, never the request ignored
        (
            [run(L1), run(L2), run(L3)],
            Want(l3=True),
            [Dispatch(L3, 2, Selection.FULL, "L2 passed; L3 requested")],
        ),
        (
            [run(L1), run(L2), run(L3, verdict=Verdict.FAILED, attempt=2)],
            Want(l3=True),
            [Dispatch(L3, 3, Selection.FULL, "L2 passed; L3 requested")],
        ),
        # a re-run of an L3 that never ran here is a request for it
        ([run(L1), run(L2)], Want(rerun=L3), [Dispatch(L3, 1, Selection.FULL, "L2 passed; L3 requested")]),
        # but an ask never starts a tier beside its waiting attempt, nor L3 before L2 passed
        ([run(L1), run(L2), run(L3, RunState.DISPATCHED, verdict=None)], Want(l3=True), []),
        ([run(L1), run(L2, RunState.DISPATCHED, verdict=None)], Want(rerun=L2), []),
        ([run(L1), run(L2, RunState.DISPATCHED, verdict=None)], Want(l3=True), []),
        ([run(L1), run(L2, verdict=Verdict.FAILED)], Want(rerun=L3), [Blocked(L3, "L2 failed")]),
        # a re-run of a finished tier, even a passed one
        ([run(L1)], Want(rerun=L1), [Dispatch(L1, 2, Selection.FULL, "re-run requested")]),
        # runs on an older head do not count for this one
        (
            [run(L1, head=OLD)],
            Want(),
            [Dispatch(L1, 1, Selection.FULL, "every ingestion and fork PR runs L1")],
        ),
    ],
)
def test_next_actions(runs: list[TierRun], want: Want, expected: list[object]) -> None:
    assert next_actions(BUNDLE, runs, CONFIG, now=NOW, want=want) == expected


RUNNING_L2 = run(L2, RunState.DISPATCHED, verdict=None)


@pytest.mark.parametrize(
    ("runs", "want", "expected"),
    [
        ([], Want(), None),  # nothing asked
        ([run(L1), run(L2)], Want(l3=True), None),
        ([run(L1), run(L2), run(L3)], Want(l3=True), None),  # its second attempt
        ([run(L1), run(L2), run(L3, verdict=Verdict.FAILED)], Want(l3=True), None),
        ([run(L1), run(L2)], Want(rerun=L3), None),  # L3's first attempt
        ([run(L1), run(L2, verdict=Verdict.FAILED)], Want(rerun=L2), None),
        ([], Want(rerun=L1), None),
        # L3 needs L2 passed on this head
        ([run(L1, RunState.DISPATCHED, verdict=None)], Want(l3=True), NotNow(L3, L1, Obstacle.UNFINISHED)),
        ([run(L1)], Want(l3=True), NotNow(L3, L2, Obstacle.UNFINISHED)),  # L2 starts, not L3
        ([run(L1), RUNNING_L2], Want(l3=True), NotNow(L3, L2, Obstacle.UNFINISHED)),
        ([run(L1), RUNNING_L2], Want(rerun=L3), NotNow(L3, L2, Obstacle.UNFINISHED)),
        (  # an infrastructure failure being retried has not finished
            [run(L1), run(L2, verdict=Verdict.INFRA)],
            Want(l3=True),
            NotNow(L3, L2, Obstacle.UNFINISHED),
        ),
        (
            [run(L1), run(L2, verdict=Verdict.INFRA, attempt=3)],
            Want(l3=True),
            NotNow(L3, L2, Obstacle.FAILED),
        ),
        ([run(L1), run(L2, verdict=Verdict.FAILED)], Want(l3=True), NotNow(L3, L2, Obstacle.FAILED)),
        ([run(L1, verdict=Verdict.FAILED)], Want(l3=True), NotNow(L3, L1, Obstacle.FAILED)),
        ([run(L1, RunState.TIMED_OUT, verdict=None)], Want(rerun=L2), NotNow(L2, L1, Obstacle.FAILED)),
        ([run(L1), run(L2, head=OLD)], Want(l3=True), NotNow(L3, L2, Obstacle.UNFINISHED)),  # another head
        # the tier itself still runs: no attempt beside it (one asked for again is no new attempt)
        (
            [run(L1), run(L2), run(L3, RunState.DISPATCHED, verdict=None)],
            Want(l3=True),
            NotNow(L3, L3, Obstacle.RUNNING),
        ),
        ([run(L1), RUNNING_L2], Want(rerun=L2), NotNow(L2, L2, Obstacle.RUNNING)),
        (
            [run(L1), run(L2, RunState.UNDISPATCHED, verdict=None)],
            Want(rerun=L2),
            NotNow(L2, L2, Obstacle.RUNNING),
        ),
        ([run(L1, RunState.DISPATCHED, verdict=None)], Want(rerun=L1), NotNow(L1, L1, Obstacle.RUNNING)),
    ],
)
def test_why_not(runs: list[TierRun], want: Want, expected: NotNow | None) -> None:
    assert why_not(BUNDLE, runs, CONFIG, now=NOW, want=want) == expected
    started = [a for a in next_actions(BUNDLE, runs, CONFIG, now=NOW, want=want) if isinstance(a, Dispatch)]
    new = [a for a in started if a.level is want.level and a.again is None]
    assert (expected is None) == (want.level is None or bool(new))  # the two never disagree


@pytest.mark.parametrize(
    ("why", "again", "reason", "remedy"),
    [
        (
            NotNow(L3, L2, Obstacle.UNFINISHED),
            "/l3",
            "L2 has not finished on this head yet",
            "comment `/l3` again once L2 passes",
        ),
        (
            NotNow(L3, L1, Obstacle.FAILED),
            "/l3 bench",
            "L1 failed on this head",
            "`/retry l1` or push a fix, then comment `/l3 bench` again once L2 passes",
        ),
        (
            NotNow(L2, L2, Obstacle.RUNNING),
            "/retry l2",
            "L2 is still running on this head",
            "comment `/retry l2` again once it ends",
        ),
    ],
)
def test_why_not_says_why_and_what_to_do(why: NotNow, again: str, reason: str, remedy: str) -> None:
    assert (why.reason, why.remedy(again)) == (reason, remedy)


def test_a_run_whose_dispatch_failed_is_dispatched_again_as_the_same_attempt() -> None:
    failed = dataclasses.replace(
        run(L1, RunState.UNDISPATCHED, verdict=None, suite=None), id=5, detail="the dispatch failed"
    )
    (again,) = next_actions(BUNDLE, [failed], CONFIG, now=NOW)
    assert again == Dispatch(L1, 1, Selection.FULL, "dispatched again: the dispatch failed", again=failed)
    # a Re-run press meanwhile does not add an attempt beside it: the same one is asked for again
    assert next_actions(BUNDLE, [failed], CONFIG, now=NOW, want=Want(rerun=L1)) == [again]
    # and a new head leaves it behind with the other waiting runs
    assert stale_runs(OLD, [failed]) == [failed]
    # never dispatched within the tier's timeout: timed out, not asked for forever
    assert next_actions(BUNDLE, [failed], CONFIG, now=NOW + timedelta(minutes=60)) == [TimeOut(failed)]


def test_a_stalled_run_times_out_at_the_tier_timeout() -> None:
    stalled = run(L2, RunState.DISPATCHED, verdict=None, at=NOW - timedelta(minutes=360))
    assert next_actions(BUNDLE, [run(L1), stalled], CONFIG, now=NOW) == [TimeOut(stalled)]
    assert next_actions(BUNDLE, [run(L1), stalled], CONFIG, now=NOW - timedelta(seconds=1)) == []
    timed_out = dataclasses.replace(stalled, state=RunState.TIMED_OUT)
    assert next_actions(BUNDLE, [run(L1), timed_out], CONFIG, now=NOW) == [Blocked(L3, "L2 failed")]


def test_overdue_runs_are_the_waiting_ones_past_their_own_tiers_timeout() -> None:
    tiers = CONFIG.tiers.model_copy(
        update={
            "l1": CONFIG.tiers.l1.model_copy(update={"timeout_minutes": 10}),
            "l2": CONFIG.tiers.l2.model_copy(update={"timeout_minutes": 30}),
        }
    )
    config = CONFIG.model_copy(update={"tiers": tiers})
    l1 = run(L1, RunState.DISPATCHED, verdict=None, at=NOW - timedelta(minutes=10))
    l2 = run(L2, RunState.DISPATCHED, verdict=None, at=NOW - timedelta(minutes=10))
    done = run(L1, at=NOW - timedelta(days=1))
    undispatched = run(L3, RunState.UNDISPATCHED, verdict=None, at=NOW - timedelta(days=1))
    other_pull = dataclasses.replace(l1, pull=8, head_sha=OLD)  # any PR, any head
    fresh = run(L3, RunState.UNDISPATCHED, verdict=None, at=NOW)
    assert overdue([l1, l2, done, undispatched, other_pull, fresh], config, now=NOW) == [
        l1,
        undispatched,  # never dispatched within L3's 720 minutes
        other_pull,
    ]
    assert overdue([l1], config, now=NOW - timedelta(seconds=1)) == []


def test_l3_by_policy() -> None:
    always = parse_config("tiers:\n  l3_policy: always\n")
    chains = parse_config("tiers:\n  l3_policy: chains\n")
    chain = dataclasses.replace(BUNDLE, kind=SubjectKind.CHAIN)
    fork_pr = dataclasses.replace(BUNDLE, kind=SubjectKind.FORK_PR)
    done = [run(L1), run(L2)]
    assert [a.level for a in next_actions(BUNDLE, done, always, now=NOW) if isinstance(a, Dispatch)] == [L3]
    assert next_actions(fork_pr, done, always, now=NOW) == []
    assert next_actions(BUNDLE, done, chains, now=NOW) == []
    assert [a.level for a in next_actions(chain, done, chains, now=NOW) if isinstance(a, Dispatch)] == [L3]


def test_a_pr_from_outside_the_fork_runs_l2_and_l3_only_when_a_maintainer_asks() -> None:
    outside = dataclasses.replace(BUNDLE, kind=SubjectKind.OUTSIDE_PR)
    always = parse_config("tiers:\n  l3_policy: always\n")
    first = [Dispatch(L1, 1, Selection.CRITICAL, "every ingestion and fork PR runs L1")]
    assert next_actions(outside, [], CONFIG, now=NOW) == first  # L1: GitHub's hosted runners
    waits = [Blocked(L2, OUTSIDE_WAITS, waiting=True)]
    assert next_actions(outside, [run(L1)], CONFIG, now=NOW) == waits
    assert next_actions(outside, [run(L1)], always, now=NOW) == waits
    assert next_actions(outside, [run(L1, head=OLD), run(L2, head=OLD), run(L1)], CONFIG, now=NOW) == waits
    asked = Dispatch(L2, 1, Selection.CRITICAL, "L1 passed; a maintainer asked")
    assert next_actions(outside, [run(L1)], CONFIG, now=NOW, want=Want(rerun=L2)) == [asked]
    assert next_actions(outside, [run(L1), run(L2)], always, now=NOW) == []  # L3 never by policy
    l3 = next_actions(outside, [run(L1), run(L2)], always, now=NOW, want=Want(l3=True))
    assert [(a.level, a.selection) for a in l3 if isinstance(a, Dispatch)] == [(L3, Selection.CRITICAL)]
    retry = next_actions(outside, [run(L1), run(L2, verdict=Verdict.INFRA)], CONFIG, now=NOW)
    assert [(a.level, a.attempt) for a in retry if isinstance(a, Dispatch)] == [
        (L2, 2)
    ]  # asked for this head


@pytest.mark.parametrize(
    ("head_repo", "ref", "kind"),
    [
        ("o/f", "feature", SubjectKind.FORK_PR),
        ("o/f", "sluice/ingest/bundle-1", SubjectKind.BUNDLE),
        ("outsider/f", "feature", SubjectKind.OUTSIDE_PR),
        ("outsider/f", "sluice/ingest/bundle-1", SubjectKind.OUTSIDE_PR),  # a branch named like Sluice's
        (None, "feature", SubjectKind.OUTSIDE_PR),  # its repository was deleted
    ],
)
def test_a_pr_is_from_outside_unless_its_head_is_a_branch_of_the_fork(
    head_repo: str | None, ref: str, kind: SubjectKind
) -> None:
    repo = {"full_name": head_repo} if head_repo is not None else None
    pull = {"number": 7, "state": "open", "head": {"ref": ref, "sha": HEAD, "repo": repo}}
    assert (
        subject_of(Pull.model_validate(pull | {"base": {"ref": "main", "sha": OLD}}), fork="o/f").kind is kind
    )


def test_fork_prs_run_the_critical_subset_and_ingestions_the_extensions() -> None:
    config = parse_config(
        "extensions:\n  - {name: tlx, paths: ['third_party/tlx/**'], suites: [third_party/tlx/test]}\n"
        "tiers:\n  l2:\n    critical: [gemm]\n    suites:\n      - {name: gemm, builtin: numerics}\n"
        "      - {name: sweep, command: [pytest, sweep]}\n"
    )
    assert [s.name for s in suites_for(config, L2, Selection.CRITICAL)] == ["gemm"]
    assert [s.name for s in suites_for(config, L2, Selection.FULL)] == ["gemm", "sweep"]
    assert [s.name for s in suites_for(config, L1, Selection.FULL)] == ["smoke", "ext-tlx"]
    assert suites_for(config, L1, Selection.FULL)[1].command[-1] == "third_party/tlx/test"
    own = parse_config(  # the fork runs its extension's tests in L1 itself: they do not run twice
        "extensions:\n  - {name: tlx, paths: ['third_party/tlx/**'], suites: [third_party/tlx/test]}\n"
        "tiers:\n  l1:\n    suites:\n      - {name: tlx, command: [pytest, third_party/tlx/test]}\n"
    )
    assert [s.name for s in suites_for(own, L1, Selection.FULL)] == ["tlx"]
    fork_pr = dataclasses.replace(BUNDLE, kind=SubjectKind.FORK_PR)
    assert next_actions(fork_pr, [run(L1)], config, now=NOW)[0] == Dispatch(
        L2, 1, Selection.CRITICAL, "L1 passed"
    )


def test_config_defaults_and_checks() -> None:
    tiers = SluiceConfig().tiers
    assert (tiers.l1.runs_on, tiers.l2.runs_on) == (("ubuntu-latest",), ("self-hosted", "linux", "gpu"))
    assert (tiers.l1.timeout_minutes, tiers.l2.timeout_minutes, tiers.l3.timeout_minutes) == (60, 360, 720)
    assert tiers.environment == "compiler-production-gate" and tiers.l2.workflow == "sluice-l2.yml"
    kept = parse_config("tiers:\n  l2:\n    owner: '@org/gpu'\n    suites: [{name: n, builtin: numerics}]\n")
    assert kept.tiers.l2.runs_on == ("self-hosted", "linux", "gpu") and kept.tiers.l2.owner == "@org/gpu"
    with pytest.raises(ConfigError, match="critical"):
        parse_config("tiers:\n  l2:\n    critical: [nope]\n    suites: [{name: n, builtin: numerics}]\n")
    with pytest.raises(ConfigError):
        parse_config("tiers:\n  l1:\n    workflow: '../x.yml'\n    suites: [{name: n, builtin: smoke}]\n")


TWO_L3 = parse_config(
    "tiers:\n  l3:\n    suites:\n      - {name: bench, builtin: bench}\n      - {name: sweep, command: [x]}\n"
)


def test_an_l3_request_naming_a_suite_dispatches_only_it_by_index() -> None:
    done = [run(L1), run(L2)]
    (only,) = next_actions(BUNDLE, done, TWO_L3, now=NOW, want=Want(l3=True, suite="sweep"))
    assert only == Dispatch(L3, 1, Selection.FULL, "L2 passed; L3 requested (suite sweep only)", suite=1)
    (every,) = next_actions(BUNDLE, done, TWO_L3, now=NOW, want=Want(l3=True))
    assert isinstance(every, Dispatch) and every.suite is None
    assert [s.name for s in suites_for(TWO_L3, L3, Selection.FULL, suite=1)] == ["sweep"]
    assert [s.name for s in suites_for(TWO_L3, L3, Selection.FULL)] == ["bench", "sweep"]
    assert suites_for(TWO_L3, L3, Selection.FULL, suite=2) == ()
    lost = run(L3, verdict=Verdict.INFRA, detail="runner lost", suite=1)
    (retry,) = next_actions(BUNDLE, [*done, lost], TWO_L3, now=NOW)
    assert isinstance(retry, Dispatch) and retry.suite == 1  # a retry runs the same one suite
    ran = [*done, run(L3, suite=1)]  # asked again after `/l3 sweep` ran: the suite named now
    (again,) = next_actions(BUNDLE, ran, TWO_L3, now=NOW, want=Want(l3=True, suite="bench"))
    assert again == Dispatch(L3, 2, Selection.FULL, "L2 passed; L3 requested (suite bench only)", suite=0)


def test_a_one_suite_selection_travels_as_an_integer_and_reads_back() -> None:
    assert [selection_code(Selection.FULL, None), selection_code(Selection.CRITICAL, None)] == [0, 1]
    assert selection_code(Selection.FULL, 0) == ONE_SUITE and decode_selection(ONE_SUITE + 3) == (
        Selection.FULL,
        3,
    )
    assert decode_selection(1) == (Selection.CRITICAL, None)
    with pytest.raises(ValueError):
        decode_selection(-1)
    one = dataclasses.replace(run(L3), id=12, suite=1)
    assert workflow_inputs(BUNDLE, one)["selection"] == str(ONE_SUITE + 1)


def test_workflow_inputs_are_integers_and_shas() -> None:
    inputs = workflow_inputs(BUNDLE, dataclasses.replace(run(L2), id=12))
    assert inputs == {
        "tier": "2",
        "pull": "7",
        "head_sha": HEAD,
        "baseline_sha": BASE,
        "selection": "0",
        "request": "12",
    }


def facts(*failures: FailedTest, problems: tuple[str, ...] = ()) -> ReportFacts:
    outcome = "failed" if failures or problems else "passed"
    suite = SuiteFacts(
        "smoke",
        outcome,
        executed=10,
        expected=10,
        passed=10 - len(failures),
        failed=len(failures),
        problems=problems,
    )
    return ReportFacts((suite,), failures, {"gpu_model": "H200", "context_hash": "f" * 64})


ASSERT = FailedTest("smoke", "test_add", "python/test/unit/test_add.py:41: AssertionError: tensors not close")
BUSY = FailedTest(
    "smoke", "test_mm", "RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable"
)


@pytest.mark.parametrize(
    ("conclusion", "report", "log", "verdict"),
    [
        ("success", facts(), "", Verdict.PASSED),
        ("failure", facts(ASSERT), "", Verdict.FAILED),
        ("failure", facts(BUSY), "", Verdict.INFRA),
        ("failure", facts(BUSY, problems=("1 test failed: test_mm",)), "", Verdict.INFRA),
        ("failure", facts(BUSY, ASSERT), "", Verdict.FAILED),  # a real failure among them: never retried
        ("failure", facts(FailedTest("smoke", "t", "runner: AssertionError: link lost")), "", Verdict.FAILED),
        ("failure", facts(problems=("ran 3 tests, expected 10 (expected_tests)",)), "", Verdict.FAILED),
        (
            "failure",
            facts(FailedTest("smoke", "k", "error: failed to legalize operation 'tt.dot'")),
            "",
            Verdict.FAILED,
        ),
        ("failure", None, "No space left on device", Verdict.INFRA),
        ("failure", None, "The self-hosted runner lost communication with the server.", Verdict.INFRA),
        ("success", None, "", Verdict.FAILED),  # no report is never a pass
        ("failure", None, "tier l1 has no suite 'x'", Verdict.FAILED),  # a missing suite is real
        ("success", facts(), "", Verdict.PASSED),
    ],
)
def test_triage(conclusion: str, report: ReportFacts | None, log: str, verdict: Verdict) -> None:
    assert triage(conclusion, report, log=log).verdict is verdict


@pytest.mark.parametrize(
    ("message", "marker"),
    [
        ("The self-hosted runner lost communication with the server.", "runner lost"),
        ("RuntimeError: No CUDA GPUs are available", "GPU missing"),
        ("RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable", "GPU busy"),
        ("RuntimeError: Failed to initialize NVML: Driver/library version mismatch", "driver mismatch"),
        ("RuntimeError: CUDA driver version is insufficient for CUDA runtime version", "driver mismatch"),
        ("OSError: [Errno 28] No space left on device: '/tmp/triton'", "disk full"),
        ("socket.gaierror: [Errno -3] Temporary failure in name resolution", "network"),
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "out of memory"),
    ],
)
def test_each_infrastructure_marker_is_retried_whatever_words_it_shares_with_a_real_one(
    message: str, marker: str
) -> None:
    """A real marker's word inside an infrastructure marker's ("version mismatch") is the infrastructure's:
    the run is retried, from the report's test or from the log when there is no report."""
    failed = FailedTest("smoke", "test_mm", message)
    assert triage("failure", facts(failed)) == Triage(Verdict.INFRA, f"{marker}: {message}", infra=marker)
    assert triage("failure", None, log=f"Run the tier\n{message}\n").infra == marker
    real = triage("failure", facts(failed, FailedTest("smoke", "test_add", "RuntimeError: shape mismatch")))
    assert real.verdict is Verdict.FAILED


def test_failures_trunk_has_are_broken_trunk() -> None:
    trunk = facts(ASSERT)
    assert triage("failure", facts(ASSERT), trunk=trunk) == Triage(
        Verdict.BROKEN_TRUNK, "every failure also fails on fork trunk", broken_trunk=(ASSERT.key,)
    )
    other = FailedTest("smoke", "test_sum", "assert 1 == 2")
    mixed = triage("failure", facts(ASSERT, other), trunk=trunk)
    assert (mixed.verdict, mixed.broken_trunk) == (Verdict.FAILED, (ASSERT.key,))


@pytest.mark.parametrize(
    "problem",
    [
        "the command exited with status 139 but its JUnit XML shows no failure; its output ends:\nSegfault",
        "the command wrote no benchmarks to {benchmarks}",
        "the benchmarks file is not a JSON list of benchmarks: 1 validation error for list[Benchmark]",
        "ran 3 tests, expected 10 (expected_tests)",
    ],
)
def test_a_suite_that_failed_on_its_own_beside_trunks_failures_is_no_broken_trunk(problem: str) -> None:
    """Trunk fails the head's one failing test too, but another suite of the head failed with no failing
    test (the problem runners.commands or runners.run writes): the head's own failure, bisected, not
    trunk's; its reason is that suite's problem, not trunk's test."""
    lit = SuiteFacts("lit", "failed", 500, passed=500, problems=(problem,))
    head = ReportFacts((facts(ASSERT, problems=("1 test failed: test_add",)).suites[0], lit), (ASSERT,))
    found = triage("failure", head, trunk=facts(ASSERT))
    assert found == Triage(Verdict.FAILED, problem[:200], broken_trunk=(ASSERT.key,))


def test_a_long_broken_trunk_list_is_cut_by_whole_lines_and_room_is_kept_for_a_note() -> None:
    """A shared lit failure list of thousands: the summary names 30, as the failing tests' list does, and a
    note appended later (an Actions re-run not counted) still goes in whole."""
    failures = tuple(
        FailedTest("lit", f"test/Conversion/case_{i:04}.mlir", "FileCheck failed") for i in range(3000)
    )
    broken = triage("failure", facts(*failures), trunk=facts(*failures))
    assert broken.verdict is Verdict.BROKEN_TRUNK and len(broken.broken_trunk) == 3000
    out = completed(run(L1, verdict=Verdict.BROKEN_TRUNK), Shown(facts(*failures), broken))
    assert out.summary.count("- `lit::test/Conversion/case_") == 30 and "- … and 2970 more" in out.summary
    failed = completed(
        run(L1, verdict=Verdict.FAILED), Shown(facts(*failures), triage("failure", facts(*failures)))
    )
    assert (
        failed.summary.count("- `lit::test/Conversion/case_") == 30 and "- … and 2970 more" in failed.summary
    )
    note = "\n\nGitHub Actions re-ran this tier's workflow.\n"
    kept = fit_for_github("x" * 70_000, what="a check run's summary", room=len(note))
    assert len(kept + note) < GITHUB_TEXT_MAX_CHARS and (kept + note).endswith(note)
    assert fit_for_github("x" * 100, room=len(note)) == "x" * 100


def test_a_low_confidence_compile_time_regression_is_shown_but_asks_the_gate_for_no_signoff() -> None:
    """One cold compile a side, 5 % slower: listed on the check run as low confidence, never stored as a
    regression the gate wants signed off; the same head's confident latency regression is."""
    from tests.test_runners_compare import benchmark, noisy
    from tests.test_runners_compare import report as bench_report

    config = parse_config("performance:\n  critical: [softmax]\n")
    trunk = bench_report(
        benchmark(noisy(1, 60), kernel="layer_norm", compile_cold_ms=500.0),
        benchmark(noisy(2, 60), kernel="softmax", compile_cold_ms=500.0),
    )
    head = bench_report(
        benchmark(noisy(3, 60), kernel="layer_norm", compile_cold_ms=525.0),
        benchmark(noisy(4, 60, shift=0.25), kernel="softmax", compile_cold_ms=500.0),
    )
    judged = compared(head, trunk, config)
    cold = {c.kernel: c for c in judged.cells if c.metric.value == "compile_cold"}  # type: ignore[union-attr]
    assert cold["layer_norm"].verdict.value == "regressed" and cold["layer_norm"].measurement.low_confidence
    assert "low confidence" in (rendered(judged) or "")
    assert {(r.kernel, r.critical) for r in regressed(judged)} == {("softmax", True)}  # its latency only


def test_the_check_run_summary_annotations_and_actions() -> None:
    failed = run(L1, verdict=Verdict.FAILED)
    shown = Shown(
        facts(ASSERT), triage("failure", facts(ASSERT)), owner="@org/l1-owners", regressions="| x |"
    )
    out = completed(failed, shown)
    assert (out.status, out.conclusion) == ("completed", "failure")
    assert "| `smoke` | failed | 10 | 10 | 9 | 1 | 0 | 0 |" in out.summary
    assert "gpu_model `H200`" in out.summary and "context `ffffffffffff`" in out.summary
    assert "@org/l1-owners" in out.summary and "| x |" in out.summary
    assert (
        out.annotations[0]["path"] == "python/test/unit/test_add.py"
        and out.annotations[0]["start_line"] == 41
    )
    assert out.actions[0]["identifier"] == "rerun"
    infra = completed(
        run(L1, verdict=Verdict.INFRA), Shown(facts(BUSY), triage("failure", facts(BUSY)), retrying=True)
    )
    assert (infra.status, infra.conclusion) == ("in_progress", None) and "infrastructure" in infra.title


def test_annotations_are_one_per_location_at_most_fifty_in_one_request_and_the_summary_counts_the_rest() -> (
    None
):
    many = tuple(FailedTest("s", f"t{i}", f"a.py:{i + 1}: AssertionError " + "x" * 1000) for i in range(120))
    out = completed(run(L1, verdict=Verdict.FAILED), Shown(facts(*many), triage("failure", facts(*many))))
    (body,) = out.requests()
    annotated = body["output"]["annotations"]
    assert [a["start_line"] for a in annotated] == list(range(1, 51)) and MAX_ANNOTATIONS == 50
    assert len(body["output"]["summary"]) < 65_536 and "conclusion" in body
    assert "_70 failures not annotated on the diff: one annotation per location, at most 50;" in out.summary
    # a shared fixture breaks: every test fails at its line, as pytest's JUnit says
    fixture = "tests/conftest.py:42: in fixture\n    assert x\nE   AssertionError"
    broken = tuple(FailedTest("unit", f"tests/test_m.py::test_{i}", fixture) for i in range(8000))
    out = completed(run(L1, verdict=Verdict.FAILED), Shown(facts(*broken), triage("failure", facts(*broken))))
    (body,) = out.requests()
    assert [(a["path"], a["start_line"]) for a in body["output"]["annotations"]] == [
        ("tests/conftest.py", 42)
    ]
    assert "_7999 failures not annotated on the diff" in out.summary


def test_a_log_tail_of_huge_lines_keeps_the_newest_lines_cut_and_its_code_block_closed() -> None:
    """A run with no report shows its log's end; a minified line can be megabytes, and ``` in it must
    not close the block."""
    log = "\n".join([*(f"line {i} " + "x" * 100_000 for i in range(60)), "```", "the last line"])
    out = completed(
        run(L1, verdict=Verdict.FAILED), Shown(None, triage("failure", None, log=log), log_tail=log)
    )
    summary = out.requests()[0]["output"]["summary"]
    assert "(cut: GitHub limits" not in summary and len(summary) < 15_000
    block = summary.split("```text\n")[1]
    assert block.count("```") == 1 and "the last line\n```\n" in block  # one fence: the one closing it
    assert f"### The run's log (last {len(block.split('```')[0].splitlines())} lines)" in summary
    shown = block.split("```")[0].splitlines()
    assert shown[-2:] == ["'''", "the last line"] and shown[-3].startswith("line 59 x")
    assert all(len(line) <= 500 for line in shown) and shown[-3].endswith("…")


def test_an_l3_whose_tests_passed_but_whose_metrics_regressed_says_so_in_its_title() -> None:
    passed = run(L3, verdict=Verdict.PASSED)
    plain = completed(passed, Shown(facts(), triage("success", facts())))
    assert plain.title == "L3: passed (10 tests)" and "/signoff l3" not in plain.summary
    out = completed(passed, Shown(facts(), triage("success", facts()), regressions="| x |", regressed=2))
    assert out.title == "L3: tests passed (10 tests), 2 metrics regressed beyond noise"
    assert out.conclusion == "success"  # the gate, not the tier, weighs the metrics (`/signoff l3`)
    assert "`/signoff l3` on this head" in out.summary


def test_a_refused_dispatch_says_why_and_is_not_retried() -> None:
    out = refused(L1, status=422, message='Unexpected inputs provided: ["request"]', owner=None)
    assert out.conclusion == "action_required" and "HTTP 422" in out.title and "not retried" in out.summary


@pytest.mark.parametrize("level", [L1, L2, L3])
def test_the_workflow_templates_take_what_sluice_sends(level: Level) -> None:
    tier = getattr(CONFIG.tiers, level.value)
    workflow = yaml.safe_load(
        (Path(__file__).parent.parent / "deploy" / "workflows" / tier.workflow).read_text()
    )
    inputs = workflow[True]["workflow_dispatch"]["inputs"]  # YAML 1.1 reads a bare `on` as True
    sent = workflow_inputs(BUNDLE, dataclasses.replace(run(level), id=3))
    assert set(inputs) == set(sent) and all(spec["required"] for spec in inputs.values())
    assert {spec["type"] for spec in inputs.values()} <= {"number", "string"}
    assert {name for name, spec in inputs.items() if spec["type"] == "string"} == {"head_sha", "baseline_sha"}
    job = workflow["jobs"]["tier"]
    runs_on = job["runs-on"] if isinstance(job["runs-on"], list) else [job["runs-on"]]
    assert tuple(runs_on) == tier.runs_on and job["timeout-minutes"] == tier.timeout_minutes
    assert job.get("environment") == ("compiler-production-gate" if level is L3 else None)
    assert "request ${{ inputs.request }}" in workflow["run-name"]
    script = "\n".join(step.get("run", "") for step in job["steps"])
    assert "${{" not in script  # inputs reach the shell through the environment only, after the checks
    assert any(step.get("uses", "").startswith("actions/upload-artifact") for step in job["steps"])


def test_an_artifact_of_more_files_than_the_tier_uploads_is_refused_unread() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("report.json", "{}")
        for n in range(MAX_ZIP_MEMBERS):
            archive.writestr(f"junk/{n}", "")
    unpacked = unpack(buffer.getvalue(), "success")
    assert unpacked.report is None
    assert unpacked.problem == (
        f"the `sluice-tier-report` artifact holds {MAX_ZIP_MEMBERS + 1} files, over the limit of "
        f"{MAX_ZIP_MEMBERS}: refused"
    )


def damaged(how: str) -> bytes:
    """An artifact whose zip directory reads but whose report.json does not, as `how` damaged it."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("report.json", "{" + '"x": 1,' * 2000 + "}")
        archive.writestr("tier.log", "log line")
    data = bytearray(buffer.getvalue())
    local, central = data.find(b"PK\x03\x04"), data.find(b"PK\x01\x02")
    if how == "deflate stream":
        start = data.find(b"report.json") + len("report.json")
        data[start + 5 : start + 40] = bytes(b ^ 0xFF for b in data[start + 5 : start + 40])
    elif how == "encrypted":  # a zip a tool wrote with a password
        data[local + 6] |= 1
        data[central + 8] |= 1
    elif how == "compression":  # a method zipfile cannot read
        data[local + 8] = data[central + 10] = 99
    return bytes(data)


@pytest.mark.parametrize("how", ["deflate stream", "encrypted", "compression"])
def test_a_damaged_artifact_is_a_run_without_a_report_that_says_so(how: str) -> None:
    unpacked = unpack(damaged(how), "success")
    assert unpacked.report is None and unpacked.conclusion == "success"
    assert (unpacked.problem or "").startswith("the `sluice-tier-report` artifact is damaged (")


def test_a_report_is_read_from_the_artifact_and_checked() -> None:
    assert unpack(None, "success").problem == "the run uploaded no `sluice-tier-report` artifact"
    assert unpack(b"not a zip", "success").problem == "the `sluice-tier-report` artifact is not a zip archive"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("report.json", "{}")
        archive.writestr("tier.log", "log line")
    unpacked = unpack(buffer.getvalue(), "failure")
    assert (unpacked.report, unpacked.log, unpacked.problem) == ("{}", "log line", None)
    l1 = run(L1, RunState.DISPATCHED, verdict=None)
    assert "malformed" in (read_report(Finished("success", "{}"), l1)[1] or "")
    report = {
        "schema": "sluice.tier-report/1",
        "run": {"tier": "l1", "head_sha": OLD, "started_at": NOW.isoformat(), "finished_at": NOW.isoformat()},
        "environment": {
            "python": "3.11",
            "cpu": "x",
            "os": "linux",
            "interpreter": True,
            "context_hash": "h",
        },
    }
    assert read_report(Finished("success", json.dumps(report)), l1) == (
        None,
        f"the tier report is for commit {OLD}, not {HEAD}",
    )
    report["run"]["head_sha"] = HEAD  # type: ignore[index]
    parsed, problem = read_report(Finished("success", json.dumps(report)), l1)
    assert problem is None and parsed is not None and parsed.run.head_sha == HEAD


@pytest.mark.parametrize(
    ("suites", "said"),
    [
        ([{"executed": 1, "passed": 1}, {"executed": 2, "passed": 2}], "two suites are named 'unit'"),
        ([{"executed": -5, "passed": -5}], "suites.0.executed"),
        ([{"executed": 3, "passed": 3, "duration_s": -10}], "suites.0.duration_s"),
        ([{"executed": 3, "passed": 0, "failed": 3}], "'unit' passed, but 3 of its tests failed"),
        ([{"executed": 3, "passed": 3, "expected": 500}], "'unit' passed, but it ran 3 tests, expected 500"),
        ([{"executed": 1, "passed": 1, "tests": "failed"}], "'unit' passed, but its test 't1' is failed"),
    ],
)
def test_a_report_that_contradicts_itself_ends_the_run_with_its_problem_not_a_pass(
    suites: list[dict[str, Any]], said: str
) -> None:
    """Read, a `passed` suite with failed tests, too few of them or a twin would pass the tier (and a
    bisection's probe): the run fails with the report's problem instead."""
    env = {"python": "3.11", "cpu": "x", "os": "linux", "interpreter": False, "context_hash": "h"}
    times = {"started_at": NOW.isoformat(), "finished_at": NOW.isoformat()}
    outcome = suites[-1].pop("tests", "passed")
    report = {
        "schema": "sluice.tier-report/1",
        "run": {"tier": "l1", "head_sha": HEAD, **times},
        "environment": env,
        "suites": [{"name": "unit", "kind": "command", "outcome": "passed", **s} for s in suites],
        "tests": [{"suite": "unit", "name": "t1", "outcome": outcome, "message": "AssertionError: 1 != 2"}],
    }
    parsed, problem = read_report(Finished("success", json.dumps(report)), run(L1, RunState.DISPATCHED))
    assert parsed is None and (problem or "").startswith("the tier report is malformed: ")
    assert said in (problem or "")
    assert triage("success", None, report_problem=problem).verdict is Verdict.FAILED


@pytest.mark.parametrize("timing", ["0.0", "-2.5", "NaN", "Infinity"])
def test_a_report_with_a_timing_that_is_not_a_positive_number_is_malformed_not_compared(timing: str) -> None:
    """Compared, such a time divides by zero (or poisons every statistic): the run ends with the report's
    problem, and a kept one is no baseline, instead of the comparison raising on each read of it."""
    bench = {
        "suite": "bench",
        "kernel": "matmul",
        "shape": [64, 64],
        "dtype": "fp16",
        "warmup_iters": 1,
        "measured_iters": 3,
        "warmup_budget_ms": 1.0,
        "measure_budget_ms": 1.0,
        "samples_ms": [1.0, 1.1, 12345.678],
        "median_ms": 1.1,
        "p10_ms": 1.0,
        "p90_ms": 1.1,
        "p99_ms": 1.1,
        "iqr_ms": 0.1,
        "comparable": True,
    }
    env = {"python": "3.11", "cpu": "x", "os": "linux", "interpreter": False, "context_hash": "h"}
    times = {"started_at": NOW.isoformat(), "finished_at": NOW.isoformat()}
    report = {"run": {"tier": "l3", "head_sha": HEAD, **times}, "environment": env, "benchmarks": [bench]}
    text = json.dumps({"schema": "sluice.tier-report/1", **report})
    l3 = run(L3, RunState.DISPATCHED, verdict=None)
    assert read_report(Finished("success", text), l3)[0] is not None and parse_report(text) is not None
    broken = text.replace("12345.678", timing)
    parsed, problem = read_report(Finished("success", broken), l3)
    assert parsed is None and "the tier report is malformed" in (problem or "")
    assert "benchmarks.0.samples_ms.2" in (problem or "")
    assert parse_report(broken) is None


def test_an_emergency_pick_runs_the_tiers_its_gate_requires() -> None:
    emergency = dataclasses.replace(BUNDLE, kind=SubjectKind.EMERGENCY, ingestion="emergency-abcdef0123")
    first = [Dispatch(L1, 1, Selection.FULL, "every ingestion and fork PR runs L1")]
    assert next_actions(emergency, [], CONFIG, now=NOW) == first
    assert next_actions(emergency, [run(L1)], CONFIG, now=NOW) == []  # L1 alone by default
    assert next_actions(emergency, [run(L1)], CONFIG, now=NOW, want=Want(l3=True)) == [
        Dispatch(L2, 1, Selection.FULL, "L1 passed")
    ]
    l3 = parse_config("gate:\n  emergency_required_tiers: [l1, l3]\n")  # L3 needs L2 below it
    assert next_actions(emergency, [run(L1)], l3, now=NOW) == [
        Dispatch(L2, 1, Selection.FULL, "L1 passed; the emergency gate requires it")
    ]
    assert next_actions(emergency, [run(L1), run(L2)], l3, now=NOW)[0].level is L3  # type: ignore[union-attr]
    # a person's re-run of a tier its gate does not require, where it never ran: its first run
    assert next_actions(emergency, [run(L1)], CONFIG, now=NOW, want=Want(rerun=L2)) == [
        Dispatch(L2, 1, Selection.FULL, "L1 passed")
    ]


def test_a_local_tier_run_sees_the_toolchain_not_the_bots_settings_or_credentials(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from bot.flows.local_tier import SLUICE_ROOT, _environment

    for name, value in {
        "SLUICE_WEBHOOK_SECRET": "s3cret",
        "AWS_SECRET_ACCESS_KEY": "k",
        "PGPASSWORD": "p",
        "HOME": "/root",
        "TRITON_INTERPRET": "1",
        "CUDA_VISIBLE_DEVICES": "0",
        "KEPT_FOR_TESTS": "x",
        "SLUICE_TIER_PASS_ENV": "KEPT_FOR_TESTS, SLUICE_DATABASE_URL",
        "SLUICE_DATABASE_URL": "postgresql://u:p@db/sluice",
    }.items():
        monkeypatch.setenv(name, value)
    env = _environment(tmp_path)
    assert {"SLUICE_WEBHOOK_SECRET", "AWS_SECRET_ACCESS_KEY", "PGPASSWORD", "SLUICE_DATABASE_URL"}.isdisjoint(
        env
    )
    assert env["HOME"] == env["TMPDIR"] == str(tmp_path)  # not the bot's home (its credentials, its config)
    assert (
        env["TRITON_INTERPRET"] == "1" and env["CUDA_VISIBLE_DEVICES"] == "0" and env["KEPT_FOR_TESTS"] == "x"
    )
    assert "PATH" in env and env["PYTHONPATH"].split(os.pathsep)[0] == str(SLUICE_ROOT)


def test_the_runner_lost_marker_looks_a_bounded_way_along_the_line() -> None:
    marker = INFRA_MARKERS["runner lost"]  # bounded, so a 700 kB line costs linear time, not quadratic
    assert marker.search("The self-hosted runner lost communication with the server.")
    assert marker.search("runner gpu-7 went offline") and not marker.search(
        "runner " + "x" * 100 + " offline"
    )


SPAWNS_A_SLEEPER = """import pathlib, subprocess, sys, time
sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
pathlib.Path(sys.argv[1]).write_text(str(sleeper.pid))
time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")  # a zombie (killed, not yet reaped) is no longer running
    return not (status.is_file() and "\nState:\tZ" in status.read_text())


def test_a_local_tier_past_its_timeout_is_stopped_with_everything_it_started(tmp_path: Path) -> None:
    """The tier command's own child (a grandchild of the runner, in the session the runner gives each
    command) is killed too, and the run returns as timed out instead of waiting for it."""
    import subprocess
    import sys
    import time

    from bot.flows.local_tier import run_local

    repo, pidfile = tmp_path / "fork", tmp_path / "sleeper.pid"
    (repo / "ci").mkdir(parents=True)
    (repo / "ci" / "spawn.py").write_text(SPAWNS_A_SLEEPER)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "spawn"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    command = json.dumps([sys.executable, "ci/spawn.py", str(pidfile)])
    config = parse_config(f"tiers:\n  l1:\n    suites: [{{name: unit, command: {command}}}]\n")
    tier_run = run(Level.L1, RunState.DISPATCHED, verdict=None, head=head.stdout.strip())
    started = time.monotonic()
    assert run_local(repo / ".git", tier_run, config=config, baseline_sha=BASE, timeout_s=12) is None
    assert time.monotonic() - started < 60  # not the sleepers' 300 s
    sleeper = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while _alive(sleeper) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(sleeper)


def test_the_failed_levels_are_the_tiers_whose_check_run_failed_or_timed_out() -> None:
    def check(name: str, status: str, conclusion: str | None) -> CheckRun:
        return CheckRun(id=1, name=name, head_sha="a" * 40, status=status, conclusion=conclusion)

    checks = {
        "sluice/L1": check("sluice/L1", "completed", "timed_out"),
        "sluice/L2": check("sluice/L2", "completed", "success"),
        "sluice/L3": check("sluice/L3", "completed", "failure"),
        "sluice/gate": check("sluice/gate", "completed", "failure"),  # not a tier a re-run starts
    }
    assert failed_levels(checks) == [Level.L1, Level.L3]
    assert failed_levels({"sluice/L1": check("sluice/L1", "in_progress", None)}) == []
    assert failed_levels({}) == []
