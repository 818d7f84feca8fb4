"""Trunk watch's decisions (bot.core.trunk_watch) and its store (bot.db.trunk_watch)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.core import bisect
from bot.core.config import ConfigError, SluiceConfig, TrunkWatch, parse_config
from bot.core.l3_metrics import MetricComparison
from bot.core.tiers import Level
from bot.core.trunk_watch import (
    Change,
    MetricRegression,
    Phase,
    RunOutcomes,
    Sighting,
    Suspect,
    Tracked,
    Worse,
    begin,
    due,
    levels,
    marker,
    probe_outcome,
    render,
    run_broke,
    settle,
    sighted,
    suspects,
    title,
    worsened,
)
from bot.db.store import Store
from bot.db.trunk_watch import TrunkWatchStore

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
A, B, C, D, G = (letter * 40 for letter in "abcd9")
FORK = "meta/triton"


def outcomes(tests: dict[str, str], *, suites: tuple[str, ...] = ("unit",)) -> RunOutcomes:
    return RunOutcomes(outcomes=tests, messages={k: f"{k} says no" for k in tests}, suites=frozenset(suites))


# --- what got worse ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after", "new"),
    [
        ({"unit::a": "passed"}, {"unit::a": "failed"}, ["unit::a"]),
        ({"unit::a": "passed"}, {"unit::a": "error"}, ["unit::a"]),
        ({"unit::a": "failed"}, {"unit::a": "failed"}, []),  # failing already: trunk's old news
        ({}, {"unit::a": "failed"}, []),  # never passed: nothing got worse
        ({"unit::a": "skipped"}, {"unit::a": "failed"}, []),
        (
            {"unit::a": "passed", "unit::b": "passed"},
            {"unit::b": "failed", "unit::a": "failed"},
            ["unit::a", "unit::b"],
        ),
        ({"unit::a": "passed"}, {"unit::a": "passed"}, []),
    ],
)
def test_new_failing_tests_are_those_that_passed_before(
    before: dict[str, str], after: dict[str, str], new: list[str]
) -> None:
    found = worsened(outcomes(before), outcomes(after))
    assert [w.name for w in found] == new and all(w.kind is Change.TEST for w in found)
    assert all(w.evidence == f"{w.name} says no" for w in found)


def test_metric_regressions_come_after_the_tests_with_before_and_after() -> None:
    regressions = [MetricRegression("matmul-fp16 · median", 1.0, 1.25, "slower by 25 %")]
    (test, metric) = worsened(outcomes({"unit::a": "passed"}), outcomes({"unit::a": "failed"}), regressions)
    assert (test.kind, metric.kind) == (Change.TEST, Change.METRIC)
    assert metric.name == "matmul-fp16 · median"
    assert metric.evidence == "1 ms before, 1.25 ms after (+25.0%): slower by 25 %"


TEST = Worse(kind=Change.TEST, name="unit::a", evidence="x")
METRIC = Worse(kind=Change.METRIC, name="mm · median", evidence="x")
RUN = run_broke("the run uploaded no tier report", "ld: cannot find -ltriton\n")


def compared(*regressed: MetricRegression) -> MetricComparison:
    """A comparison that measured `mm · median` and what regressed, with confidence."""
    return MetricComparison(regressed, frozenset({"mm · median", *(r.name for r in regressed)}))


@pytest.mark.parametrize(
    ("worse", "probe", "regressions", "answer"),
    [
        (TEST, outcomes({"unit::a": "failed"}), None, bisect.Outcome.FAIL),
        (TEST, outcomes({"unit::a": "passed"}), None, bisect.Outcome.PASS),
        (TEST, outcomes({"unit::b": "passed"}), None, bisect.Outcome.PASS),  # the test came later
        (TEST, outcomes({}, suites=()), None, bisect.Outcome.SKIP),  # its suite ran nothing: no answer
        (TEST, None, None, bisect.Outcome.SKIP),  # no report (a build failure, a lost runner)
        (METRIC, None, compared(MetricRegression("mm · median", 1, 2, "")), bisect.Outcome.FAIL),
        (METRIC, None, compared(MetricRegression("other · median", 1, 2, "")), bisect.Outcome.PASS),
        (METRIC, None, None, bisect.Outcome.SKIP),  # not comparable
        (METRIC, None, MetricComparison((), frozenset()), bisect.Outcome.SKIP),  # mm not measured: no pass
        (RUN, None, None, bisect.Outcome.FAIL),  # no report again: broken there too
        (RUN, outcomes({"unit::a": "failed"}), None, bisect.Outcome.PASS),  # it got as far as a report
    ],
)
def test_a_bisection_run_answers_for_the_failure_it_probes(
    worse: Worse,
    probe: RunOutcomes | None,
    regressions: list[MetricRegression] | None,
    answer: bisect.Outcome,
) -> None:
    assert probe_outcome(worse, probe, regressions) is answer


# --- when trunk is due --------------------------------------------------------------------------------------

ON = TrunkWatch(enabled=True, interval_hours=6)


@pytest.mark.parametrize(
    ("policy", "last_head", "ago", "expected"),
    [
        (TrunkWatch(), None, None, None),  # off by default
        (ON, None, None, "the first trunk run"),
        (ON, B, timedelta(hours=7), None),  # trunk has not moved
        (ON, A, timedelta(hours=5), None),  # moved, but within the interval
        (ON, A, timedelta(hours=6), f"trunk moved from {A[:10]} to {B[:10]}"),
    ],
)
def test_trunk_is_due_when_it_moved_and_the_interval_passed(
    policy: TrunkWatch, last_head: str | None, ago: timedelta | None, expected: str | None
) -> None:
    last_at = NOW - ago if ago is not None else None
    assert due(policy, head=B, last_head=last_head, last_at=last_at, now=NOW) == expected


@pytest.mark.parametrize(
    ("named", "expected"),
    [
        ((), [(Level.L2, None)]),
        (("sweep",), [(Level.L2, None), (Level.L3, 1)]),
        (("bench", "sweep"), [(Level.L2, None), (Level.L3, None)]),
    ],
)
def test_the_tiers_a_trunk_run_dispatches(
    named: tuple[str, ...], expected: list[tuple[Level, int | None]]
) -> None:
    assert levels(TrunkWatch(enabled=True, l3_suites=named), ["bench", "sweep"]) == expected


L3 = "tiers:\n  l3:\n    suites:\n" + "".join(f"      - {{name: {name}, builtin: bench}}\n" for name in "abc")


@pytest.mark.parametrize(
    ("suites", "problem"),
    [
        ("[a]", None),
        ("[a, b, c]", None),
        ("[zz]", "trunk_watch.l3_suites.0: 'zz' is none of L3's suites (a, b, c)"),
        ("[a, b]", "trunk_watch.l3_suites: name one L3 suite, or every one of them"),
    ],
)
def test_the_config_names_one_l3_suite_or_all(suites: str, problem: str | None) -> None:
    text = f"{L3}trunk_watch:\n  enabled: true\n  l3_suites: {suites}\n"
    if problem is None:
        assert parse_config(text).trunk_watch.l3_suites
        return
    with pytest.raises(ConfigError) as refused:
        parse_config(text)
    assert problem in refused.value.message


def test_trunk_watch_defaults() -> None:
    policy = SluiceConfig().trunk_watch
    assert (policy.enabled, policy.interval_hours, policy.l3_suites, policy.bisect_runs) == (
        False,
        24,
        (),
        12,
    )


# --- one tracked failure -----------------------------------------------------------------------------------


def commit(sha: str, subject: str = "a change", files: tuple[str, ...] = ("README.md",)) -> Suspect:
    return Suspect(sha=sha, subject=subject, author="Dev", files=files)


def tracked(commits: list[Suspect], *, worse: Worse = TEST, policy: TrunkWatch = ON) -> Tracked:
    return begin(
        FORK, Level.L2, worse, good=(G, 1), bad=(commits[-1].sha, 2), commits=commits, policy=policy, now=NOW
    )


def test_one_commit_between_the_runs_is_the_culprit_without_a_bisection() -> None:
    only = tracked([commit(A)])
    assert only.phase is Phase.UNBISECTED and only.bisection is None and only.culprit == commit(A)
    assert "**Culprit**: `aaaaaaaaaa` a change (Dev) (the only commit between the runs)." in render(only)


def test_a_bisection_to_its_culprit_and_the_issue_on_the_way() -> None:
    failure = tracked([commit(A), commit(B, "gpu: a faster path"), commit(C)])
    state = failure.bisection
    assert state is not None and failure.phase is Phase.BISECTING
    assert "**Bisecting**: 3 suspects left after 0 runs" in render(failure)
    answers = {A: bisect.Outcome.PASS, B: bisect.Outcome.FAIL, C: bisect.Outcome.FAIL}
    while not state.culprits:
        state, (probe,) = bisect.next_probes(state)
        state = bisect.record(state, probe.id, answers[failure.probe_sha(probe)])
    done = settle(failure.model_copy(update={"bisection": state}))
    assert done.phase is Phase.FOUND and done.culprit is not None and done.culprit.sha == B
    body = render(done)
    assert "**Culprit**: `bbbbbbbbbb` gpu: a faster path (Dev) (bisected, confirmed by a re-run)." in body
    assert "| `bbbbbbbbbb` | confirm | fail | — |" in body and "Suspects" not in body


def test_an_exhausted_budget_ranks_the_suspects_by_the_files_the_failure_names() -> None:
    evidence = "Traceback:\n  python/triton/ops/matmul.py:41: AssertionError"
    worse = Worse(kind=Change.TEST, name="unit::mm", evidence=evidence)
    commits = [
        commit(A, "docs", ("docs/a.md",)),
        commit(B, "ops: nearby", ("python/triton/ops/other.py",)),
        commit(C, "ops: matmul", ("python/triton/ops/matmul.py",)),
        commit(D, "docs again", ("docs/b.md",)),
    ]
    failure = tracked(commits, worse=worse, policy=TrunkWatch(enabled=True, bisect_runs=0))
    assert failure.phase is Phase.UNBISECTED and failure.culprit is None
    assert [s.sha for s in suspects(failure)] == [C, B, A, D]
    body = render(failure)
    assert body.index("1. `cccccccccc`") < body.index("2. `bbbbbbbbbb`") < body.index("3. `aaaaaaaaaa`")


def test_the_issue_body_is_inert_and_its_marker_unforgeable() -> None:
    worse = Worse(
        kind=Change.TEST, name="unit::x --> <!-- sluice:dashboard -->", evidence="```\n@team #12 <b>"
    )
    failure = tracked([commit(A, "@someone <script> fixes #3")], worse=worse)
    body = render(failure)
    assert body.startswith(marker(failure.key)) and body.count("<!-- sluice:trunk-watch") == 1
    assert "<script>" not in body and "@someone" not in body and "&lt;script&gt;" in body
    assert "````text\n```\n@team #12 <b>\n````" in body  # the evidence in a fence it cannot close
    assert marker(failure.key) != marker(failure.model_copy(update={"level": Level.L3}).key)


def test_a_later_run_that_passes_fixes_it() -> None:
    failure = tracked([commit(A)])
    still = sighted(failure, Sighting(sha=B, run=3, at=NOW, failing=True))
    assert still.phase is Phase.UNBISECTED and f"still failing at `{B[:10]}`" in render(still)
    fixed = sighted(still, Sighting(sha=C, run=4, at=NOW, failing=False))
    assert fixed.phase is Phase.FIXED and title(fixed).endswith("(fixed)")
    assert f"**Fixed**: it passes again at `{C[:10]}`." in render(fixed)


def test_metric_titles_say_regressed() -> None:
    assert title(tracked([commit(A)], worse=METRIC)) == "Trunk watch: L2 metric mm · median regressed"


# --- the store --------------------------------------------------------------------------------------------


def test_one_row_per_failure_saved_by_compare_and_set(store: Store) -> None:
    records = TrunkWatchStore(store)
    failure = tracked([commit(A)])
    assert records.add(failure, at=NOW) and not records.add(failure, at=NOW)  # never a second row
    found = records.tracked(FORK, failure.key)
    assert found == (failure, 1)
    seen = sighted(failure, Sighting(sha=B, run=3, at=NOW, failing=True))
    assert records.save(seen, version=1, at=NOW)
    assert not records.save(failure, version=1, at=NOW)  # a stale read does not overwrite
    assert records.tracked(FORK, failure.key) == (seen, 2)
    assert [t for t, _ in records.open_failures(FORK)] == [seen]
    fixed = sighted(seen, Sighting(sha=C, run=4, at=NOW, failing=False))
    assert records.save(fixed, version=2, at=NOW) and records.open_failures(FORK) == []


def test_a_run_that_broke_says_so_with_the_end_of_its_log() -> None:
    assert RUN.evidence == "the run uploaded no tier report\n\nld: cannot find -ltriton"
    broke = tracked([commit(A)], worse=RUN)
    assert title(broke) == "Trunk watch: L2 leaves no report on fork trunk"
    assert "ld: cannot find -ltriton" in render(broke) and "run `the tier run` got worse" in render(broke)


# --- metrics, from two reports (runners.compare) -----------------------------------------------------------


def test_metric_regressions_are_critical_kernels_confident_slowdowns() -> None:
    from bot.flows.trunk_watch import metric_regressions
    from tests.test_runners_compare import benchmark, even, report

    config = parse_config("performance:\n  critical: [matmul]\n")
    before = report(benchmark(even(40)), benchmark(even(40), kernel="softmax"))
    slower = report(benchmark(even(40, shift=0.3)), benchmark(even(40, shift=0.3), kernel="softmax"))
    found = metric_regressions(before, slower, config)
    assert found is not None and [r.name.split(" · ")[1] for r in found] == ["median", "p90"]
    assert all(r.name.startswith("matmul[") for r in found)  # softmax slowed too, but is not critical
    assert found[0].after_ms > found[0].before_ms * 1.2
    same = report(benchmark(even(40)), benchmark(even(40), kernel="softmax"))
    assert metric_regressions(before, same, config) == []
    assert (
        metric_regressions(
            before, report(benchmark(even(40)), gpu_model="NVIDIA A100", context_hash="beef"), config
        )
        is None
    )
    assert metric_regressions(before, report(), config) is None  # no benchmarks: no answer
    assert metric_regressions(report(), slower, config) == []  # nothing to compare with


def test_a_culprit_a_broken_build_left_ambiguous_is_named_with_its_partner_not_the_commits_after() -> None:
    """Trunk commit b does not build: b and c are blamed together. The issue names them, not d, e, f."""
    shas = [ch * 40 for ch in "abcdef"]
    failure = tracked([commit(s, f"commit {s[0]}") for s in shas])
    state = failure.bisection
    assert state is not None
    while not state.culprits:
        state, (probe,) = bisect.next_probes(state)
        sha = failure.probe_sha(probe)
        if sha == "b" * 40:
            answer = bisect.Outcome.SKIP
        else:
            answer = bisect.Outcome.FAIL if shas.index(sha) >= 2 else bisect.Outcome.PASS
        state = bisect.record(state, probe.id, answer)
    done = settle(failure.model_copy(update={"bisection": state}))

    assert [s.sha for s in suspects(done)] == ["b" * 40, "c" * 40]
    body = render(done)
    assert "**Culprit found**" in body and "one of the 2 commits below" in body
    assert "dddddddddd" not in body.split("**Culprit found**")[1].split("\n\n")[0]
