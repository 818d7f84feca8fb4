"""Bisection of a failed candidate (a bundle, or a chain validated as a unit), and bundle sizing (pure).

A failed candidate is searched over its dependency-closed prefixes in upstream order: prefix `j` is the
first `j` commits still in the search (blamed commits and everything depending on them are taken out, so
every prefix stays buildable). Prefixes containing a culprit fail, the others pass; with `k` runners free,
`k` prefixes split the open interval at once (k-ary search). A build failure of an intermediate prefix is
a skip (as `git bisect` uses exit 125): that prefix is avoided. A suspect is re-run once before it is
blamed. A budget of runs and runner hours stops the search, saying what is left. The state is a pydantic
model, so a flow can persist it between tier runs; every step returns a new one.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from bot.core.errors import BadInput


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Outcome(enum.StrEnum):
    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"  # the prefix did not build: it says nothing about the culprit


class Purpose(enum.StrEnum):
    SEARCH = "search"  # a split point of the open interval
    CONFIRM = "confirm"  # the suspect's failing prefix, run once more before blaming
    REMAINDER = "remainder"  # everything left after a culprit was taken out


class Phase(enum.StrEnum):
    SEARCHING = "searching"
    DONE = "done"  # every culprit found: the rest passes
    EXHAUSTED = "exhausted"  # the budget ran out: `open_suspects` still holds one


class Kind(enum.StrEnum):
    FAILURE = "failure"  # a tier failed
    REGRESSION = "regression"  # a benchmark got worse: the oracle says pass / fail all the same


class Budget(Frozen):
    """At most this many bisection runs, and runner hours (each run of the tier costs `hours_per_run`)."""

    max_runs: int | None = None
    max_runner_hours: float | None = None
    hours_per_run: float = 1.0


class Probe(Frozen):
    """One tier run to dispatch: the candidate's first `length` commits still in the search."""

    id: int
    length: int
    commits: tuple[str, ...]
    purpose: Purpose
    generation: int  # bumped when a culprit is taken out: older probes' prefixes are not today's


class ProbeResult(Frozen):
    probe: Probe
    outcome: Outcome


class Culprit(Frozen):
    """A blamed commit (or, when skips left them apart, commits), with what depends on it and its cost."""

    shas: tuple[str, ...]
    dependents: tuple[str, ...]
    runs: int  # bisection runs spent until it was blamed
    confirmed: bool = True

    @property
    def ambiguous(self) -> bool:
        return len(self.shas) > 1


class Bisection(Frozen):
    """Where the search of one failed candidate stands."""

    candidate: str
    tier: str
    kind: Kind = Kind.FAILURE
    commits: tuple[str, ...]  # upstream order
    depends_on: dict[str, tuple[str, ...]] = {}  # sha -> the earlier candidate commits it needs
    budget: Budget = Budget()
    confirm: bool = True  # re-run a suspect's prefix once before blaming it
    weights: dict[str, float] = {}  # P(culprit) per commit, when a risk model gave it: splits halve the odds
    removed: tuple[str, ...] = ()  # blamed commits and their dependents (and, prefixes only, what follows)
    # `strategy: merge`: a probe merges a prefix, and no merge leaves out a commit before one it brings, so
    # the commits after a culprit cannot be tried without it: they go on untested, and the search ends.
    prefixes_only: bool = False
    untried: tuple[str, ...] = ()
    culprits: tuple[Culprit, ...] = ()
    lo: int = 0  # the longest prefix known to pass
    hi: int | None = None  # the shortest prefix known to fail; None: the remainder is untested
    skipped: tuple[int, ...] = ()
    confirming: bool = False
    in_flight: tuple[Probe, ...] = ()
    results: tuple[ProbeResult, ...] = ()
    runs: int = 0
    retried: int = 0  # runs of probes the machine failed, run again: runner time the budget pays for too
    next_id: int = 1
    generation: int = 0
    phase: Phase = Phase.SEARCHING

    @property
    def remaining(self) -> tuple[str, ...]:
        gone = set(self.removed)
        return tuple(sha for sha in self.commits if sha not in gone)

    @property
    def runner_hours(self) -> float:
        return (self.runs + self.retried) * self.budget.hours_per_run

    @property
    def open_suspects(self) -> tuple[str, ...]:
        """The commits the first culprit still hides among (all remaining after `lo` when `hi` is open)."""
        if self.phase is Phase.DONE:
            return ()
        rest = self.remaining
        return rest[self.lo : self.hi if self.hi is not None else len(rest)]


def start(
    candidate: str,
    commits: Sequence[str],
    *,
    tier: str,
    depends_on: Mapping[str, Sequence[str]] | None = None,
    budget: Budget | None = None,
    kind: Kind = Kind.FAILURE,
    confirm: bool = True,
    weights: Mapping[str, float] | None = None,
    prefixes_only: bool = False,
) -> Bisection:
    """The search of a candidate whose whole run failed: prefix 0 (trunk) passes, prefix n fails.

    `depends_on` holds the planner's dependency edges; only those within the candidate matter here, and
    each must point to an earlier commit (upstream order), or no prefix would be dependency-closed.
    """
    order = {sha: i for i, sha in enumerate(commits)}
    if len(order) != len(commits) or not commits:
        raise BadInput("a bisection needs the candidate's commits, each once", "pass them in upstream order")
    edges: dict[str, tuple[str, ...]] = {}
    for sha, deps in (depends_on or {}).items():
        inside = tuple(d for d in deps if d in order)
        if sha in order and any(order[d] >= order[sha] for d in inside):
            raise BadInput(
                f"{sha[:10]} depends on a later commit of {candidate}",
                "order the candidate's commits in upstream order (dependencies first)",
            )
        if sha in order and inside:
            edges[sha] = inside
    state = Bisection(
        candidate=candidate,
        tier=tier,
        kind=kind,
        commits=tuple(commits),
        depends_on=edges,
        budget=budget or Budget(),
        confirm=confirm,
        weights={sha: w for sha, w in (weights or {}).items() if sha in order},
        hi=len(commits),
        prefixes_only=prefixes_only,
    )
    return _settle(state)


def dependents_of(state: Bisection, shas: Sequence[str]) -> tuple[str, ...]:
    """The remaining commits that need any of `shas`, directly or through others (upstream order)."""
    out: set[str] = set(shas)
    found: list[str] = []
    for sha in state.commits:  # dependencies point back: one pass in order reaches every dependent
        if sha not in out and any(d in out for d in state.depends_on.get(sha, ())):
            out.add(sha)
            found.append(sha)
    return tuple(s for s in found if s not in state.removed)


def _budget_left(state: Bisection) -> int:
    """How many more runs the budget allows (counting those in flight)."""
    used = state.runs + state.retried + len(state.in_flight)
    left = math.inf
    if state.budget.max_runs is not None:
        left = min(left, state.budget.max_runs - used)
    if state.budget.max_runner_hours is not None and state.budget.hours_per_run > 0:
        left = min(left, math.floor(state.budget.max_runner_hours / state.budget.hours_per_run + 1e-9) - used)
    return int(max(0, min(left, 1 << 30)))


def _mass(state: Bisection) -> list[float]:
    """Cumulative weight of each prefix of what remains: by P(culprit) when known (a commit with none still
    weighs a little), else by count."""
    rest = state.remaining
    known = bool(state.weights)
    cumulative = [0.0]
    for sha in rest:
        cumulative.append(cumulative[-1] + (state.weights.get(sha, 0.0) + UNWEIGHTED if known else 1.0))
    return cumulative


UNWEIGHTED = 0.005  # the weight of a commit the model gave no probability (or almost none)


def _split_points(state: Bisection, lo: int, hi: int, *, want: int, avoid: set[int]) -> list[int]:
    """Up to `want` prefix lengths strictly between lo and hi that split the interval's weight evenly,
    none of `avoid`."""
    free = [j for j in range(lo + 1, hi) if j not in avoid]
    mass = _mass(state)
    chosen: list[int] = []
    for i in range(1, want + 1):
        if not free:
            break
        ideal = mass[lo] + (mass[hi] - mass[lo]) * i / (want + 1)
        best = min(free, key=lambda j: (abs(mass[j] - ideal), j))
        chosen.append(best)
        free.remove(best)
    return sorted(chosen)


def _probe(state: Bisection, length: int, purpose: Purpose, offset: int) -> Probe:
    return Probe(
        id=state.next_id + offset,
        length=length,
        commits=state.remaining[:length],
        purpose=purpose,
        generation=state.generation,
    )


def _alone(state: Bisection) -> bool:
    """Nothing but skipped prefixes lies between the passing and the failing prefix."""
    assert state.hi is not None
    return all(j in state.skipped for j in range(state.lo + 1, state.hi))


def _wanted(state: Bisection, free: int) -> list[tuple[int, Purpose]]:
    """The prefix lengths worth running now, with why."""
    rest = len(state.remaining)
    flying = {p.length for p in state.in_flight}
    if state.hi is None:  # the remainder is untested: run it alone (it mostly passes: splits would be waste)
        return [] if rest in flying else [(rest, Purpose.REMAINDER)]
    if state.confirming:
        return []
    if _alone(state):  # one suspect left (or only skipped prefixes between): run its prefix once more
        return [] if state.hi in flying else [(state.hi, Purpose.CONFIRM)]
    avoid = flying | set(state.skipped)
    return [(j, Purpose.SEARCH) for j in _split_points(state, state.lo, state.hi, want=free, avoid=avoid)]


def next_probes(state: Bisection, *, free: int = 1) -> tuple[Bisection, tuple[Probe, ...]]:
    """The probes to dispatch on `free` runners now (recorded as in flight), within the budget."""
    if state.phase is not Phase.SEARCHING or free < 1:
        return state, ()
    wanted = _wanted(state, free)[: min(free, _budget_left(state))]
    if not wanted and not state.in_flight and _budget_left(state) == 0:
        return state.model_copy(update={"phase": Phase.EXHAUSTED}), ()
    probes = tuple(_probe(state, length, purpose, i) for i, (length, purpose) in enumerate(wanted))
    confirming = state.confirming or any(p.purpose is Purpose.CONFIRM for p in probes)
    return state.model_copy(
        update={
            "in_flight": state.in_flight + probes,
            "next_id": state.next_id + len(probes),
            "confirming": confirming,
        }
    ), probes


def record(state: Bisection, probe_id: int, outcome: Outcome) -> Bisection:
    """The state after one probe's result; one from before a culprit was taken out only counts as a run."""
    probe = next((p for p in state.in_flight if p.id == probe_id), None)
    if probe is None:
        raise BadInput(f"probe {probe_id} of {state.candidate} is not in flight", "record each result once")
    state = state.model_copy(
        update={
            "in_flight": tuple(p for p in state.in_flight if p.id != probe_id),
            "results": (*state.results, ProbeResult(probe=probe, outcome=outcome)),
            "runs": state.runs + 1,
        }
    )
    if probe.generation != state.generation:
        return _settle(state)
    if probe.purpose is Purpose.CONFIRM:
        return _settle(_confirmed(state, probe, outcome))
    return _settle(_narrowed(state, probe, outcome))


def _narrowed(state: Bisection, probe: Probe, outcome: Outcome) -> Bisection:
    j = probe.length
    if outcome is Outcome.SKIP and state.hi is None and j == len(state.remaining):
        # The rest, run alone (after a culprit was taken out, or a failure that did not reproduce), cannot be
        # tested: it does not pick or build without what was removed. Asking again would spend the budget on
        # the same answer; the search ends, and the rest goes on in the rebuilt candidate, whose own tier run
        # judges it.
        return state.model_copy(update={"phase": Phase.DONE})
    if outcome is Outcome.SKIP:
        return state.model_copy(update={"skipped": tuple(sorted({*state.skipped, j}))})
    if outcome is Outcome.PASS and j > state.lo and (state.hi is None or j < state.hi):
        return state.model_copy(update={"lo": j})
    if outcome is Outcome.FAIL and j > state.lo and (state.hi is None or j < state.hi):
        return state.model_copy(update={"hi": j})
    return state  # contradicts what is known (a flaky run): the confirmation re-run guards the blame


def _confirmed(state: Bisection, probe: Probe, outcome: Outcome) -> Bisection:
    """Blame the suspect when its prefix fails again; a pass means the first failure did not reproduce."""
    state = state.model_copy(update={"confirming": False})
    if outcome is Outcome.SKIP:
        return state  # asked again: the next call re-runs it
    if outcome is Outcome.PASS:
        return state.model_copy(update={"lo": probe.length, "hi": None})
    suspects = state.remaining[state.lo : probe.length]
    return _blame(state, suspects)


def _blame(state: Bisection, suspects: Sequence[str]) -> Bisection:
    dependents = dependents_of(state, suspects)
    spent = state.runs - sum(c.runs for c in state.culprits)
    culprit = Culprit(shas=tuple(suspects), dependents=dependents, runs=spent)
    after = state.remaining[state.remaining.index(suspects[-1]) + 1 :] if state.prefixes_only else ()
    untried = tuple(sha for sha in after if sha not in dependents)
    return state.model_copy(
        update={
            "removed": (*state.removed, *suspects, *dependents, *untried),
            "untried": (*state.untried, *untried),
            "culprits": (*state.culprits, culprit),
            "hi": None,
            "skipped": (),
            "generation": state.generation + 1,
        }
    )


def _settle(state: Bisection) -> Bisection:
    """Done when what is left is known to pass; exhausted when the budget is spent and nothing flies.
    Without confirmation, a suspect is blamed as soon as nothing but skipped prefixes separates it."""
    if state.phase is Phase.DONE:
        return state
    while not state.confirm and state.hi is not None and _alone(state):
        state = _blame(state, state.remaining[state.lo : state.hi])
    rest = len(state.remaining)
    if state.hi is None and state.lo >= rest:
        return state.model_copy(update={"phase": Phase.DONE})
    if not state.in_flight and _budget_left(state) == 0:
        return state.model_copy(update={"phase": Phase.EXHAUSTED})
    return state


def may_retry(state: Bisection) -> bool:
    """Whether the budget has a run left for a probe in flight to run again (the machine failed it)."""
    return _budget_left(state) > 0


def retried(state: Bisection) -> Bisection:
    """A probe the machine failed runs again (the tiers' retry): one more run the budget pays for."""
    return state.model_copy(update={"retried": state.retried + 1})


def summary(state: Bisection) -> str:
    """One line a person reads on the PR: where the bisection stands."""
    found = ", ".join("+".join(s[:10] for s in c.shas) for c in state.culprits) or "none yet"
    runs = f"{state.runs} runs"
    if state.retried:
        runs += f" (and {state.retried} again after an infrastructure failure)"
    line = f"{state.kind} bisection of {state.candidate} on {state.tier}: {runs}, culprits {found}"
    if state.phase is Phase.EXHAUSTED:
        left = state.open_suspects
        return f"{line}; budget spent, the culprit is among {len(left)} commits from {left[0][:10]}"
    if state.phase is Phase.DONE and state.untried:
        return (
            f"{line}; done, the {len(state.remaining)} commits before it pass, the "
            f"{len(state.untried)} after it go on untested (a merge of any of them brings the culprit)"
        )
    if state.phase is Phase.DONE:
        return f"{line}; done, the other {len(state.remaining)} commits pass"
    return f"{line}; {len(state.open_suspects)} suspects left, {len(state.in_flight)} runs in flight"


# -- bundle sizing -------------------------------------------------------------------------------------------


def culprit_runs(size: int) -> int:
    """Bisection runs one culprit costs in a failed candidate of `size`: the search, the confirmation, and
    the remainder's run (a lone commit needs only its confirmation)."""
    return 1 if size <= 1 else math.ceil(math.log2(size)) + 2


def candidate_runs(probabilities: Sequence[float]) -> float:
    """Expected tier runs of one candidate: its own run, and per expected culprit a bisection."""
    return 1.0 + sum(probabilities) * culprit_runs(len(probabilities))


class Sizing(Frozen):
    """How a stream of commits is cut into candidates: at about `target` expected culprits each, at most
    `max_commits`, and alone from `alone_at` (a likely culprit costs less on its own than in a bisection)."""

    target: float
    alone_at: float
    max_commits: int


def sizing(probabilities: Sequence[float], *, max_commits: int) -> Sizing:
    """The cost-optimal size for the stream's mean probability: the candidate size n with the fewest
    expected runs per commit, (1 + n·p·culprit_runs(n)) / n; its summed probability is the target."""
    if max_commits < 1:
        raise BadInput(f"max_commits {max_commits} is not a positive count", "give a candidate size ≥ 1")
    mean = sum(probabilities) / len(probabilities) if probabilities else 0.0
    best = min(range(1, max_commits + 1), key=lambda n: ((1 + n * mean * culprit_runs(n)) / n, -n))
    alone = 1.0 / max(culprit_runs(best) - 1, 1) if best > 1 else 0.0
    return Sizing(target=best * mean, alone_at=min(alone, 1.0), max_commits=max_commits)


def cut(probabilities: Sequence[float], plan: Sizing) -> list[list[int]]:
    """Candidates (as indices, upstream order): a likely culprit alone, the others filled until their summed
    probability would pass the target (a candidate always takes one commit) or `max_commits` is reached."""
    groups: list[list[int]] = []
    current: list[int] = []
    total = 0.0
    for index, p in enumerate(probabilities):
        if p >= plan.alone_at:
            groups += [current, [index]] if current else [[index]]
            current, total = [], 0.0
            continue
        over = total + p > plan.target + 1e-12 and abs(total + p - plan.target) > abs(total - plan.target)
        if current and (over or len(current) >= plan.max_commits):
            groups.append(current)
            current, total = [], 0.0
        current.append(index)
        total += p
    return groups + ([current] if current else [])
