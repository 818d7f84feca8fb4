"""Bisection of an ingestion PR that failed a tier (pure): what the flow persists, how a probe's tier run
reads as a bisection outcome, the candidate branches, and what the PR shows.

The search itself is `bot.core.bisect`'s; this module ties its probes to tier runs on candidate branches
(`sluice/bisect/<ingestion>/<bisection>-<probe>`) and its culprits to the planner (a `bisected` risk reason).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from bot.core.bisect import Bisection, Culprit, Kind, Outcome, Phase, Probe
from bot.core.ingestion import Links
from bot.core.l3_metrics import MetricComparison, MetricRegression, regression_outcome
from bot.core.models import RiskKind, RiskLevel, RiskReason
from bot.core.tiers import Level, RunState, TierRun, Verdict

CANDIDATE_PREFIX = "sluice/bisect/"
COMMENT_MARKER = "<!-- sluice:bisection -->"
STARTED_BY_SLUICE = "sluice"
# What a build that did not finish says (the prefix could not be tested: a skip, as `git bisect` exit 125).
BUILD_FAILURE = re.compile(
    r"CompilationError|compilation (?:failed|terminated)|(?:^|: )error: |ninja: build stopped"
    r"|make(?:\[\d+\])?: \*\*\*"
    r"|SyntaxError|ImportError|ModuleNotFoundError|build failed|could not be built",
    re.M,
)


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Status(enum.StrEnum):
    RUNNING = "running"
    DONE = "done"  # every culprit found; the PR is rebuilt without them
    EXHAUSTED = "exhausted"  # the budget ran out: a person takes it from here
    SUPERSEDED = "superseded"  # the PR's head moved on: its probes' results no longer count


class ProbeRun(Frozen):
    """Where one probe runs: its candidate branch and head, and its tier run (its newest attempt)."""

    probe: int
    branch: str
    head: str | None = None  # None: the prefix could not be picked (a skip, never dispatched)
    run: int | None = None  # the tier run's id
    attempt: int = 1
    outcome: Outcome | None = None
    detail: str = ""


class BisectionRecord(Frozen):
    """One bisection of one ingestion PR on one tier, as the store keeps it."""

    id: int | None = None
    fork: str
    pull: int
    ingestion: str
    level: Level
    head_sha: str  # the PR's head that failed: the bisection stands for it only
    base_sha: str  # what the PR's commits sit on (candidates are built on it)
    fork_commits: tuple[str, ...]  # the PR's commits, one per upstream commit of `state.commits`, same order
    state: Bisection
    status: Status = Status.RUNNING
    started_by: str = STARTED_BY_SLUICE
    reason: str = ""  # the failure bisected (the tier run's first real failure)
    build_failure: bool = False  # that failure is itself a build failure: a prefix's build failure then fails
    parallel: int = 1
    probes: tuple[ProbeRun, ...] = ()
    version: int = 0  # bumped on each save: two workers never both advance the same state
    # A performance bisection (L3 passed its tests, its comparison regressed): the metrics it bisects
    # (`benchmark · metric`, runners.compare's failing cells) and the tier run whose report they regressed
    # against; each probe's report is compared with that same report. () for a failure's bisection.
    regressions: tuple[str, ...] = ()
    baseline_run: int | None = None
    suite: int | None = None  # the one suite of the tier its probes run (its index in the config); None: all
    suite_name: str = ""  # that suite's name, as the comment shows it

    @property
    def active(self) -> bool:
        return self.status is Status.RUNNING

    @property
    def kind(self) -> Kind:
        return Kind.REGRESSION if self.regressions else Kind.FAILURE

    def probe_run(self, probe: int) -> ProbeRun | None:
        return next((p for p in self.probes if p.probe == probe), None)

    def with_probe(self, run: ProbeRun) -> BisectionRecord:
        kept = tuple(p for p in self.probes if p.probe != run.probe)
        return self.model_copy(update={"probes": tuple(sorted((*kept, run), key=lambda p: p.probe))})


@dataclass(frozen=True)
class BisectionStats:
    """A fork's bisections on one tier, for `/metrics`."""

    fork: str
    level: Level
    bisections: int
    runs: int  # the tier runs they used
    running: int


@dataclass(frozen=True)
class Blame:
    """An upstream commit Sluice's tier runs blamed: a bisection found the tier failed with it and passed
    without it, or the tier failed on an ingestion PR that carried it alone."""

    level: Level
    pull: int  # the ingestion PR whose tier failed
    detail: str  # what its failure was
    time: int  # when it was blamed (epoch seconds)


def candidate_branch(ingestion: str, bisection: int, probe: int) -> str:
    return f"{CANDIDATE_PREFIX}{ingestion}/{bisection}-{probe}"


def literal_head(record: BisectionRecord, probe: Probe) -> str | None:
    """The PR's own commit that is this prefix's head, when the prefix is a literal prefix of the PR branch
    (nothing taken out before it); None when it must be picked again onto the base."""
    n = len(probe.commits)
    if n == 0:
        return record.base_sha
    return record.fork_commits[n - 1] if probe.commits == record.state.commits[:n] else None


def is_build_failure(detail: str) -> bool:
    return BUILD_FAILURE.search(detail) is not None


def outcome_of(run: TierRun, *, retries: int, build_failure: bool) -> Outcome | None:
    """A probe's finished tier run as a bisection outcome; None: retry it (an infrastructure failure within
    the tier's retries). A build failure is a skip unless the failure bisected is one; a run that timed out,
    was refused, or stayed lost says nothing about the culprit: a skip too."""
    if run.state is not RunState.COMPLETED or run.verdict is None:
        return Outcome.SKIP
    if run.verdict in (Verdict.PASSED, Verdict.BROKEN_TRUNK):  # trunk's own failures are not the bundle's
        return Outcome.PASS
    if run.verdict is Verdict.INFRA:
        return None if run.attempt <= retries else Outcome.SKIP
    if not build_failure and is_build_failure(run.detail):
        return Outcome.SKIP
    return Outcome.FAIL


def regression_outcome_of(
    run: TierRun, regressions: MetricComparison | None, *, names: Sequence[str], retries: int
) -> Outcome | None:
    """A performance bisection's probe as an outcome: its report compared with the bisection's baseline
    (`regressions`, None when they could not be compared) still shows one of `names` regressed (FAIL) or none
    (PASS); None: retry it (an infrastructure failure within the tier's retries); a run that left no usable
    result says nothing: a skip."""
    if run.state is not RunState.COMPLETED or run.verdict is None:
        return Outcome.SKIP
    if run.verdict is Verdict.INFRA:
        return None if run.attempt <= retries else Outcome.SKIP
    return regression_outcome(names, regressions)


def regression_reason(regressions: Sequence[MetricRegression]) -> str:
    """What a performance bisection bisects, for its record and the culprit's reason: each metric, its
    before and after."""
    return "; ".join(f"{r.name} {r.evidence()}" for r in regressions)


def probe_suite(
    suite_names: Sequence[str], failing: Collection[str], *, ran: int | None = None
) -> int | None:
    """The one suite of the tier a bisection's probes run (its index in the config's `suite_names`): the
    suite the PR's run ran alone (`ran`), else the one suite that failed (`failing`: the suites with failing
    tests, or holding the regressed kernels). None, the whole tier, when no suite, several, or one the tier
    does not name (an internal extension's suite that L1 adds) failed: the dispatch's selection names one."""
    if ran is not None:
        return ran if 0 <= ran < len(suite_names) else None
    names = set(failing)
    if len(names) != 1:
        return None
    (name,) = names
    return suite_names.index(name) if name in suite_names else None


def should_bisect(run: TierRun, commits: int) -> bool:
    """Whether a PR's own finished tier run calls for a bisection: a real failure of more than one commit
    (a lone commit is its own culprit)."""
    return (
        run.bisection is None
        and run.state is RunState.COMPLETED
        and run.verdict is Verdict.FAILED
        and commits > 1
    )


def culprit_detail(record: BisectionRecord) -> str:
    """What the culprit's `bisected` reason says: the tier, the PR, the failure (or the regression)."""
    what = "regressed" if record.regressions else "failed"
    return f"{record.level.name} {what} on #{record.pull} ({record.ingestion}): {_plain(record.reason)}"[:300]


def culprit_reason(detail: str) -> RiskReason:
    """The planner's reason for a blamed commit: critical, so it roots a risky chain (and its dependents
    follow it there) under today's rules and with a risk model alike."""
    return RiskReason(kind=RiskKind.BISECTED, level=RiskLevel.CRITICAL, detail=detail)


def blamed(record: BisectionRecord) -> tuple[str, ...]:
    """The commits taken out of the PR: every culprit and what depends on it."""
    return record.state.removed


# --- what the PR shows --------------------------------------------------------------------------------------

_SHOWN = {Outcome.PASS: "passed", Outcome.FAIL: "failed", Outcome.SKIP: "skipped"}


def render(record: BisectionRecord, *, links: Links | None = None) -> str:
    """The bisection's sticky comment: where it stands, its probes, the suspects, the budget used. Upstream
    commits (suspects, culprits) link to upstream's pages when `links` knows them."""
    state = record.state
    commit = links.commit if links is not None else _plain_sha
    budget = state.budget
    limit = f"{budget.max_runs}" if budget.max_runs is not None else "∞"
    hours = (
        f", {state.runner_hours:g} of {budget.max_runner_hours:g} runner hours"
        if budget.max_runner_hours
        else ""
    )
    who = "Sluice" if record.started_by == STARTED_BY_SLUICE else f"@{record.started_by}"
    what = " (a performance regression)" if record.regressions else ""
    lines = [
        COMMENT_MARKER,
        f"### Bisection of {record.level.name}{what} on `{record.head_sha[:10]}`: {_headline(record)}",
        "",
        *_what(record, who),
        *_suite(record),
        f"{len(state.commits)} commits in upstream order; {state.runs + state.retried} of {limit} tier runs "
        f"used{_again(state.retried)}{hours}.",
        "",
        "| probe | prefix | head | outcome |",
        "|---|---|---|---|",
    ]
    probes = {p.id: p for p in (*(r.probe for r in state.results), *state.in_flight)}
    for run in record.probes:
        probe = probes.get(run.probe)
        length = len(probe.commits) if probe is not None else "?"
        last = commit(probe.commits[-1]) if probe is not None and probe.commits else "—"
        head = run.head[:12] if run.head else "not built"  # bare: GitHub links the fork's own commits
        outcome = _SHOWN[run.outcome] if run.outcome else "running"
        if run.attempt > 1:
            outcome += f" (attempt {run.attempt})"
        if run.detail:
            outcome += f": {_plain(run.detail)[:120]}"
        lines.append(f"| {run.probe} | first {length}, up to {last} | {head} | {outcome} |")
    lines.append("")
    lines += _culprits(state.culprits, commit) + _untried(state.untried, commit)
    if record.status is Status.RUNNING and state.phase is Phase.SEARCHING:
        suspects = state.open_suspects
        shown = ", ".join(commit(s) for s in suspects[:12]) + (" …" if len(suspects) > 12 else "")
        lines.append(f"Suspects left: {len(suspects)} ({shown}).")
    elif record.status is Status.EXHAUSTED:
        left = state.open_suspects
        lines.append(
            f"**The budget is spent**: the culprit is among {len(left)} commits from {commit(left[0])} "
            "(if any). A person takes it from here: `/bisect` starts again, with a fresh budget."
        )
    elif record.status is Status.DONE and record.ingestion.startswith("chain-"):
        lines.append("The culprits are recorded with the failure attached; a risky chain waits for a person.")
    elif record.status is Status.DONE:
        lines.append(
            "The culprits move into a risky chain with the failure attached; this PR is rebuilt without "
            "them and their dependents, and its tiers run again."
        )
    elif record.status is Status.SUPERSEDED:
        lines.append("The PR's head moved on: this bisection stopped, its results no longer count.")
    return "\n".join(lines) + "\n"


def _what(record: BisectionRecord, who: str) -> list[str]:
    if not record.regressions:
        why = _plain(record.reason) or "a real failure"
        return [f"Started by {who} after {record.level.name} failed: {why}."]
    shown = ", ".join(f"`{_code(name)}`" for name in record.regressions[:12])
    more = f" and {len(record.regressions) - 12} more" if len(record.regressions) > 12 else ""
    against = f"tier run {record.baseline_run}" if record.baseline_run is not None else "the baseline"
    return [
        f"Started by {who} after {record.level.name} passed its tests but its comparison with the baseline "
        f"report ({against}) showed a confident regression of a critical kernel: {shown}{more}.",
        "A probe fails while its report still shows one of them regressed against that same report, passes "
        "when none is, and is skipped when it leaves no comparable benchmarks.",
    ]


def _suite(record: BisectionRecord) -> list[str]:
    if record.suite is None:
        return []
    return [
        f"Its probes run only the suite `{_code(record.suite_name)}` of {record.level.name} (what failed)."
    ]


def _headline(record: BisectionRecord) -> str:
    if record.status is Status.RUNNING:
        return f"running ({len(record.state.in_flight)} probes in flight)"
    if record.status is Status.DONE:
        return f"done, {len(record.state.culprits)} culprit" + (
            "s" if len(record.state.culprits) != 1 else ""
        )
    return record.status.value


def _again(retried: int) -> str:
    return f" ({retried} of them again after an infrastructure failure)" if retried else ""


def _plain_sha(sha: str) -> str:
    return f"`{sha[:10]}`"


def _untried(untried: Sequence[str], commit: Callable[[str], str]) -> list[str]:
    """`strategy: merge`: what followed the culprit, which no probe could merge without it."""
    if not untried:
        return []
    return [
        f"Not tried: the {len(untried)} commits after the culprit, from {commit(untried[0])} (`strategy: "
        "merge`: a merge of any of them brings the culprit). They go on after its risky chain.",
        "",
    ]


def _culprits(culprits: Sequence[Culprit], commit: Callable[[str], str]) -> list[str]:
    if not culprits:
        return []
    lines = ["**Culprits**:"]
    for c in culprits:
        shas = " + ".join(commit(s) for s in c.shas)
        also = f"; with its dependents {', '.join(commit(d) for d in c.dependents)}" if c.dependents else ""
        lines.append(f"- {shas} (found in {c.runs} runs{', confirmed' if c.confirmed else ''}){also}")
    return [*lines, ""]


def _code(text: str) -> str:
    """`text` fit for inline code: one line, no backtick to end it."""
    return " ".join(text.split()).replace("`", "'")[:150]


def _plain(text: str) -> str:
    """One line of a failure's text, without what Markdown would read as markup."""
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    return re.sub(r"[`|<>@\[\]]", "'", first)[:200]
