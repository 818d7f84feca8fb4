"""Tiered validation as data: which tier runs next on a PR head, and how a finished run is triaged."""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from bot.core.config import BUILD_SUITE, Extension, L3Policy, SluiceConfig, SuiteConfig, TierConfig
from bot.core.gate import FAILED
from bot.core.ingestion import CheckName
from bot.core.webhooks import CheckRun

SHA40 = re.compile(r"^[0-9a-f]{40}\Z")
MAX_LOG_CHARS = 200_000  # the tail of a tier log Sluice reads (and triages: the patterns scan it)
EXTENSION_PREFIX = "ext-"  # an extension's suites run as one command suite named ext-<extension>


class Level(enum.StrEnum):
    """A tier as the runner names it (`python -m runners run --tier l1`)."""

    L1 = "l1"  # hosted runners: build and unit tests
    L2 = "l2"  # self-hosted GPU runners: correctness sweeps
    L3 = "l3"  # self-hosted GPU runners: performance

    @property
    def check(self) -> CheckName:
        return CheckName(f"sluice/{self.name}")

    @property
    def number(self) -> int:
        return int(self.value[1])

    @classmethod
    def of_number(cls, number: int) -> Level:
        return cls(f"l{number}")


LEVELS = (Level.L1, Level.L2, Level.L3)


def failed_levels(checks: Mapping[str, CheckRun]) -> list[Level]:
    """The tiers whose check run (by name, as `ForkGitHub.check_runs` lists a head's) concluded failed or
    timed out: what a re-run of the failed tiers starts again."""
    return [
        lv for lv in LEVELS if (run := checks.get(lv.check.value)) is not None and run.conclusion in FAILED
    ]


class Selection(enum.IntEnum):
    """Which suites of a tier run: a workflow input, so an integer."""

    FULL = 0  # an ingestion: every suite of the tier, and L1 adds the internal-extension suites
    CRITICAL = 1  # a fork PR: the tier's `critical` subset (its critical kernels), all when none is named


ONE_SUITE = 2  # a selection code from here on runs one suite of the tier: code - ONE_SUITE is its index


def selection_code(selection: Selection, suite: int | None) -> int:
    """The integer a run's selection travels as (a workflow input, the store's column, `--selection`): the
    selection itself, or `ONE_SUITE + i` for only suite `i` of the tier (an `/l3 <suite>` request). An
    index, not a name, so the workflow inputs stay integers."""
    return int(selection) if suite is None else ONE_SUITE + suite


def decode_selection(code: int) -> tuple[Selection, int | None]:
    """`selection_code` read back: (the selection, the one suite's index or None); ValueError below 0."""
    if code < 0:
        raise ValueError(f"a selection is 0, 1 or {ONE_SUITE}+ (one suite), not {code}")
    return (Selection.FULL, code - ONE_SUITE) if code >= ONE_SUITE else (Selection(code), None)


class SubjectKind(enum.StrEnum):
    BUNDLE = "bundle"
    CHAIN = "chain"
    FORK_PR = "fork-pr"  # the team's own PR against fork trunk, from a branch of the fork
    # A PR from another repository (an outside contributor's fork, or one since deleted): L1 on GitHub's
    # runners; L2 and L3, on the fork's self-hosted runners, only when someone with write access asks.
    OUTSIDE_PR = "outside-pr"
    EMERGENCY = "emergency"  # an emergency pick (`/cherry-pick`): the tiers its gate requires, L1 by default
    TRUNK = "trunk"  # fork trunk's own head (trunk watch): no PR, no check run; its runs have pull TRUNK_PULL


TRUNK_PULL = 0  # the `pull` of a tier run on fork trunk itself (GitHub numbers PRs from 1)


class RunState(enum.StrEnum):
    DISPATCHED = "dispatched"  # asked for; waiting for its result
    UNDISPATCHED = "undispatched"  # recorded, but asking for it failed for now (GitHub's 5xx, the network)
    COMPLETED = "completed"  # a result came back (its verdict says which)
    TIMED_OUT = "timed_out"  # no result within the tier's timeout: not waited on any longer
    REFUSED = "refused"  # GitHub refused the dispatch (404 no such workflow, 422 bad inputs)
    STALE = "stale"  # the PR's head moved on: its result is discarded


class Verdict(enum.StrEnum):
    PASSED = "passed"
    FAILED = "failed"  # a real failure: assertions, numerics, compiler errors, missing suites or tests
    INFRA = "infrastructure"  # the machine failed, not the code: retried a bounded number of times
    BROKEN_TRUNK = "broken-trunk"  # every failure also fails on fork trunk's latest report


@dataclass(frozen=True)
class Subject:
    """What a tier validates: one PR's head."""

    fork: str
    pull: int
    head_sha: str
    baseline_sha: str  # the PR's base: what the benchmarks compare against
    kind: SubjectKind
    ingestion: str  # the ingestion id, or `pull-<n>` for a fork PR

    @property
    def selection(self) -> Selection:
        return Selection.CRITICAL if self.kind in PERSONS_PRS else Selection.FULL


PERSONS_PRS = frozenset({SubjectKind.FORK_PR, SubjectKind.OUTSIDE_PR})
OUTSIDE_WAITS = (
    "this PR comes from outside the fork, and its code runs on the fork's self-hosted runners only when "
    "someone with write access asks"
)


@dataclass(frozen=True)
class TierRun:
    """One attempt of one tier on one head, as the store keeps it."""

    fork: str
    pull: int
    ingestion: str
    level: Level
    head_sha: str
    attempt: int
    state: RunState
    dispatched_at: datetime
    selection: Selection = Selection.FULL
    suite: int | None = None  # only this suite of the tier (its index in the config): an `/l3 <suite>`
    id: int | None = None
    run_id: int | None = None  # the workflow run (GitHub backend)
    verdict: Verdict | None = None
    detail: str = ""  # why: the refusal, the infrastructure marker, the first real failure
    report: str | None = None  # the tier report's JSON
    completed_at: datetime | None = None
    bisection: int | None = None  # a bisection's probe (its id and the probe's), not a run of the PR's head
    probe: int | None = None

    @property
    def failed(self) -> bool:
        return self.state in (RunState.TIMED_OUT, RunState.REFUSED) or (
            self.state is RunState.COMPLETED and self.verdict is not Verdict.PASSED
        )


# --- what to do next --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Dispatch:
    level: Level
    attempt: int
    selection: Selection
    reason: str  # for the check run: "L1 passed", "retry 2 of 3: runner lost"
    suite: int | None = None  # only this suite of the tier, by index (see `selection_code`)
    again: TierRun | None = None  # the recorded attempt whose dispatch failed: asked for again, same id


@dataclass(frozen=True)
class TimeOut:
    run: TierRun


@dataclass(frozen=True)
class Blocked:
    """A tier that will not start on this head, and why (its check run says so)."""

    level: Level
    reason: str
    waiting: bool = False  # not blocked by a failure: it waits for a maintainer to ask for it


TierAction = Dispatch | TimeOut | Blocked


@dataclass(frozen=True)
class Want:
    """Who asked for what, besides the policy: a person's re-run or L3 request on this head."""

    rerun: Level | None = None
    l3: bool = False
    suite: str | None = None  # with `l3`: run only this L3 suite (a name of the config's L3 suites)

    @property
    def level(self) -> Level | None:
        """The tier a person asked for: the one to re-run, else L3 when it was requested."""
        return self.rerun if self.rerun is not None else Level.L3 if self.l3 else None


WAITING = (RunState.DISPATCHED, RunState.UNDISPATCHED)  # a run Sluice still waits on (or asks for again)


def next_actions(
    subject: Subject, runs: Sequence[TierRun], config: SluiceConfig, *, now: datetime, want: Want = Want()
) -> list[TierAction]:
    """Walk L1 → L2 → L3 on the subject's head: dispatch the first tier that should run and has not, time out
    a stalled one, retry an infrastructure failure, and block the tiers above one that failed."""
    latest = latest_runs(subject.head_sha, runs)
    for level in LEVELS:
        tier = tier_config(config, level)
        run = latest.get(level)
        asked = want.rerun is level or (want.l3 and level is Level.L3)
        if asked and run is not None and run.state not in WAITING:  # it ran here, passed or failed
            return [_again(subject, run, config, want=want)]
        if run is None:
            return _start(subject, level, config, want=want)
        deadline = run.dispatched_at + timedelta(minutes=tier.timeout_minutes)
        if run.state is RunState.UNDISPATCHED and now < deadline:
            why = f"dispatched again: {run.detail or 'the first dispatch failed'}"
            return [Dispatch(level, run.attempt, run.selection, why, suite=run.suite, again=run)]
        if run.state in WAITING:  # waiting for its result, or never dispatched within the timeout
            return [TimeOut(run)] if now >= deadline else []
        if not run.failed:
            continue
        if _retried(run, tier):
            why = f"retry {run.attempt} of {tier.retries}: {run.detail or 'infrastructure failure'}"
            return [Dispatch(level, run.attempt + 1, run.selection, why, suite=run.suite)]
        return [Blocked(above, f"{level.name} failed") for above in LEVELS if above.number > level.number]
    return []


def _again(subject: Subject, run: TierRun, config: SluiceConfig, *, want: Want) -> Dispatch:
    """A person's re-run (or L3 request) of a tier that ran on this head: its next attempt."""
    if want.l3 and run.level is Level.L3:
        return _requested_l3(subject, config, want.suite, attempt=run.attempt + 1)
    return Dispatch(run.level, run.attempt + 1, subject.selection, "re-run requested")


def _retried(run: TierRun, tier: TierConfig) -> bool:
    """An infrastructure failure with retries left: dispatched again, not yet a failure of the tier."""
    return run.verdict is Verdict.INFRA and run.attempt <= tier.retries


def _start(subject: Subject, level: Level, config: SluiceConfig, *, want: Want) -> list[TierAction]:
    if level is Level.L1:
        return [Dispatch(level, 1, subject.selection, "every ingestion and fork PR runs L1")]
    asked = want.l3 or want.rerun is level  # a re-run of a tier that never ran here asks for its first run
    if subject.kind is SubjectKind.EMERGENCY and not asked:
        highest = max(Level(key).number for key in config.gate.emergency_required_tiers)
        if level.number > highest:
            return []  # an emergency pick runs the tiers up to the highest its gate requires (L3 on request)
        below = Level.of_number(level.number - 1).name
        return [Dispatch(level, 1, subject.selection, f"{below} passed; the emergency gate requires it")]
    if subject.kind is SubjectKind.OUTSIDE_PR and not asked:
        return [Blocked(level, OUTSIDE_WAITS, waiting=True)] if level is Level.L2 else []
    if level is Level.L2:
        outside = subject.kind is SubjectKind.OUTSIDE_PR
        return [
            Dispatch(level, 1, subject.selection, "L1 passed; a maintainer asked" if outside else "L1 passed")
        ]
    policy = config.tiers.l3_policy
    chain = subject.kind is SubjectKind.CHAIN and policy is L3Policy.CHAINS
    if asked:
        return [_requested_l3(subject, config, want.suite)]
    if (policy is L3Policy.ALWAYS and subject.kind not in PERSONS_PRS) or chain:
        return [Dispatch(level, 1, subject.selection, f"L2 passed; L3 {policy}")]
    return []


def _requested_l3(subject: Subject, config: SluiceConfig, suite: str | None, *, attempt: int = 1) -> Dispatch:
    """A person's L3 request: all its suites, or only the one named (an unknown name runs them all)."""
    names = [s.name for s in config.tiers.l3.suites]
    if suite is None or suite not in names:
        return Dispatch(Level.L3, attempt, subject.selection, "L2 passed; L3 requested")
    reason = f"L2 passed; L3 requested (suite {suite} only)"
    return Dispatch(Level.L3, attempt, subject.selection, reason, suite=names.index(suite))


class Obstacle(enum.StrEnum):
    """What keeps a tier a person asked for from starting on a head now."""

    UNFINISHED = "has not finished on this head yet"  # a tier below it: not run, running, or being retried
    FAILED = "failed on this head"  # a tier below it
    RUNNING = "is still running on this head"  # the tier itself: its attempt still waits for a result


@dataclass(frozen=True)
class NotNow:
    """Why a person's re-run or L3 request starts nothing on this head now: `level` is in the way."""

    wanted: Level
    level: Level  # a tier below the wanted one, or the wanted one itself (RUNNING)
    obstacle: Obstacle

    @property
    def reason(self) -> str:
        return f"{self.level.name} {self.obstacle}"

    def remedy(self, again: str) -> str:
        """What a maintainer does about it, `again` being the command that asked (`/l3`, `/retry l2`)."""
        if self.obstacle is Obstacle.RUNNING:
            return f"comment `{again}` again once it ends"
        below = Level.of_number(self.wanted.number - 1).name
        if self.obstacle is Obstacle.FAILED:
            fix = f"`/retry {self.level.value}` or push a fix"
            return f"{fix}, then comment `{again}` again once {below} passes"
        return f"comment `{again}` again once {below} passes"


def why_not(
    subject: Subject, runs: Sequence[TierRun], config: SluiceConfig, *, now: datetime, want: Want
) -> NotNow | None:
    """Why the tier `want` asks for would not start on the subject's head now; None when next_actions starts
    a new attempt of it (or nothing was asked). next_actions decides, so the two never disagree."""
    wanted = want.level
    if wanted is None:
        return None
    actions = next_actions(subject, runs, config, now=now, want=want)
    if any(isinstance(a, Dispatch) and a.level is wanted and a.again is None for a in actions):
        return None  # a new attempt of it (asking again for one whose dispatch failed is no new attempt)
    latest = latest_runs(subject.head_sha, runs)
    for below in LEVELS[: wanted.number - 1]:
        run = latest.get(below)
        if run is not None and run.failed and not _retried(run, tier_config(config, below)):
            return NotNow(wanted, below, Obstacle.FAILED)
        if run is None or run.failed or run.state in WAITING:
            return NotNow(wanted, below, Obstacle.UNFINISHED)
    # every tier below passed, and an ask starts the tier it names unless its latest attempt still waits
    return NotNow(wanted, wanted, Obstacle.RUNNING)


def overdue(runs: Sequence[TierRun], config: SluiceConfig, *, now: datetime) -> list[TierRun]:
    """The runs still waiting for a result (or for their dispatch) past their tier's timeout, whatever their
    PR (the periodic sweep times them out: nothing else may look at a fork PR's or a closed PR's tiers)."""
    return [
        r
        for r in runs
        if r.state in WAITING
        and now >= r.dispatched_at + timedelta(minutes=tier_config(config, r.level).timeout_minutes)
    ]


def latest_runs(head_sha: str, runs: Sequence[TierRun]) -> dict[Level, TierRun]:
    """The newest attempt of each tier on `head_sha` (stale runs and other heads do not count)."""
    latest: dict[Level, TierRun] = {}
    for run in runs:
        if run.head_sha != head_sha or run.state is RunState.STALE or run.bisection is not None:
            continue
        if run.level not in latest or run.attempt > latest[run.level].attempt:
            latest[run.level] = run
    return latest


def stale_runs(head_sha: str, runs: Sequence[TierRun]) -> list[TierRun]:
    """Runs still waiting for a result on a head that is no longer the PR's: their results are discarded."""
    return [r for r in runs if r.head_sha != head_sha and r.state in WAITING and r.bisection is None]


def tier_config(config: SluiceConfig, level: Level) -> TierConfig:
    tier: TierConfig = getattr(config.tiers, level.value)
    return tier


# --- which suites ------------------------------------------------------------------------------------------


def extension_suite(extension: Extension) -> SuiteConfig:
    """An internal extension's test paths as one pytest suite (JUnit XML, so each test counts)."""
    argv = ("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml={junit}", *extension.suites)
    return SuiteConfig(name=f"{EXTENSION_PREFIX}{extension.name}", command=argv)


def suites_for(
    config: SluiceConfig, level: Level, selection: Selection, *, suite: int | None = None
) -> tuple[SuiteConfig, ...]:
    """The suites a tier runs for a selection: an ingestion's L1 adds every internal extension's suites, but
    for an extension the tier already tests with a suite of its own name (the fork said how to run them);
    with `suite`, only that one of the tier's (none when the index is past its suites)."""
    tier = tier_config(config, level)
    if suite is not None:
        return tier.suites[suite : suite + 1]
    if selection is Selection.CRITICAL:
        return tuple(s for s in tier.suites if not tier.critical or s.name in tier.critical)
    named = {s.name for s in tier.suites}
    extensions = tuple(
        extension_suite(e)
        for e in config.extensions
        if e.suites and not {e.name, f"{EXTENSION_PREFIX}{e.name}"} & named
    )
    return tier.suites + (extensions if level is Level.L1 else ())


# --- triage ------------------------------------------------------------------------------------------------

# What a lost runner, a missing or busy GPU, a driver mismatch, the network, a full disk or memory say.
INFRA_MARKERS: Mapping[str, re.Pattern[str]] = {
    "runner lost": re.compile(
        r"lost communication with the server|runner has received a shutdown signal"
        r"|runner[^\n]{0,80}?(?:lost|offline)",  # bounded: a long line must not cost quadratic time
        re.I,
    ),
    "GPU missing": re.compile(
        r"no CUDA GPUs are available|no (?:GPU|CUDA-capable device)|NVIDIA-SMI has failed", re.I
    ),
    "GPU busy": re.compile(r"busy or unavailable|CUDA_ERROR_DEVICE_BUSY|device is busy", re.I),
    "driver mismatch": re.compile(r"driver version is insufficient|driver/library version mismatch", re.I),
    "network": re.compile(
        r"Temporary failure in name resolution|Could not resolve host|Connection (?:reset|refused|timed out)"
        r"|Network is unreachable",
        re.I,
    ),
    "disk full": re.compile(r"No space left on device|ENOSPC|disk quota exceeded", re.I),
    "out of memory": re.compile(r"out of memory|OutOfMemoryError|MemoryError|Killed signal|oom-kill", re.I),
}
# What a real failure says: never retried, whatever else the log holds. A mismatch of shapes, sizes or
# types, but not the "Driver/library version mismatch" of the driver marker above.
REAL_MARKERS = re.compile(
    r"AssertionError|assert |(?<!version )mismatch|not close|Mismatched elements|(?-i:(?:^|: )error: )|"
    r"CompilationError|"
    r"expected \d+|the baseline ran|ran no tests|has no suite|SyntaxError|NameError|TypeError|ImportError",
    re.I | re.M,
)
NAMES_FAILURES = re.compile(r"^\d+ tests? (?:failed|could not run): ")  # a suite's summary of its tests
NOT_RUN = "not run: "  # a suite the failed build kept from running: the build's failure says why
LOCATION = re.compile(r"(?P<path>[A-Za-z0-9_./-]+\.(?:py|mlir|cpp|cc|c|h|hpp|td|ll)):(?P<line>\d+)")


@dataclass(frozen=True)
class SuiteFacts:
    name: str
    outcome: str
    executed: int
    expected: int | None = None
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class FailedTest:
    suite: str
    name: str
    message: str = ""

    @property
    def key(self) -> str:
        return f"{self.suite}::{self.name}"

    def location(self) -> tuple[str, int] | None:
        """The file and line a failure message names (a traceback's last frame), if any."""
        found = list(LOCATION.finditer(self.message))
        return (found[-1]["path"].lstrip("./"), int(found[-1]["line"])) if found else None


@dataclass(frozen=True)
class ReportFacts:
    """What the decisions read of a tier report (the report's schema lives in runners.report)."""

    suites: tuple[SuiteFacts, ...]
    failures: tuple[FailedTest, ...]
    environment: Mapping[str, str] = field(default_factory=dict)
    head_sha: str | None = None

    @property
    def passed(self) -> bool:
        return bool(self.suites) and all(s.outcome == "passed" for s in self.suites)


@dataclass(frozen=True)
class Triage:
    verdict: Verdict
    reason: str
    broken_trunk: tuple[str, ...] = ()  # failing tests trunk's latest report fails too
    infra: str | None = None  # which infrastructure marker


def triage(
    conclusion: str,
    facts: ReportFacts | None,
    *,
    report_problem: str | None = None,
    log: str = "",
    trunk: ReportFacts | None = None,
) -> Triage:
    """Passed, a real failure, an infrastructure failure (retried), or a failure trunk already has.

    A run without a valid report is a failure (an infrastructure one only when the log says so), never a pass.
    """
    if facts is None:
        marker = _infra_marker(log) if not REAL_MARKERS.search(log) else None
        problem = report_problem or "the run left no tier report"
        if marker is not None:
            return Triage(Verdict.INFRA, f"{marker}: {problem}", infra=marker)
        return Triage(Verdict.FAILED, f"{problem} (workflow conclusion: {conclusion})")
    if facts.passed and conclusion == "success":
        return Triage(Verdict.PASSED, "every suite passed")
    return _failed(conclusion, facts, log=log, trunk=trunk)


def _failed(conclusion: str, facts: ReportFacts, *, log: str, trunk: ReportFacts | None) -> Triage:
    texts = [f.message for f in facts.failures]
    # A suite's summary of its failing tests, and the build's of its failing command, add nothing to the
    # failures' own messages (and would hide an infrastructure marker in them).
    build_failed = any(f.suite == BUILD_SUITE for f in facts.failures)
    problems = (p for s in facts.suites if not (build_failed and s.name == BUILD_SUITE) for p in s.problems)
    texts += [p for p in problems if not NAMES_FAILURES.match(p) and not p.startswith(NOT_RUN)]
    if facts.passed:  # the report is fine but the job failed after it: the log says why
        texts.append(log)
    real = [t for t in texts if REAL_MARKERS.search(t) or _infra_marker(t) is None]
    if texts and not real:
        marker = next(m for t in texts if (m := _infra_marker(t)) is not None)
        return Triage(Verdict.INFRA, f"{marker}: {texts[0][:200]}", infra=marker)
    reason = real[0][:200] if real else f"the workflow concluded {conclusion}"
    # A build that failed is this head's (or the runner's) failure: trunk's build failing too, for its own
    # reason, does not make it trunk's.
    if trunk is not None and facts.failures and not build_failed:
        return _against_trunk(facts, trunk, real=real, reason=reason)
    return Triage(Verdict.FAILED, reason)


def _against_trunk(facts: ReportFacts, trunk: ReportFacts, *, real: list[str], reason: str) -> Triage:
    """Broken trunk when trunk fails every failing test too and nothing else failed; else a failure whose
    reason is this head's own, not a test trunk fails as well."""
    theirs = {f.key for f in trunk.failures}
    shared = tuple(sorted(f.key for f in facts.failures if f.key in theirs))
    if len(shared) == len(facts.failures) and _failed_by_tests_only(facts):
        return Triage(Verdict.BROKEN_TRUNK, "every failure also fails on fork trunk", broken_trunk=shared)
    trunks = {f.message for f in facts.failures if f.key in theirs}
    own = next((t for t in real if t not in trunks), None)
    return Triage(Verdict.FAILED, own[:200] if own else reason, broken_trunk=shared)


def _failed_by_tests_only(facts: ReportFacts) -> bool:
    """Whether each suite's problems only name its failing tests. Any other problem (fewer tests than
    expected, a command that crashed with no failing test, no benchmarks written) is this head's own,
    whatever trunk's tests do."""
    return all(NAMES_FAILURES.match(p) or p.startswith(NOT_RUN) for s in facts.suites for p in s.problems)


def _infra_marker(text: str) -> str | None:
    return next((name for name, pattern in INFRA_MARKERS.items() if pattern.search(text)), None)


def valid_inputs(inputs: Mapping[str, str]) -> bool:
    """Workflow inputs are integers and 40-hex SHAs only: nothing a shell or an expression could misread."""
    return all(value.isdigit() or SHA40.fullmatch(value) for value in inputs.values())


def workflow_inputs(subject: Subject, run: TierRun) -> dict[str, str]:
    """The `workflow_dispatch` inputs of a tier run; `request`, the tier run's id, names its run."""
    assert run.id is not None
    inputs = {
        "tier": str(run.level.number),
        "pull": str(subject.pull),
        "head_sha": subject.head_sha,
        "baseline_sha": subject.baseline_sha,
        "selection": str(selection_code(run.selection, run.suite)),
        "request": str(run.id),
    }
    assert valid_inputs(inputs), inputs
    return inputs


PASS_RATE_WINDOW = (
    50  # a tier's pass rate is over its newest completed runs on a fork: today's, not last year's
)


@dataclass(frozen=True)
class TierStats:
    """A tier's record on one fork, for `/metrics`: how many of its newest completed runs passed, and the
    runner minutes all its completed runs took (dispatch to result, so a runner's queueing counts too)."""

    fork: str
    level: Level
    recent: int  # completed runs in the pass-rate window (at most PASS_RATE_WINDOW)
    passed: int  # of those, the ones whose verdict is `passed`
    runner_minutes: float

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.recent if self.recent else None
