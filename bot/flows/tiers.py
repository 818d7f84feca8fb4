"""Tiered validation's edges: start the tier the core decides, read a finished run's report, show it."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import logging
import re
import zipfile
import zlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from bot.core.config import L3Policy, SluiceConfig
from bot.core.emergency import EMERGENCY_PREFIX, emergency_id
from bot.core.errors import DispatchRefused, TooLarge, first_line
from bot.core.ingestion import BRANCH_PREFIX
from bot.core.l3_metrics import MetricComparison, MetricRegression, Regression
from bot.core.limits import fit_for_github
from bot.core.tier_checks import (
    CheckUpdate,
    Shown,
    awaiting,
    blocked,
    completed,
    dispatched,
    refused,
    timed_out,
)
from bot.core.tiers import (
    LEVELS,
    MAX_LOG_CHARS,
    TRUNK_PULL,
    WAITING,
    Blocked,
    Dispatch,
    FailedTest,
    Level,
    ReportFacts,
    RunState,
    Subject,
    SubjectKind,
    SuiteFacts,
    TierAction,
    TierRun,
    TimeOut,
    Verdict,
    Want,
    latest_runs,
    next_actions,
    overdue,
    stale_runs,
    tier_config,
    triage,
    workflow_inputs,
)
from bot.core.webhooks import Pull, WorkflowRun
from bot.flows import checks
from bot.ports import Clock, TierBackend, TierForge, TierRunRecords
from runners.report import Outcome, Report

# runners.compare is imported only when there are benchmarks to compare: numpy and scipy are slow to load.
if TYPE_CHECKING:
    from runners.compare import Comparison, ContextRefused

    Judged = Comparison | ContextRefused | None

ARTIFACT = "sluice-tier-report"  # what the tier workflows upload: report.json and tier.log
REPORT_FILE, LOG_FILE = "report.json", "tier.log"
MAX_ZIP_MEMBER = 64 * 1024 * 1024  # a report bigger than this is refused, not read into memory
MAX_ARTIFACT_BYTES = 128 * 1024 * 1024  # the artifact's zip: a bigger one is refused, not downloaded
MAX_ZIP_MEMBERS = 64  # the artifact holds report.json and tier.log: a zip of more files is refused
# What reading a member of a damaged zip raises: a broken deflate stream, a truncated member, an encrypted
# member (RuntimeError), an unsupported compression method, a bad CRC or a header that contradicts itself.
DAMAGED = (zlib.error, EOFError, RuntimeError, NotImplementedError, OSError, ValueError)
REQUEST_IN_TITLE = re.compile(r"\brequest (\d+)\b")  # the tier workflows' run-name carries the run's id
Db = Callable[..., Awaitable[Any]]  # Context.db: a blocking store call in a thread
log = logging.getLogger("sluice.tiers")


@dataclass(frozen=True)
class Tiering:
    """What validating one fork's PRs works with."""

    forge: TierForge
    runs: TierRunRecords  # called through `db`
    db: Db
    backend: TierBackend
    config: SluiceConfig
    clock: Clock
    after: Callable[[TierRun], Awaitable[None]] | None = None  # told of each finished run (bisection's hook)


@dataclass(frozen=True)
class Finished:
    """What a finished run left: the workflow's conclusion, the report's JSON (None: none), its log."""

    conclusion: str
    report: str | None
    log: str = ""
    problem: str | None = None  # why there is no report, when known


def subject_of(pull: Pull, *, fork: str) -> Subject:
    """The PR as a tier subject: an ingestion (bundle or chain) or an emergency pick from Sluice's branch,
    a fork PR from another branch of the fork, or a PR from outside it (another repository's branch)."""
    ingestion = f"pull-{pull.number}"
    kind = SubjectKind.FORK_PR if pull.from_branch_of(fork) else SubjectKind.OUTSIDE_PR
    if pull.on_branch_of(fork, BRANCH_PREFIX):
        ingestion = pull.head.ref.removeprefix(BRANCH_PREFIX)
        kind = SubjectKind.CHAIN if ingestion.startswith("chain-") else SubjectKind.BUNDLE
    elif pull.on_branch_of(fork, EMERGENCY_PREFIX):
        ingestion, kind = emergency_id(pull.head.ref), SubjectKind.EMERGENCY
    return Subject(fork, pull.number, pull.head.sha, pull.base.sha, kind, ingestion)


async def advance(
    t: Tiering, number: int, *, want: Want | None = None, asked_on: str | None = None
) -> str | None:
    """Bring PR `number`'s tiers forward: discard results for old heads, then perform what the core decides
    (a dispatch, a time-out, the tiers a failure blocks) until nothing more changes now. `asked_on`: the head
    a person asked for `want` on; when the PR's head is no longer it, the ask is dropped (a person starts a
    tier on the head they read, never on a push made since) and the PR's head is returned; else None."""
    pull = await t.forge.get_pull(number)
    if not pull.is_open:
        return None
    subject = subject_of(pull, fork=t.forge.repo)
    moved = asked_on is not None and subject.head_sha != asked_on
    if moved:
        log.warning(
            "%s #%d: a tier asked for on %s is not run: the head is now %s",
            subject.fork,
            subject.pull,
            asked_on,
            subject.head_sha,
        )
        want = None
    want = want or Want()
    for _ in (*LEVELS, None):  # a time-out or a refused dispatch blocks the tiers above: one more pass
        runs = await t.db(t.runs.for_pull, subject.fork, subject.pull)
        for old in stale_runs(subject.head_sha, runs):
            await _discard(t, old, why=f"the PR's head moved on to {subject.head_sha[:10]}")
        actions = next_actions(subject, runs, t.config, now=t.clock(), want=want)
        await _perform(t, subject, actions)
        if not any(isinstance(a, TimeOut | Dispatch) for a in actions):
            break
        want = Want()
    return subject.head_sha if moved else None


async def _perform(t: Tiering, subject: Subject, actions: Sequence[TierAction]) -> None:
    for action in actions:
        match action:
            case Dispatch():
                await _dispatch(t, subject, action)
            case TimeOut(run=run):
                await time_out(t, run)
            case Blocked(level=level, reason=reason, waiting=waiting):
                check = (await t.forge.check_runs(subject.head_sha)).get(level.check.value)
                if check is None or not check.completed:
                    output = awaiting(level, reason=reason) if waiting else blocked(level, reason=reason)
                    await show(t, subject.head_sha, level, output)


async def _dispatch(t: Tiering, subject: Subject, action: Dispatch) -> None:
    if action.again is not None:  # its dispatch failed before: the same run (the same id) is asked for again
        assert action.again.id is not None
        added = await t.db(t.runs.claim_undispatched, action.again.id, at=t.clock())
        if added is None:
            return  # another worker dispatches it again
        await _start(t, subject, action, added, earlier=action.again.dispatched_at)
        return
    run = TierRun(
        subject.fork,
        subject.pull,
        subject.ingestion,
        action.level,
        subject.head_sha,
        action.attempt,
        RunState.DISPATCHED,
        t.clock(),
        selection=action.selection,
        suite=action.suite,
    )
    added = await t.db(t.runs.add, run)
    if added is None:
        return  # another worker records and starts this attempt
    await _start(t, subject, action, added, earlier=None)


async def _start(
    t: Tiering, subject: Subject, action: Dispatch, added: TierRun, *, earlier: datetime | None
) -> None:
    """Show the recorded run `added` on its check run and ask the backend for it. When either fails for now
    (GitHub's 5xx, the network), the run is marked undispatched and the failure raised: the job's retry
    dispatches the same run again, after looking for a workflow run the failed request may have started."""
    tier = tier_config(t.config, action.level)
    reason = action.reason
    if action.level is Level.L3:  # its workflow's job waits for the environment's required reviewers
        reason += f"; it runs in the `{t.config.tiers.environment}` environment once its reviewers approve"
    shown = dispatched(action.level, attempt=action.attempt, reason=reason)
    try:
        await show(t, subject.head_sha, action.level, shown)  # first: a local run may finish before `start`
        run_id = await t.backend.start(subject, added, workflow=tier.workflow, earlier=earlier)
    except DispatchRefused as exc:
        await t.db(t.runs.save, _finish(t, added, RunState.REFUSED, detail=exc.message))
        out = refused(action.level, status=exc.status, message=exc.reason, owner=tier.owner)
        await show(t, subject.head_sha, action.level, out)
        log.warning(
            "%s #%d: %s dispatch refused: %s", subject.fork, subject.pull, action.level.name, exc.message
        )
        return
    except BaseException as exc:  # not started, as far as Sluice knows: never left waiting for a result
        assert added.id is not None
        name, said = type(exc).__name__, first_line(exc)
        why = f"the dispatch failed ({name if said == name else f'{name}: {said}'})"
        await asyncio.shield(t.db(t.runs.mark_undispatched, added.id, detail=why))
        raise
    if run_id is not None:
        await t.db(t.runs.set_run_id, added.id, run_id)
    log.info(
        "%s #%d: %s attempt %d started (%s)",
        subject.fork,
        subject.pull,
        action.level.name,
        action.attempt,
        action.reason,
    )


async def _timed_out_or_waiting(t: Tiering, run: TierRun) -> None:
    """`time_out`, or, when what follows the recorded end failed (GitHub did not take the check run, say),
    `run` waiting again, so the next sweep ends it again and shows it then (a sweep reads waiting runs)."""
    try:
        await time_out(t, run)
    except Exception:
        ended = await t.db(t.runs.get, run.id)
        if ended is not None and ended.state not in WAITING:
            await t.db(t.runs.save, run)
        raise


async def time_out(t: Tiering, run: TierRun) -> None:
    """Stop waiting for `run`: it is marked timed out (a result that still comes is ignored). But a workflow
    run that did end, whose `workflow_run` event was lost (or came while trunk's config was broken, and its
    job was refused), is read from GitHub instead, as its event would have been."""
    if run.id is not None and (ended := await ended_meanwhile(t, run)) is not None:
        log.info(
            "tier run %s: its workflow run %s ended without its result reaching Sluice", run.id, run.run_id
        )
        await complete(t, run.id, ended, workflow_run=run.run_id)
        return
    tier = tier_config(t.config, run.level)
    done = _finish(t, run, RunState.TIMED_OUT, detail=f"no result within {tier.timeout_minutes} minutes")
    if not await t.db(t.runs.finish, done):
        log.info("tier run %s: its result came first; not timed out", run.id)
        return
    if run.bisection is not None:  # a probe has no check run: its bisection reads it as a skip
        await _tell(t, done)
        return
    output = timed_out(done, minutes=tier.timeout_minutes, owner=tier.owner)
    await show(t, run.head_sha, run.level, output)
    log.warning("%s #%d: %s attempt %d timed out", run.fork, run.pull, run.level.name, run.attempt)


async def ended_meanwhile(t: Tiering, run: TierRun) -> Finished | None:
    """The result of `run`'s workflow run if GitHub says it completed (the GitHub backend's runs of a PR or a
    probe; trunk watch reads its own); None while it runs, or when there is none to ask about."""
    if run.run_id is None or run.pull == TRUNK_PULL:
        return None
    found = await t.forge.workflow_run(run.run_id)
    if found.status != "completed":
        return None
    return await result_of(t, run.run_id, found.conclusion or "failure")


async def result_of(t: Tiering, run_id: int, conclusion: str) -> Finished:
    """A completed workflow run's result, read from its artifact; one over the limit is a failure that says
    so, never read whole."""
    try:
        return unpack(await t.forge.run_artifact(run_id, ARTIFACT, max_bytes=MAX_ARTIFACT_BYTES), conclusion)
    except TooLarge as exc:
        log.warning("%s: workflow run %d: %s", t.forge.repo, run_id, exc.message)
        return Finished(conclusion, None, problem=exc.message)


async def time_out_stalled(t: Tiering, runs: Sequence[TierRun]) -> list[TierRun]:
    """The periodic sweep over the fork's waiting `runs`: each past its tier's timeout is timed out (its check
    run says so), whatever its PR; then the tiers of each PR concerned are brought forward (the tiers above
    blocked, an undispatched run dispatched again). The runs timed out."""
    stalled = overdue(runs, t.config, now=t.clock())
    for run in stalled:  # each on its own: one run that cannot be ended now never keeps the others waiting
        try:
            current = await t.db(t.runs.get, run.id)
            if current is not None and current.state in WAITING:
                await _timed_out_or_waiting(t, current)  # no result came meanwhile
        except Exception:
            log.exception("%s #%d: run %s not timed out; the next sweep tries", run.fork, run.pull, run.id)
    undispatched = {r.pull for r in runs if r.state is RunState.UNDISPATCHED}
    for pull in sorted({r.pull for r in stalled} | undispatched):
        try:
            await advance(t, pull)
        except Exception:
            log.exception("%s #%d: tiers not brought forward; the next sweep tries again", t.forge.repo, pull)
    return stalled


def _finish(t: Tiering, run: TierRun, state: RunState, *, detail: str, **changes: Any) -> TierRun:
    return dataclasses.replace(run, state=state, detail=detail[:2000], completed_at=t.clock(), **changes)


async def _discard(t: Tiering, run: TierRun, *, why: str) -> None:
    if not await t.db(t.runs.finish, _finish(t, run, RunState.STALE, detail=why)):
        return  # another worker ended it first
    log.info(
        "%s #%d: %s attempt %d on %s discarded: %s",
        run.fork,
        run.pull,
        run.level.name,
        run.attempt,
        run.head_sha[:10],
        why,
    )


async def show(t: Tiering, sha: str, level: Level, update: CheckUpdate) -> None:
    """Update the tier's check run on `sha`; a new one where there is none (a fork PR) or where a new attempt
    starts after a completed one (as Actions re-runs do: the completed one keeps its result)."""
    shown = (await t.forge.check_runs(sha)).get(level.check.value)
    await checks.show(t.forge, sha, level.check.value, update.requests(), shown=shown)


# --- results -----------------------------------------------------------------------------------------------


async def rerun_not_counted(
    t: Tiering, run: TierRun, *, attempt: int, conclusion: str, url: str | None
) -> None:
    """A tier's workflow re-run from GitHub Actions (its attempt > 1) after Sluice had its result: not
    counted (each of Sluice's attempts is a dispatch of its own, with its own check run), and the tier's
    check run says so and how to run it again, once per attempt. Nothing is said when a newer attempt of
    Sluice's own has started on the head since."""
    runs = await t.db(t.runs.for_pull, run.fork, run.pull)
    if run.bisection is not None or latest_runs(run.head_sha, runs).get(run.level) != run:
        log.info("tier run %s: workflow attempt %d after a newer attempt; not counted", run.id, attempt)
        return
    check = (await t.forge.check_runs(run.head_sha)).get(run.level.check.value)
    if check is None:
        return
    summary = check.output.summary or ""
    marker = f"<!-- sluice:actions-attempt:{run.run_id}:{attempt} -->"
    if marker in summary:
        return
    where = f"[attempt {attempt}]({url})" if url else f"attempt {attempt}"
    note = (
        f"\n\n{marker}\nGitHub Actions re-ran this tier's workflow ({where}, {conclusion}). Sluice does not "
        f"count it: each of its attempts is a dispatch of its own, reported on a check run of its own. To "
        f"run {run.level.name} again, press **Re-run** above or comment `/retry {run.level.value}`.\n"
    )
    kept = fit_for_github(summary, what="a check run's summary", room=len(note))  # the note goes in whole
    body = {"output": {"title": check.output.title or run.level.name, "summary": kept + note}}
    await t.forge.update_check_run(check.id, body)


async def complete(t: Tiering, run_key: int, finished: Finished, *, workflow_run: int | None = None) -> None:
    """A run's result: ignored unless its run still waits and its head is still the PR's; else validated,
    triaged against trunk's latest report, shown on the check run; then the next tier (or a retry) starts.

    The same result again, for a run that `workflow_run` (its workflow run) already completed (the job
    retried after GitHub failed it between the result's recording and what follows, or the event delivered
    twice), does what follows again: shown on the check run, the tiers brought forward, the bisection told;
    each is safe twice (no second dispatch, no second bisection)."""
    run = await t.db(t.runs.get, run_key)
    again = run is not None and run.state is RunState.COMPLETED and _same_run(run, workflow_run)
    if run is None or (run.state not in WAITING and not again):
        log.info(
            "tier run %s: a result for a run that no longer waits (%s) is ignored", run_key, run and run.state
        )
        return
    pull = await t.forge.get_pull(run.pull)
    if run.bisection is not None:
        if again:  # its bisection reads a result once (a probe it no longer waits for is ignored)
            await _tell(t, run)
        else:
            await _probe_finished(t, run, finished, baseline_sha=pull.base.sha)
        return
    if not again and (not pull.is_open or pull.head.sha != run.head_sha):
        await _discard(t, run, why=f"the result is for {run.head_sha[:10]}, no longer the PR's head")
        return
    subject = subject_of(pull, fork=t.forge.repo)
    report, problem = read_report(finished, run)
    trunk = await baseline_report(t, run.level, subject.baseline_sha)
    facts = facts_of(report) if report is not None else None
    found = triage(
        finished.conclusion,
        facts,
        report_problem=problem,
        log=finished.log,
        trunk=facts_of(trunk) if trunk else None,
    )
    # the bootstrap takes seconds over a large report: never on the event loop, where webhooks are taken
    judged = await asyncio.to_thread(compared, report, trunk, t.config) if report is not None else None
    if again:  # what was recorded stands, even were trunk's report another by now
        assert run.verdict is not None and run.id is not None
        done, found = run, dataclasses.replace(found, verdict=run.verdict, reason=run.detail)
        regressions: Sequence[Regression] | None = await t.db(t.runs.regressions, run.id)
    else:
        keep = finished.report if report is not None else None
        done = _finish(t, run, RunState.COMPLETED, detail=found.reason, verdict=found.verdict, report=keep)
        regressions = regressed(judged) if run.level is Level.L3 else None  # kept with the ending, atomically
        if not await t.db(t.runs.finish, done, regressions):
            log.info("tier run %s: ended by another worker meanwhile (a time-out or the same result)", run.id)
            return
    shown = dataclasses.replace(
        _shown(t, done, found, facts, judged, subject),
        log_tail=finished.log,
        regressed=len(regressions or ()),
    )
    await _followed_up(t, done, completed(done, shown), again=again)


def _same_run(run: TierRun, workflow_run: int | None) -> bool:
    return workflow_run is not None and run.run_id == workflow_run


async def _followed_up(t: Tiering, done: TierRun, update: CheckUpdate, *, again: bool) -> None:
    """What follows a recorded result: its check run (again: only while no newer attempt of the tier has
    started on the head, whose check run it is now), the PR's tiers brought forward, the bisection hook."""
    runs = await t.db(t.runs.for_pull, done.fork, done.pull) if again else ()
    latest = latest_runs(done.head_sha, runs).get(done.level)
    if not again or (latest is not None and latest.id == done.id):
        await show(t, done.head_sha, done.level, update)
    await advance(t, done.pull)
    await _tell(t, done)


async def baseline(t: Tiering, level: Level, base_sha: str) -> TierRun | None:
    """The run whose report a PR on `base_sha` is compared with: trunk's newest on that commit, else trunk
    watch's newest."""
    found: TierRun | None = await t.db(t.runs.baseline, t.forge.repo, level, head_sha=base_sha)
    return found


async def baseline_report(t: Tiering, level: Level, base_sha: str) -> Report | None:
    found = await baseline(t, level, base_sha)
    return parse_report(found.report) if found is not None else None


async def _probe_finished(t: Tiering, run: TierRun, finished: Finished, *, baseline_sha: str) -> None:
    """A bisection probe's result: triaged as any run is (against trunk's report on the PR's base) and kept,
    then handed to its bisection, which alone decides what it means; no check run, no next tier."""
    report, problem = read_report(finished, run)
    trunk = parse_report(await t.db(t.runs.latest_report, run.fork, run.level, head_sha=baseline_sha))
    facts = facts_of(report) if report is not None else None
    trunk_facts = facts_of(trunk) if trunk else None
    found = triage(finished.conclusion, facts, report_problem=problem, log=finished.log, trunk=trunk_facts)
    keep = finished.report if report is not None else None
    done = _finish(t, run, RunState.COMPLETED, detail=found.reason, verdict=found.verdict, report=keep)
    if await t.db(t.runs.finish, done):
        await _tell(t, done)


async def _tell(t: Tiering, run: TierRun) -> None:
    if t.after is not None:
        await t.after(run)


def _shown(
    t: Tiering,
    run: TierRun,
    found: Any,
    facts: ReportFacts | None,
    judged: Judged,
    subject: Subject,
) -> Shown:
    tier = tier_config(t.config, run.level)
    retrying = found.verdict is Verdict.INFRA and run.attempt <= tier.retries
    passed = found.verdict is Verdict.PASSED
    button = run.level is Level.L2 and passed and t.config.tiers.l3_policy is L3Policy.REQUEST
    return Shown(
        facts,
        found,
        owner=tier.owner,
        regressions=rendered(judged),
        baseline_sha=subject.baseline_sha,
        retrying=retrying,
        l3_button=button,
    )


def read_report(finished: Finished, run: TierRun) -> tuple[Report | None, str | None]:
    """The run's report, or why there is none usable: missing, malformed, or for another commit or tier."""
    if finished.report is None:
        return None, finished.problem or "the run uploaded no tier report"
    try:
        report = Report.model_validate_json(finished.report)
    except (ValidationError, ValueError) as exc:
        first = str(exc).splitlines()[:3]
        return None, f"the tier report is malformed: {' '.join(first)}"
    if report.run.head_sha != run.head_sha:
        return None, f"the tier report is for commit {report.run.head_sha}, not {run.head_sha}"
    if report.run.tier != run.level:
        return None, f"the tier report is for tier {report.run.tier.value}, not {run.level.value}"
    return report, None


def facts_of(report: Report) -> ReportFacts:
    suites = tuple(
        SuiteFacts(
            s.name,
            s.outcome.value,
            s.executed,
            s.expected,
            s.passed,
            s.failed,
            s.errors,
            s.skipped,
            s.problems,
        )
        for s in report.suites
    )
    bad = (Outcome.FAILED, Outcome.ERROR)
    failures = tuple(FailedTest(t.suite, t.name, t.message or "") for t in report.tests if t.outcome in bad)
    env = {k: str(v) for k, v in report.environment.model_dump().items() if v is not None and k != "clocks"}
    return ReportFacts(suites, failures, env, report.run.head_sha)


def compared(report: Report, trunk: Report | None, config: SluiceConfig) -> Judged:
    """runners.compare's Comparison of the report's benchmarks with trunk's, its ContextRefused when the two
    ran in different contexts, or None when either has no benchmarks."""
    from runners import compare

    if trunk is None or not report.benchmarks or not trunk.benchmarks:
        return None
    baseline = compare.Side.from_reports([trunk], name="trunk")
    candidate = compare.Side.from_reports([report], name="this head")
    try:
        return compare.compare(baseline, candidate, config.performance)
    except compare.ContextRefused as refusal:
        return refusal


def rendered(judged: Judged) -> str | None:
    """The comparison's markdown for the check run (None when nothing was compared)."""
    if judged is None:
        return None
    from runners import compare

    if isinstance(judged, compare.ContextRefused):
        return compare.render_refusal(judged)
    return compare.render_markdown(judged)


def regressed(judged: Judged) -> tuple[Regression, ...]:
    """The cells the comparison judged regressed beyond noise, confidently (none when nothing was compared).
    A low-confidence verdict (a compile time measured once a side) is listed on the check run, marked, but
    asks the gate for no signoff: docs/compare.md, such cells never fail a run."""
    if judged is None:
        return ()
    from runners import compare

    if not isinstance(judged, compare.Comparison):
        return ()
    return tuple(
        Regression(
            c.benchmark,
            c.kernel,
            c.metric.value,
            c.critical,
            ratio=c.measurement.ratio,
            threshold=c.measurement.threshold,
        )
        for c in judged.cells
        if c.verdict is compare.Verdict.REGRESSED
        and c.measurement is not None
        and not c.measurement.low_confidence
    )


def metric_regressions(before: Report, after: Report, config: SluiceConfig) -> list[MetricRegression] | None:
    """Critical kernels' confident regressions from `before` to `after` (runners.compare, noise-aware): the
    metric oracle of trunk watch and of a bundle's L3 bisection alike. [] when neither has benchmarks; None
    when they cannot be compared (no benchmarks after, other contexts). Its bootstrap takes seconds over a
    large report: a flow calls it in a thread, off the event loop."""
    compared = compare_metrics(before, after, config)
    return None if compared is None else list(compared.regressions)


def compare_metrics(before: Report, after: Report, config: SluiceConfig) -> MetricComparison | None:
    """`metric_regressions`, with the metrics `after` measured confidently either way: what a bisection's
    probe answers with (a metric it did not measure is no pass). None when they cannot be compared."""
    from runners import compare

    if not before.benchmarks:
        return MetricComparison((), frozenset())
    if not after.benchmarks:
        return None
    try:
        result = compare.compare(
            compare.Side.from_reports([before], name="before"),
            compare.Side.from_reports([after], name="after"),
            config.performance,
        )
    except compare.ContextRefused:
        return None
    confident = (compare.Verdict.REGRESSED, compare.Verdict.IMPROVED, compare.Verdict.SAME)
    measured = frozenset(
        f"{cell.benchmark} · {cell.metric.value}"
        for cell in result.cells
        if cell.verdict in confident and cell.measurement is not None and not cell.measurement.low_confidence
    )
    regressions = tuple(
        MetricRegression(
            name=f"{cell.benchmark} · {cell.metric.value}",
            before_ms=cell.measurement.baseline_ms,
            after_ms=cell.measurement.candidate_ms,
            reason=cell.decision.reason,
        )
        for cell in result.failing
        if cell.measurement is not None
    )
    return MetricComparison(regressions, measured)


def parse_report(text: str | None) -> Report | None:
    """A kept report's JSON as a report (None: none kept, or unreadable)."""
    if text is None:
        return None
    try:
        return Report.model_validate_json(text)
    except (ValidationError, ValueError):
        return None


def unpack(archive: bytes | None, conclusion: str) -> Finished:
    """The artifact's zip as a result: its report.json and tier.log; a broken or damaged zip is no report."""
    if archive is None:
        return Finished(conclusion, None, problem=f"the run uploaded no `{ARTIFACT}` artifact")
    try:
        with zipfile.ZipFile(io.BytesIO(archive)) as zipped:
            members = len(zipped.infolist())
            if members > MAX_ZIP_MEMBERS:
                many = f"the `{ARTIFACT}` artifact holds {members} files, over the limit of {MAX_ZIP_MEMBERS}"
                return Finished(conclusion, None, problem=f"{many}: refused")
            report, log_text = (
                _member(zipped, REPORT_FILE),
                (_member(zipped, LOG_FILE) or "")[-MAX_LOG_CHARS:],
            )
    except zipfile.BadZipFile:
        return Finished(conclusion, None, problem=f"the `{ARTIFACT}` artifact is not a zip archive")
    except DAMAGED as exc:  # a zip whose directory reads but whose member does not
        name, module = type(exc).__name__, type(exc).__module__
        said = first_line(exc)
        damage = (name if module == "builtins" else f"{module}.{name}") + (
            f": {said}" if said != name else ""
        )
        return Finished(conclusion, None, problem=f"the `{ARTIFACT}` artifact is damaged ({damage[:300]})")
    problem = None if report is not None else f"the `{ARTIFACT}` artifact holds no {REPORT_FILE}"
    return Finished(conclusion, report, log=log_text, problem=problem)


def _member(zipped: zipfile.ZipFile, name: str) -> str | None:
    try:
        info = zipped.getinfo(name)
    except KeyError:
        return None
    return zipped.read(info).decode("utf-8", "replace") if info.file_size <= MAX_ZIP_MEMBER else None


def request_of(title: str) -> int | None:
    """The tier run's id in a tier workflow run's `display_title`."""
    found = REQUEST_IN_TITLE.search(title)
    return int(found[1]) if found else None


async def dispatched_run(
    db: Db, runs: TierRunRecords, fork: str, workflow_run: WorkflowRun
) -> TierRun | None:
    """The tier run of Sluice's on `fork` that the finished `workflow_run` ran (a PR's or trunk's): found by
    the workflow run's id once recorded, else by the request id its title carries. None for any other run:
    not a `workflow_dispatch`, another repository's, or one whose tier run has another workflow run."""
    if workflow_run.event != "workflow_dispatch":
        return None
    found = await db(runs.by_workflow_run, fork, workflow_run.id)
    key = found.id if found is not None else request_of(workflow_run.display_title)
    run = await db(runs.get, key) if key is not None else None
    if run is None or run.fork != fork or run.run_id not in (None, workflow_run.id):
        return None
    return run


# --- the GitHub Actions backend -----------------------------------------------------------------------------


class ActionsBackend:
    """Each tier a `workflow_dispatch` of the fork's tier workflow on fork trunk: the run's id from GitHub's
    answer (`return_run_details`), else found among the dispatched runs by the id in its name."""

    def __init__(self, forge: TierForge, *, trunk: str, clock: Clock) -> None:
        self.forge, self.trunk, self.clock = forge, trunk, clock

    async def start(
        self, subject: Subject, run: TierRun, *, workflow: str, earlier: datetime | None = None
    ) -> int | None:
        if earlier is not None:  # a request that failed may have started the run: never a second one
            found = await self._find(run, since=earlier)
            if found is not None:
                return found
        since = self.clock()
        inputs = workflow_inputs(subject, run)
        run_id = await self.forge.dispatch_workflow(workflow, ref=self.trunk, inputs=inputs)
        if run_id is not None:
            return run_id
        return await self._find(run, since=since)  # else the workflow_run event names it by the same id

    async def _find(self, run: TierRun, *, since: datetime) -> int | None:
        """The workflow run dispatched for `run` (its id is in the run's name) since about `since`."""
        created = (since - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
        for found in await self.forge.dispatched_runs(created_since=created):
            if request_of(found.display_title) == run.id:
                return found.id
        return None
