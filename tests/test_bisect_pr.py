"""A PR's bisection, the pure part: a probe's tier run as an outcome, literal prefixes, what the PR shows,
and a blamed commit rooting a risky chain under the rules and a risk model alike."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from bot.core import bisect
from bot.core.bisect import Outcome
from bot.core.bisect_pr import (
    COMMENT_MARKER,
    BisectionRecord,
    ProbeRun,
    Status,
    candidate_branch,
    culprit_detail,
    culprit_reason,
    is_build_failure,
    literal_head,
    outcome_of,
    probe_suite,
    regression_outcome_of,
    regression_reason,
    render,
    should_bisect,
)
from bot.core.calibrated import rules_selection, structural_why
from bot.core.config import SluiceConfig
from bot.core.ingestion import Links
from bot.core.l3_metrics import MetricComparison, MetricRegression, regression_outcome
from bot.core.models import RiskLevel
from bot.core.planner import RISKY_FROM, classify
from bot.core.tiers import Level, RunState, TierRun, Verdict
from tests.test_planner import commit

AT = datetime(2026, 11, 2, tzinfo=UTC)
UPSTREAM = [f"{i:x}" * 40 for i in range(1, 9)]
FORKED = [f"{i:x}{i:x}" * 20 for i in range(1, 9)]


def run(
    verdict: Verdict | None, *, state: RunState = RunState.COMPLETED, attempt: int = 1, detail: str = ""
) -> TierRun:
    return TierRun(
        "meta/triton",
        7,
        "bundle-1",
        Level.L1,
        "a" * 40,
        attempt,
        state,
        AT,
        verdict=verdict,
        detail=detail,
        bisection=1,
        probe=1,
    )


@pytest.mark.parametrize(
    ("tier_run", "build_failure", "expected"),
    [
        (run(Verdict.PASSED), False, Outcome.PASS),
        (run(Verdict.BROKEN_TRUNK), False, Outcome.PASS),  # trunk's own failures are not the bundle's
        (run(Verdict.FAILED, detail="AssertionError: tensors not close"), False, Outcome.FAIL),
        (run(Verdict.INFRA, attempt=1), False, None),  # retried, as the tiers retry
        (run(Verdict.INFRA, attempt=2), False, None),
        (run(Verdict.INFRA, attempt=3), False, Outcome.SKIP),  # past the tier's 2 retries: says nothing
        (run(Verdict.FAILED, detail="lib/a.cpp:3: error: no member named 'x'"), False, Outcome.SKIP),
        (
            run(Verdict.FAILED, detail="CompilationError: at 1:4"),
            True,
            Outcome.FAIL,
        ),  # a build failure bisected
        (run(None, state=RunState.TIMED_OUT), False, Outcome.SKIP),
        (run(None, state=RunState.REFUSED), False, Outcome.SKIP),
    ],
)
def test_a_probes_tier_run_as_an_outcome(
    tier_run: TierRun, build_failure: bool, expected: Outcome | None
) -> None:
    assert outcome_of(tier_run, retries=2, build_failure=build_failure) is expected


def test_build_failures_are_told_from_test_failures() -> None:
    assert is_build_failure("ninja: build stopped: subcommand failed")
    assert is_build_failure("E   ModuleNotFoundError: No module named 'tlx'")
    assert not is_build_failure("ci/check.py:14: AssertionError: tensors not close")


def test_only_a_real_failure_of_more_than_one_commit_is_bisected() -> None:
    own = dataclasses.replace(run(Verdict.FAILED), bisection=None, probe=None)
    assert should_bisect(own, commits=16)
    assert not should_bisect(own, commits=1)
    assert not should_bisect(dataclasses.replace(own, verdict=Verdict.INFRA), commits=16)
    assert not should_bisect(dataclasses.replace(own, verdict=Verdict.BROKEN_TRUNK), commits=16)
    assert not should_bisect(dataclasses.replace(own, state=RunState.TIMED_OUT, verdict=None), commits=16)
    assert not should_bisect(run(Verdict.FAILED), commits=16)  # a probe's failure starts nothing


def record(**changes: object) -> BisectionRecord:
    state = bisect.start("bundle-1", UPSTREAM, tier="l1", budget=bisect.Budget(max_runs=9))
    base = BisectionRecord(
        fork="meta/triton",
        pull=7,
        ingestion="bundle-1",
        level=Level.L1,
        head_sha=FORKED[-1],
        base_sha="f" * 40,
        fork_commits=tuple(FORKED),
        state=state,
        reason="unit::test_a: AssertionError `x` | <b>@team</b>",
    )
    return base.model_copy(update=changes)


def test_a_literal_prefix_is_the_prs_own_commit_until_a_culprit_is_taken_out() -> None:
    r = record()
    _, (probe,) = bisect.next_probes(r.state)
    assert len(probe.commits) == 4 and literal_head(r, probe) == FORKED[3]
    after = bisect.start("bundle-1", UPSTREAM, tier="l1")
    after = after.model_copy(update={"removed": (UPSTREAM[1],), "hi": None, "generation": 1})
    _, (rest,) = bisect.next_probes(after)
    assert literal_head(r.model_copy(update={"state": after}), rest) is None  # picked again onto the base
    assert candidate_branch("bundle-1", 3, 2) == "sluice/bisect/bundle-1/3-2"


def test_the_comment_shows_probes_suspects_and_budget_and_no_markup_from_the_failure() -> None:
    r = record()
    state, (probe,) = bisect.next_probes(r.state)
    r = r.model_copy(update={"state": state}).with_probe(
        ProbeRun(probe=probe.id, branch="b", head=FORKED[3], run=5)
    )
    shown = render(r)
    assert shown.startswith(COMMENT_MARKER) and "running (1 probes in flight)" in shown
    # the probe's head is the fork's commit, bare so that GitHub links it; upstream's are in code
    assert f"| 1 | first 4, up to `{UPSTREAM[3][:10]}` | {FORKED[3][:12]} | running |" in shown
    assert "0 of 9 tier runs used" in shown and "Suspects left: 8" in shown
    assert "<b>" not in shown and "@team" not in shown and "`x`" not in shown

    state = bisect.record(state, probe.id, Outcome.PASS)
    spent = r.model_copy(update={"state": state.model_copy(update={"phase": bisect.Phase.EXHAUSTED})})
    exhausted = render(spent.model_copy(update={"status": Status.EXHAUSTED}))
    assert "The budget is spent" in exhausted and "among 4 commits" in exhausted


def test_the_comment_links_upstream_commits_where_upstream_is_on_a_known_web_host() -> None:
    """Suspects and culprits are upstream commits: a reader opens them on upstream's pages."""
    r = record()
    culprit = bisect.Culprit(shas=(UPSTREAM[2],), dependents=(UPSTREAM[3],), runs=3)
    done = r.model_copy(
        update={"status": Status.DONE, "state": r.state.model_copy(update={"culprits": (culprit,)})}
    )
    web = "https://github.com/triton-lang/triton"
    links = Links(upstream_web=web, fork_clone_url="https://github.com/o/f.git", fork_branch="main")
    shown = render(done, links=links)
    first, dependent = (f"[`{s[:10]}`]({web}/commit/{s})" for s in UPSTREAM[2:4])
    assert f"- {first} (found in 3 runs, confirmed); with its dependents {dependent}" in shown
    suspects = render(r, links=links)
    assert f"Suspects left: 8 ([`{UPSTREAM[0][:10]}`]({web}/commit/{UPSTREAM[0]})" in suspects
    assert f"- `{UPSTREAM[2][:10]}` (found in 3 runs" in render(done)  # no web host: the plain SHA


def test_a_merge_forks_comment_says_what_after_the_culprit_was_not_tried() -> None:
    r = record()
    culprit = bisect.Culprit(shas=(UPSTREAM[2],), dependents=(), runs=3)
    state = r.state.model_copy(update={"culprits": (culprit,), "untried": tuple(UPSTREAM[3:])})
    shown = render(r.model_copy(update={"status": Status.DONE, "state": state}))
    assert f"Not tried: the {len(UPSTREAM) - 3} commits after the culprit, from `{UPSTREAM[3][:10]}`" in shown
    assert "Not tried" not in render(r)


def test_a_blamed_commit_roots_a_risky_chain_and_its_dependents_follow() -> None:
    detail = culprit_detail(record())
    assert detail.startswith("L1 failed on #7 (bundle-1): unit::test_a: AssertionError")
    assert "@team" not in detail and "<b>" not in detail  # it goes into the chain PR's body
    reason = culprit_reason(detail)
    assert reason.level is RiskLevel.CRITICAL and reason.kind.value == "bisected"
    blamed = commit(2).model_copy(update={"risk": RiskLevel.CRITICAL, "reasons": (reason,)})
    commits = [commit(1), blamed, commit(3, after=(2,)), commit(4)]
    bundles, chains = classify(commits, symbol_keys={}, prior=(), ingested=set(), config=SluiceConfig())
    assert [[c.sha for c in b.commits] for b in bundles] == [[commit(1).sha, commit(4).sha]]
    assert [[c.sha for c in ch.commits] for ch in chains] == [[blamed.sha, commit(3).sha]]
    assert blamed.sha in rules_selection(commits, risky_from=RISKY_FROM).chosen
    assert structural_why(blamed) is not None  # a risk model chains it whatever its probability


# --- a performance bisection (L3 passed its tests, its comparison regressed) --------------------------------

MM = MetricRegression("matmul[1024x1024:fp16] · median", 0.25, 0.325, "slower by 30 %")
SOFTMAX = MetricRegression("softmax[1024x1024:fp16] · median", 0.1, 0.13, "slower by 30 %")


def measured(
    *regressed: MetricRegression, also: tuple[str, ...] = (MM.name, SOFTMAX.name)
) -> MetricComparison:
    """A comparison that measured `also` (and what regressed) with confidence."""
    return MetricComparison(regressed, frozenset({*also, *(r.name for r in regressed)}))


@pytest.mark.parametrize(
    ("names", "comparison", "expected"),
    [
        ((MM.name,), measured(MM), Outcome.FAIL),
        ((MM.name, SOFTMAX.name), measured(SOFTMAX), Outcome.FAIL),  # one of them still regressed
        ((MM.name,), measured(SOFTMAX), Outcome.PASS),  # another kernel's regression is not this one
        ((MM.name,), measured(), Outcome.PASS),
        ((MM.name,), None, Outcome.SKIP),  # no comparable benchmarks: it cannot say
        # the bisected metric missing, not comparable or only of low confidence: no evidence it got faster
        ((MM.name,), measured(also=(SOFTMAX.name,)), Outcome.SKIP),
    ],
)
def test_the_metric_oracle(
    names: tuple[str, ...], comparison: MetricComparison | None, expected: Outcome
) -> None:
    assert regression_outcome(names, comparison) is expected


@pytest.mark.parametrize(
    ("tier_run", "comparison", "expected"),
    [
        (run(Verdict.PASSED), measured(MM), Outcome.FAIL),
        (run(Verdict.PASSED), measured(), Outcome.PASS),
        (run(Verdict.FAILED, detail="AssertionError"), measured(), Outcome.PASS),  # the metric alone answers
        (run(Verdict.PASSED), None, Outcome.SKIP),
        (run(Verdict.PASSED), measured(also=()), Outcome.SKIP),  # it ran, but never measured the metric
        (run(Verdict.INFRA, attempt=1), measured(MM), None),  # retried, as the tiers retry
        (run(Verdict.INFRA, attempt=3), measured(MM), Outcome.SKIP),
        (run(None, state=RunState.TIMED_OUT), None, Outcome.SKIP),
    ],
)
def test_a_performance_probe_as_an_outcome(
    tier_run: TierRun, comparison: MetricComparison | None, expected: Outcome | None
) -> None:
    assert regression_outcome_of(tier_run, comparison, names=(MM.name,), retries=2) is expected


def test_a_performance_bisection_says_what_it_bisects_and_its_culprit_carries_the_regression() -> None:
    r = record(
        level=Level.L3,
        regressions=(MM.name,),
        baseline_run=41,
        reason=regression_reason([MM]),
        state=bisect.start("bundle-1", UPSTREAM, tier="l3", kind=bisect.Kind.REGRESSION),
    )
    assert r.kind is bisect.Kind.REGRESSION and record().kind is bisect.Kind.FAILURE
    shown = render(r)
    assert "### Bisection of L3 (a performance regression) on" in shown
    assert "baseline report (tier run 41)" in shown and "`matmul[1024x1024:fp16] · median`" in shown
    detail = culprit_detail(r)
    assert detail.startswith("L3 regressed on #7 (bundle-1): matmul")
    assert "0.25 ms before, 0.325 ms after (+30.0%)" in detail


@pytest.mark.parametrize(
    ("failing", "ran", "expected"),
    [
        ({"sweep"}, None, 1),  # the one suite that failed
        ({"bench", "sweep"}, None, None),  # several: the whole tier (the selection names one suite)
        (set(), None, None),  # none could be named (no report: a time-out, a refused dispatch)
        ({"tlx"}, None, None),  # an internal extension's suite L1 adds: not one of the tier's own
        ({"bench"}, 1, 1),  # the PR's run ran one suite alone (`/l3 sweep`): its probes run that one
        (set(), 7, None),  # past the tier's suites (the config changed): the whole tier
    ],
)
def test_a_probe_runs_only_the_suite_that_failed(
    failing: set[str], ran: int | None, expected: int | None
) -> None:
    assert probe_suite(["bench", "sweep"], failing, ran=ran) == expected


def test_the_comment_names_the_one_suite_probes_run() -> None:
    assert "run only the suite" not in render(record())
    shown = render(record(suite=0, suite_name="unit"))
    assert "Its probes run only the suite `unit` of L1 (what failed)." in shown
