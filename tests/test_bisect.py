"""Bisection of failed candidates and bundle sizing: tables of planted culprits, skips, budgets, runners."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Collection, Sequence

import pytest

from bot.core.bisect import (
    Bisection,
    Budget,
    Kind,
    Outcome,
    Phase,
    Probe,
    Purpose,
    Sizing,
    candidate_runs,
    cut,
    next_probes,
    record,
    retried,
    sizing,
    start,
    summary,
)
from bot.core.errors import BadInput

Oracle = Callable[[Probe], Outcome]


def shas(n: int) -> list[str]:
    return [f"{i:040x}" for i in range(1, n + 1)]


def contains(culprits: Collection[str], *, skip: Collection[int] = ()) -> Oracle:
    """The tier: fails when the prefix holds a culprit; a prefix of a length in `skip` does not build."""

    def oracle(probe: Probe) -> Outcome:
        if probe.length in skip and probe.purpose is Purpose.SEARCH:
            return Outcome.SKIP
        return Outcome.FAIL if set(probe.commits) & set(culprits) else Outcome.PASS

    return oracle


def drive(state: Bisection, oracle: Oracle, *, runners: int = 1) -> tuple[Bisection, list[list[Probe]]]:
    """Run the bisection to its end in rounds: all free runners get probes, then all results come back."""
    rounds: list[list[Probe]] = []
    while state.phase is Phase.SEARCHING:
        state, probes = next_probes(state, free=runners)
        if not probes:
            assert state.phase is not Phase.SEARCHING, summary(state)
            break
        rounds.append(list(probes))
        for probe in probes:
            state = record(state, probe.id, oracle(probe))
    return state, rounds


def blamed(state: Bisection) -> list[tuple[str, ...]]:
    return [c.shas for c in state.culprits]


@pytest.mark.parametrize("position", [0, 1, 6, 7, 8, 14, 15])
def test_one_culprit_in_sixteen_is_found_within_two_log2_n_plus_one_runs(position: int) -> None:
    commits = shas(16)
    state, rounds = drive(start("bundle-a", commits, tier="L2"), contains({commits[position]}))
    assert state.phase is Phase.DONE
    assert blamed(state) == [(commits[position],)]
    total = 1 + state.runs  # the bundle's own failed run, then the bisection
    assert total <= 2 * math.log2(16) + 1
    confirms = [p for r in rounds for p in r if p.purpose is Purpose.CONFIRM]
    assert len(confirms) == 1 and confirms[0].commits[-1] == commits[position]
    assert state.culprits[0].runs <= state.runs  # its cost: the runs until it was blamed


@pytest.mark.parametrize(("first", "second"), [(2, 11), (0, 15), (5, 6), (14, 15)])
def test_two_culprits_are_both_found_in_upstream_order(first: int, second: int) -> None:
    commits = shas(16)
    culprits = {commits[first], commits[second]}
    state, _ = drive(start("bundle-b", commits, tier="L1"), contains(culprits))
    assert state.phase is Phase.DONE
    assert blamed(state) == [(commits[first],), (commits[second],)]
    assert set(state.remaining) == set(commits) - culprits
    assert state.runs <= 2 * (math.ceil(math.log2(16)) + 2)


def test_prefixes_only_stops_at_the_first_culprit_and_leaves_the_rest_untried() -> None:
    """`strategy: merge`: the remainder without the culprit cannot be merged without it (its merge brings
    it), so it is not run: blamed wrongly, the first commit after the culprit would be the next 'culprit'."""
    commits = shas(8)
    culprits = {commits[2], commits[6]}
    state, rounds = drive(start("bundle-m", commits, tier="L1", prefixes_only=True), contains(culprits))
    assert state.phase is Phase.DONE and blamed(state) == [(commits[2],)]
    assert state.untried == tuple(commits[3:]) and state.remaining == tuple(commits[:2])
    assert all(p.commits == tuple(commits[: p.length]) for r in rounds for p in r)  # prefixes, no gaps
    assert "the 2 commits before it pass, the 5 after it go on untested" in summary(state)
    picks, _ = drive(start("bundle-m", commits, tier="L1"), contains(culprits))
    assert blamed(picks) == [(commits[2],), (commits[6],)]  # cherry-picks leave a commit out


def test_a_bundle_whose_every_probe_passes_ends_with_no_culprit() -> None:
    state, _ = drive(start("bundle-c", shas(8), tier="L2"), contains(set()))
    assert state.phase is Phase.DONE and state.culprits == ()


def test_a_suspect_is_rerun_before_it_is_blamed_and_a_pass_clears_it() -> None:
    commits = shas(4)
    state = start("bundle-d", commits, tier="L2")
    flaky = {"left": 1}

    def once_flaky(probe: Probe) -> Outcome:  # the prefix of 3 fails once (flaky)
        if probe.length == 3 and flaky["left"]:
            flaky["left"] -= 1
            return Outcome.FAIL
        return (
            Outcome.PASS
            if probe.length < 4
            else Outcome.FAIL
            if commits[3] in probe.commits
            else Outcome.PASS
        )

    state, rounds = drive(state, once_flaky)
    purposes = [p.purpose for r in rounds for p in r]
    assert Purpose.CONFIRM in purposes
    assert blamed(state) == [(commits[3],)]  # commits[2] was not blamed: its rerun passed


def test_a_prefix_whose_rerun_passes_is_known_good_and_never_searched_below_again() -> None:
    """A flaky failure of the prefix of 8, cleared by its rerun, makes those 8 commits good: the search goes
    on above them (each probe is a GPU run), not back through them."""
    commits = shas(16)
    culprit = commits[10]
    flaky = {"left": 1}

    def flaky_at_8(probe: Probe) -> Outcome:
        if probe.length == 8 and flaky["left"]:
            flaky["left"] -= 1
            return Outcome.FAIL
        return contains({culprit})(probe)

    state, rounds = drive(start("bundle-f", commits, tier="L2"), flaky_at_8)
    probes = [p for r in rounds for p in r]
    confirmed = next(i for i, p in enumerate(probes) if p.purpose is Purpose.CONFIRM and p.length == 8)
    later = [p.length for p in probes[confirmed + 1 :] if p.purpose is Purpose.SEARCH]
    assert later[0] == 12, [(p.purpose, p.length) for p in probes]  # halves 8..16, not 7..16
    assert min(later) > 8
    assert blamed(state) == [(culprit,)]


@pytest.mark.parametrize("skip", [{8}, {7, 8, 9}, {4, 8, 12}])
def test_a_prefix_that_does_not_build_is_skipped_and_the_search_routes_around_it(skip: set[int]) -> None:
    commits = shas(16)
    culprit = commits[10]
    state, rounds = drive(start("bundle-e", commits, tier="L2"), contains({culprit}, skip=skip))
    assert blamed(state) == [(culprit,)]
    tried = [p.length for r in rounds for p in r if p.purpose is Purpose.SEARCH]
    assert set(tried) & skip  # a skip was met …
    assert all(tried.count(j) == 1 for j in skip if j in tried)  # … and never asked again
    assert set(state.remaining) == set(commits) - {culprit}


def test_when_only_skipped_prefixes_separate_suspects_they_are_blamed_together() -> None:
    commits = shas(8)
    state, _ = drive(start("bundle-f", commits, tier="L2"), contains({commits[5]}, skip={5}))
    assert blamed(state) == [(commits[4], commits[5])]
    assert state.culprits[0].ambiguous
    assert state.phase is Phase.DONE


@pytest.mark.parametrize(
    ("budget", "runs"),
    [(Budget(max_runs=3), 3), (Budget(max_runner_hours=5.0, hours_per_run=2.0), 2), (Budget(max_runs=0), 0)],
)
def test_the_budget_stops_the_search_and_says_what_is_left(budget: Budget, runs: int) -> None:
    commits = shas(64)
    state, _ = drive(start("bundle-g", commits, tier="L2", budget=budget), contains({commits[40]}))
    assert state.phase is Phase.EXHAUSTED
    assert state.runs == runs
    assert commits[40] in state.open_suspects
    assert len(state.open_suspects) < 64 or runs == 0
    assert "budget spent" in summary(state)


def test_probes_the_machine_failed_and_that_ran_again_are_paid_for_by_the_budget() -> None:
    commits = shas(64)
    state, (probe,) = next_probes(start("bundle-r", commits, tier="L2", budget=Budget(max_runs=3)), free=1)
    state = retried(retried(state))  # the machine failed it twice; its third attempt is the one in flight
    state = record(state, probe.id, Outcome.PASS)
    state, more = next_probes(state, free=4)
    assert more == () and state.phase is Phase.EXHAUSTED  # 1 result + 2 retries: the 3 runs are spent
    assert state.runner_hours == 3 * state.budget.hours_per_run
    assert "1 runs (and 2 again after an infrastructure failure)" in summary(state)


@pytest.mark.parametrize(("runners", "most_rounds"), [(1, 8), (3, 5), (7, 4)])
def test_free_runners_probe_several_prefixes_at_once(runners: int, most_rounds: int) -> None:
    commits = shas(64)
    culprit = commits[37]
    state, rounds = drive(start("bundle-h", commits, tier="L2"), contains({culprit}), runners=runners)
    assert blamed(state) == [(culprit,)]
    assert max(len(r) for r in rounds) == runners
    assert len(rounds) <= most_rounds
    assert all(len({p.length for p in r}) == len(r) for r in rounds)  # no prefix twice in one round


def test_prefixes_stay_dependency_closed_after_a_culprit_is_taken_out() -> None:
    commits = shas(10)
    deps = {commits[6]: (commits[2],), commits[8]: (commits[6],), commits[9]: (commits[4],)}
    culprits = {commits[2], commits[9]}
    state, rounds = drive(start("bundle-i", commits, tier="L2", depends_on=deps), contains(culprits))
    assert blamed(state) == [(commits[2],), (commits[9],)]
    assert state.culprits[0].dependents == (commits[6], commits[8])
    index = {sha: i for i, sha in enumerate(commits)}
    for probe in (p for r in rounds for p in r):
        members = set(probe.commits)
        for sha in probe.commits:
            assert all(d in members for d in deps.get(sha, ())), (probe, sha)
            assert all(index[a] < index[b] for a, b in itertools.pairwise(probe.commits))
    assert commits[6] not in state.remaining and commits[8] not in state.remaining


def test_a_dependency_on_a_later_commit_is_refused() -> None:
    commits = shas(3)
    with pytest.raises(BadInput, match="depends on a later commit"):
        start("bundle-j", commits, tier="L1", depends_on={commits[0]: (commits[2],)})


def test_a_performance_regression_bisects_the_same_way() -> None:
    commits = shas(12)
    timings = {sha: 1.0 for sha in commits} | {commits[7]: 1.3}  # one commit slows a kernel by 30 %

    def slower(probe: Probe) -> Outcome:
        total = math.prod(timings[s] for s in probe.commits)
        return Outcome.FAIL if total > 1.05 else Outcome.PASS

    state, _ = drive(start("bundle-k", commits, tier="L3", kind=Kind.REGRESSION), slower)
    assert blamed(state) == [(commits[7],)] and state.kind is Kind.REGRESSION
    assert summary(state).startswith("regression bisection of bundle-k on L3")


def test_the_state_survives_a_json_round_trip_between_tier_runs() -> None:
    commits = shas(16)
    oracle = contains({commits[9]})
    state = start("bundle-l", commits, tier="L2", depends_on={commits[3]: (commits[1],)})
    while state.phase is Phase.SEARCHING:
        state, probes = next_probes(state, free=2)
        state = Bisection.model_validate_json(state.model_dump_json())  # persisted by the flow
        for probe in probes:
            state = record(state, probe.id, oracle(probe))
    assert blamed(state) == [(commits[9],)]


def test_a_result_recorded_twice_is_refused() -> None:
    state, probes = next_probes(start("bundle-m", shas(4), tier="L1"))
    state = record(state, probes[0].id, Outcome.PASS)
    with pytest.raises(BadInput, match="not in flight"):
        record(state, probes[0].id, Outcome.PASS)


# -- sizing --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("mean", "low", "high"), [(0.07, 4, 12), (0.02, 16, 40), (0.005, 30, 40)])
def test_the_target_size_falls_as_the_probability_rises(mean: float, low: int, high: int) -> None:
    plan = sizing([mean] * 200, max_commits=40)
    assert low <= round(plan.target / mean) <= high
    n = round(plan.target / mean)
    assert candidate_runs([mean] * n) / n <= min(candidate_runs([mean] * m) / m for m in (1, 2, 40)) + 1e-9


def test_likely_culprits_go_alone_and_the_rest_fill_to_the_target() -> None:
    probabilities: Sequence[float] = [0.02] * 10 + [0.6] + [0.02] * 10 + [0.3, 0.01]
    plan = Sizing(target=0.1, alone_at=0.25, max_commits=40)
    groups = cut(probabilities, plan)
    assert [10] in groups and [21] in groups
    assert sorted(i for g in groups for i in g) == list(range(len(probabilities)))
    for g in groups:
        if len(g) > 1:
            assert sum(probabilities[i] for i in g) <= plan.target + 0.02 + 1e-9
    assert all(a < b for g in groups for a, b in itertools.pairwise(g))


def test_without_probabilities_candidates_are_cut_at_the_commit_cap() -> None:
    groups = cut([0.0] * 45, sizing([0.0] * 45, max_commits=20))
    assert [len(g) for g in groups] == [20, 20, 5]


def test_a_non_positive_cap_is_refused() -> None:
    with pytest.raises(BadInput):
        sizing([0.1], max_commits=0)


def test_without_confirmation_a_suspect_is_blamed_at_once() -> None:
    commits = shas(16)
    state, rounds = drive(start("bundle-n", commits, tier="L2", confirm=False), contains({commits[5]}))
    assert blamed(state) == [(commits[5],)]
    assert all(p.purpose is not Purpose.CONFIRM for r in rounds for p in r)
    assert state.runs == 5  # four halvings, then the remainder
    lone, _ = drive(start("bundle-o", commits[:1], tier="L2", confirm=False), contains({commits[0]}))
    assert lone.runs == 0 and blamed(lone) == [(commits[0],)]
