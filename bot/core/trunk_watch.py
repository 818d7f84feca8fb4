"""Trunk watch, the decisions: when fork trunk is due a run, what got worse between two trunk runs, how a
bisection run answers, which suspects come first, and the tracking issue's text."""

from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from pydantic import Field

from bot.core import bisect
from bot.core.config import TrunkWatch
from bot.core.l3_metrics import MetricComparison, MetricRegression, regression_outcome
from bot.core.markdown import plain
from bot.core.models import Frozen
from bot.core.tiers import LOCATION, Level

LABEL = "sluice:trunk-watch"  # every tracking issue carries it; the marker tells them apart
MARKER = "<!-- sluice:trunk-watch {digest} -->"
MARKER_PATTERN = re.compile(r"<!-- sluice:trunk-watch ([0-9a-f]{16}) -->")
WATCH, PROBE = "trunk", "trunk-bisect"  # the `ingestion` of a scheduled trunk run and of a bisection run
MAX_EVIDENCE = 1500  # characters of a failure message the issue quotes
MAX_SIGHTINGS = 10  # the newest trunk runs the issue lists


class Change(enum.StrEnum):
    TEST = "test"  # a test that passed on the earlier trunk run fails on the later one
    METRIC = "metric"  # a critical kernel's benchmark regressed (noise-aware, runners.compare)
    RUN = "run"  # the tier left no usable report at all (the build or the setup broke), where it did before


RUN_NAME = "the tier run"  # a RUN worsening's name: one per tier
KIND_WORDS = {Change.TEST: "test", Change.METRIC: "critical-kernel metric", Change.RUN: "run"}


class Phase(enum.StrEnum):
    BISECTING = "bisecting"
    FOUND = "found"  # the culprit is known
    EXHAUSTED = "exhausted"  # the budget ran out: ranked suspects instead
    UNBISECTED = "unbisected"  # one commit between the runs (it is the culprit) or no budget at all
    FIXED = "fixed"  # a later trunk run passes again


# --- what a report says, as the decisions read it -----------------------------------------------------------


@dataclass(frozen=True)
class RunOutcomes:
    """One trunk run's tests: each test's outcome and failure message by `suite::name`, and the suites that
    ran any test at all."""

    outcomes: Mapping[str, str]
    messages: Mapping[str, str]
    suites: frozenset[str]


class Worse(Frozen):
    """One thing that got worse."""

    kind: Change
    name: str  # the test's `suite::name`, or the metric's name
    evidence: str  # the failure message, or the metric's before and after


FAILING = ("failed", "error")


def worsened(
    before: RunOutcomes, after: RunOutcomes, regressions: Sequence[MetricRegression] = ()
) -> tuple[Worse, ...]:
    """New failing tests (failed now, passed before) and the metric regressions, in a stable order."""
    tests = [
        Worse(kind=Change.TEST, name=key, evidence=after.messages.get(key, "") or "(no message)")
        for key, outcome in sorted(after.outcomes.items())
        if outcome in FAILING and before.outcomes.get(key) == "passed"
    ]
    metrics = [Worse(kind=Change.METRIC, name=r.name, evidence=r.evidence()) for r in regressions]
    return (*tests, *sorted(metrics, key=lambda w: w.name))


def run_broke(detail: str, log: str = "") -> Worse:
    """The tier run itself broke: no usable report where the earlier trunk run left one (the evidence: why,
    and the end of its log)."""
    tail = log[-MAX_EVIDENCE:].strip()
    return Worse(kind=Change.RUN, name=RUN_NAME, evidence=f"{detail}\n\n{tail}".strip() or "(no detail)")


def still_worse(
    worse: Worse, outcomes: RunOutcomes | None, regressions: MetricComparison | None
) -> bool | None:
    """Whether a later trunk run still shows `worse` (None: the run cannot say: no report, no comparison)."""
    answer = probe_outcome(worse, outcomes, regressions)
    return None if answer is bisect.Outcome.SKIP else answer is bisect.Outcome.FAIL


def probe_outcome(
    worse: Worse, outcomes: RunOutcomes | None, regressions: MetricComparison | None
) -> bisect.Outcome:
    """A bisection run's answer: FAIL when it shows the same worsening, PASS when it does not, SKIP when it
    cannot say (no usable report; the test's suite ran nothing; the benchmarks could not be compared)."""
    if worse.kind is Change.RUN:  # a run that left a report got past what broke (callers skip a lost machine)
        return bisect.Outcome.FAIL if outcomes is None else bisect.Outcome.PASS
    if worse.kind is Change.METRIC:
        return regression_outcome((worse.name,), regressions)
    if outcomes is None:
        return bisect.Outcome.SKIP
    outcome = outcomes.outcomes.get(worse.name)
    if outcome in FAILING:
        return bisect.Outcome.FAIL
    if outcome == "passed" or (outcome is None and worse.name.split("::", 1)[0] in outcomes.suites):
        return bisect.Outcome.PASS  # passed, or its suite ran without it (the test came later)
    return bisect.Outcome.SKIP


# --- when to run -------------------------------------------------------------------------------------------


def due(
    policy: TrunkWatch, *, head: str, last_head: str | None, last_at: datetime | None, now: datetime
) -> str | None:
    """Why fork trunk's head `head` is due a trunk run now, or None: the watch is on, trunk moved since the
    last trunk run, and that run is at least the interval old."""
    if not policy.enabled:
        return None
    if last_head is None or last_at is None:
        return "the first trunk run"
    if head == last_head:
        return None
    if now - last_at < timedelta(hours=policy.interval_hours):
        return None
    return f"trunk moved from {last_head[:10]} to {head[:10]}"


def levels(policy: TrunkWatch, l3_suite_names: Sequence[str]) -> list[tuple[Level, int | None]]:
    """The tiers a trunk run dispatches: L2, and L3 when suites are named (one: its index; all: None)."""
    out: list[tuple[Level, int | None]] = [(Level.L2, None)]
    wanted = list(dict.fromkeys(policy.l3_suites))
    if len(wanted) == 1:
        out.append((Level.L3, l3_suite_names.index(wanted[0])))
    elif wanted:
        out.append((Level.L3, None))
    return out


# --- one tracked failure -----------------------------------------------------------------------------------


class Suspect(Frozen):
    sha: str
    subject: str
    author: str
    files: tuple[str, ...] = ()


class Sighting(Frozen):
    """A later trunk run's word on the failure."""

    sha: str
    run: int
    at: datetime
    failing: bool


class Tracked(Frozen):
    """A failure on fork trunk, from the trunk run that found it to the one that passes again."""

    fork: str
    level: Level
    suite: int | None = None  # the one suite of the tier its runs ran (the trunk run's), None: all
    worse: Worse
    good_sha: str  # the earlier trunk run's head (it passed)
    bad_sha: str  # the later one's (it fails)
    good_run: int  # their tier runs
    bad_run: int
    found_at: datetime
    commits: tuple[Suspect, ...]  # the trunk commits after good_sha up to bad_sha, oldest first
    bisection: bisect.Bisection | None = None
    probes: dict[int, int] = Field(default_factory=dict)  # bisection probe id -> the tier run answering it
    phase: Phase = Phase.BISECTING
    sightings: tuple[Sighting, ...] = ()
    issue: int | None = None

    @property
    def key(self) -> str:
        return tracking_key(self.fork, self.level, self.worse)

    @property
    def culprit(self) -> Suspect | None:
        if self.phase is Phase.UNBISECTED and len(self.commits) == 1:
            return self.commits[0]
        if self.bisection is None or not self.bisection.culprits:
            return None
        shas = self.bisection.culprits[0].shas
        return next((c for c in self.commits if c.sha == shas[0]), None) if len(shas) == 1 else None

    def probe_sha(self, probe: bisect.Probe) -> str:
        """A prefix of trunk's linear history is a trunk commit: the prefix's last one."""
        return probe.commits[-1]


def tracking_key(fork: str, level: Level, worse: Worse) -> str:
    return f"{fork.lower()}|{level.value}|{worse.kind.value}|{worse.name}"


def marker(key: str) -> str:
    """The hidden line that finds a failure's issue again: a digest, so no test name can forge or break it."""
    return MARKER.format(digest=hashlib.sha256(key.encode()).hexdigest()[:16])


def begin(
    fork: str,
    level: Level,
    worse: Worse,
    *,
    good: tuple[str, int],
    bad: tuple[str, int],
    commits: Sequence[Suspect],
    policy: TrunkWatch,
    now: datetime,
    suite: int | None = None,
) -> Tracked:
    """A new failure: bisected over the commits between the runs (none needed for a single commit)."""
    tracked = Tracked(
        fork=fork,
        level=level,
        suite=suite,
        worse=worse,
        good_sha=good[0],
        bad_sha=bad[0],
        good_run=good[1],
        bad_run=bad[1],
        found_at=now,
        commits=tuple(commits),
    )
    if len(commits) <= 1 or policy.bisect_runs == 0:
        return tracked.model_copy(update={"phase": Phase.UNBISECTED})
    shas = [c.sha for c in commits]
    # The later run is the whole range failing: its confirmation re-run is the last prefix's, like any other.
    kind = bisect.Kind.REGRESSION if worse.kind is Change.METRIC else bisect.Kind.FAILURE
    budget = bisect.Budget(max_runs=policy.bisect_runs)
    state = bisect.start(
        f"trunk {shas[0][:10]}..{shas[-1][:10]}", shas, tier=level.name, budget=budget, kind=kind
    )
    return tracked.model_copy(update={"bisection": state})


def settle(tracked: Tracked) -> Tracked:
    """The phase the bisection's state implies (trunk stops at the first culprit: the commits after it are
    trunk's own, not a remainder to re-validate)."""
    state = tracked.bisection
    if state is None or tracked.phase in (Phase.FIXED, Phase.UNBISECTED):
        return tracked
    if state.culprits:
        return tracked.model_copy(update={"phase": Phase.FOUND})
    if state.phase is bisect.Phase.EXHAUSTED:
        return tracked.model_copy(update={"phase": Phase.EXHAUSTED})
    if state.phase is bisect.Phase.DONE:  # every prefix passed on re-run: nothing reproduced
        return tracked.model_copy(update={"phase": Phase.EXHAUSTED})
    return tracked


def sighted(tracked: Tracked, sighting: Sighting) -> Tracked:
    """A later trunk run's word: still failing (kept), or passing again (fixed)."""
    sightings = (*tracked.sightings, sighting)[-MAX_SIGHTINGS:]
    phase = Phase.FIXED if not sighting.failing else tracked.phase
    return tracked.model_copy(update={"sightings": sightings, "phase": phase})


def suspects(tracked: Tracked) -> tuple[Suspect, ...]:
    """The commits the failure may come from, most likely first: those touching a file the failure names,
    then those in the same directory, then the rest (newest last, in trunk order)."""
    pool: Sequence[Suspect] = tracked.commits
    if tracked.culprit is not None:
        return (tracked.culprit,)
    if tracked.bisection is not None and tracked.bisection.culprits:
        # blamed together (a commit that does not build between them): the culprit is one of these, never
        # one of the commits after them, which `open_suspects` holds once a culprit is taken out
        blamed = set(tracked.bisection.culprits[0].shas)
        pool = [c for c in tracked.commits if c.sha in blamed] or tracked.commits
    elif tracked.bisection is not None:
        left = set(tracked.bisection.open_suspects)
        pool = [c for c in tracked.commits if c.sha in left] or tracked.commits
    named = {m["path"].lstrip("./") for m in LOCATION.finditer(tracked.worse.evidence)}
    folders = {path.rpartition("/")[0] for path in named}

    def rank(commit: Suspect) -> int:
        if named & set(commit.files):
            return 0
        return 1 if folders & {path.rpartition("/")[0] for path in commit.files} else 2

    return tuple(sorted(pool, key=rank))


# --- the tracking issue ------------------------------------------------------------------------------------


def title(tracked: Tracked) -> str:
    state = " (fixed)" if tracked.phase is Phase.FIXED else ""
    if tracked.worse.kind is Change.RUN:
        return f"Trunk watch: {tracked.level.name} leaves no report on fork trunk{state}"
    what = "fails" if tracked.worse.kind is Change.TEST else "regressed"
    name = " ".join(tracked.worse.name.split())[:150]
    return f"Trunk watch: {tracked.level.name} {tracked.worse.kind.value} {name} {what}{state}"


def render(tracked: Tracked, *, runs_url: Mapping[int, str] | None = None) -> str:
    """The tracking issue's body: what got worse, between which trunk commits, the culprit or the ranked
    suspects, the evidence, the bisection's runs, and the trunk runs since."""
    links = runs_url or {}
    kind = KIND_WORDS[tracked.worse.kind]
    lines = [
        marker(tracked.key),
        f"## {tracked.level.name} on fork trunk: {kind} `{_code(tracked.worse.name)}` got worse",
        "",
        f"It was fine at {_sha(tracked.good_sha)} ({_run(tracked.good_run, links)}) and is worse at "
        f"{_sha(tracked.bad_sha)} ({_run(tracked.bad_run, links)}): {len(tracked.commits)} trunk "
        f"commit{'s' if len(tracked.commits) != 1 else ''} between.",
        "",
        *_status(tracked),
        "",
        "### Evidence",
        "",
        _fenced(tracked.worse.evidence[:MAX_EVIDENCE]),
        *_bisection_runs(tracked, links),
        *_sightings(tracked, links),
    ]
    return "\n".join(lines).rstrip() + "\n"


def _status(tracked: Tracked) -> list[str]:
    culprit = tracked.culprit
    if tracked.phase is Phase.FIXED:
        last = tracked.sightings[-1]
        fixed = [f"**Fixed**: it passes again at {_sha(last.sha)}."]
        return fixed + ([f"The culprit was {_commit(culprit)}."] if culprit else [])
    if culprit is not None:
        how = (
            "the only commit between the runs"
            if tracked.bisection is None
            else "bisected, confirmed by a re-run"
        )
        return [f"**Culprit**: {_commit(culprit)} ({how})."]
    state = tracked.bisection
    if tracked.phase is Phase.BISECTING and state is not None:
        left = len(state.open_suspects)
        head = (
            f"**Bisecting**: {left} suspects left after {state.runs} runs, {len(state.in_flight)} in flight."
        )
    elif state is not None and state.culprits:
        together = len(state.culprits[0].shas)
        head = (
            f"**Culprit found** after {state.runs} runs: one of the {together} commits below (a trunk commit "
            "between them does not build, so they could not be told apart)."
        )
    elif state is not None:
        head = (
            f"**Bisection stopped** after {state.runs} runs (budget {state.budget.max_runs}): suspects below."
        )
    else:
        head = "**Not bisected** (no bisection budget): suspects below."
    ranked = [f"{i}. {_commit(c)}" for i, c in enumerate(suspects(tracked), start=1)]
    return [head, "", "### Suspects (most likely first)", "", *ranked]


def _bisection_runs(tracked: Tracked, links: Mapping[int, str]) -> list[str]:
    state = tracked.bisection
    if state is None or not state.results:
        return []
    rows = [
        f"| {_sha(r.probe.commits[-1])} | {r.probe.purpose.value} | {r.outcome.value} | "
        f"{_run(tracked.probes[r.probe.id], links) if r.probe.id in tracked.probes else '—'} |"
        for r in state.results
    ]
    return [
        "",
        "### Bisection runs",
        "",
        "| trunk commit | why | outcome | run |",
        "|---|---|---|---|",
        *rows,
    ]


def _sightings(tracked: Tracked, links: Mapping[int, str]) -> list[str]:
    if not tracked.sightings:
        return []
    rows = [
        f"- {s.at:%Y-%m-%d %H:%M} UTC: {'still failing' if s.failing else 'passes'} at {_sha(s.sha)} "
        f"({_run(s.run, links)})"
        for s in tracked.sightings
    ]
    return ["", "### Trunk runs since", "", *rows]


def _commit(commit: Suspect) -> str:
    return f"{_sha(commit.sha)} {plain(commit.subject)} ({plain(commit.author)})"


def _sha(sha: str) -> str:
    return f"`{sha[:10]}`"


def _run(run: int, links: Mapping[int, str]) -> str:
    return f"[tier run {run}]({links[run]})" if run in links else f"tier run {run}"


def _code(text: str) -> str:
    return " ".join(text.split()).replace("`", "'")[:200]


def _fenced(text: str) -> str:
    """`text` as a code block no line of it can end (a fence longer than any backtick run in it)."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def digest_of(body: str) -> str | None:
    """The marker's digest in an issue body, if any."""
    found = MARKER_PATTERN.search(body)
    return found[1] if found else None


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16]
