"""Tiered validation's edges: start the tier the core decides, read a finished run's report, show it."""

from __future__ import annotations

import dataclasses
import io
import logging
import re
import zipfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from pydantic import ValidationError

from bot.core.config import L3Policy, SluiceConfig
from bot.core.emergency import EMERGENCY_PREFIX, emergency_id
from bot.core.errors import DispatchRefused
from bot.core.ingestion import BRANCH_PREFIX, TIER_TITLES
from bot.core.tier_checks import CheckOutput, Shown, blocked, completed, dispatched, refused, timed_out
from bot.core.tiers import (
    LEVELS,
    MAX_LOG_CHARS,
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
    next_actions,
    stale_runs,
    tier_config,
    triage,
    workflow_inputs,
)
from bot.ports import Clock, TierBackend, TierForge, TierRunRecords
from runners.report import Outcome, Report

ARTIFACT = "sluice-tier-report"  # what the tier workflows upload: report.json and tier.log
REPORT_FILE, LOG_FILE = "report.json", "tier.log"
MAX_ZIP_MEMBER = 64 * 1024 * 1024  # a report bigger than this is refused, not read into memory
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


@dataclass(frozen=True)
class Finished:
    """What a finished run left: the workflow's conclusion, the report's JSON (None: none), its log."""

    conclusion: str
    report: str | None
    log: str = ""
    problem: str | None = None  # why there is no report, when known


def subject_of(pull: Mapping[str, Any], *, fork: str) -> Subject:
    """The PR as a tier subject: an ingestion (bundle or chain) or an emergency pick from Sluice's branch,
    or a fork PR."""
    head = pull["head"]
    ref, own = str(head["ref"]), (head.get("repo") or {}).get("full_name") == fork
    ingestion, kind = f"pull-{pull['number']}", SubjectKind.FORK_PR
    if own and ref.startswith(BRANCH_PREFIX):
        ingestion = ref.removeprefix(BRANCH_PREFIX)
        kind = SubjectKind.CHAIN if ingestion.startswith("chain-") else SubjectKind.BUNDLE
    elif own and ref.startswith(EMERGENCY_PREFIX):
        ingestion, kind = emergency_id(ref), SubjectKind.EMERGENCY
    return Subject(fork, int(pull["number"]), head["sha"], pull["base"]["sha"], kind, ingestion)


async def advance(t: Tiering, number: int, *, want: Want | None = None) -> None:
    """Bring PR `number`'s tiers forward: discard results for old heads, then perform what the core decides
    (a dispatch, a time-out, the tiers a failure blocks) until nothing more changes now."""
    pull = await t.forge.pull(number)
    if pull.get("state") != "open":
        return
    subject, want = subject_of(pull, fork=t.forge.repo), want or Want()
    for _ in (*LEVELS, None):  # a time-out or a refused dispatch blocks the tiers above: one more pass
        runs = await t.db(t.runs.for_pull, subject.fork, subject.pull)
        for old in stale_runs(subject.head_sha, runs):
            await _discard(t, old, why=f"the PR's head moved on to {subject.head_sha[:10]}")
        actions = next_actions(subject, runs, t.config, now=t.clock(), want=want)
        await _perform(t, subject, actions)
        if not any(isinstance(a, TimeOut | Dispatch) for a in actions):
            return
        want = Want()


async def _perform(t: Tiering, subject: Subject, actions: Sequence[TierAction]) -> None:
    for action in actions:
        match action:
            case Dispatch():
                await _dispatch(t, subject, action)
            case TimeOut(run=run):
                await time_out(t, run)
            case Blocked(level=level, reason=reason):
                check = (await t.forge.check_runs(subject.head_sha)).get(level.check.value)
                if check is None or check.get("status") != "completed":
                    await show(t, subject.head_sha, level, blocked(level, reason=reason))


async def _dispatch(t: Tiering, subject: Subject, action: Dispatch) -> None:
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
    tier = tier_config(t.config, action.level)
    reason = action.reason
    if action.level is Level.L3:  # its workflow's job waits for the environment's required reviewers
        reason += f"; it runs in the `{t.config.tiers.environment}` environment once its reviewers approve"
    shown = dispatched(action.level, attempt=action.attempt, reason=reason)
    await show(
        t, subject.head_sha, action.level, shown
    )  # first: a local run may finish before `start` returns
    try:
        run_id = await t.backend.start(subject, added, workflow=tier.workflow)
    except DispatchRefused as exc:
        await t.db(t.runs.save, _finish(t, added, RunState.REFUSED, detail=exc.message))
        out = refused(action.level, status=exc.status, message=exc.reason, owner=tier.owner)
        await show(t, subject.head_sha, action.level, out)
        log.warning(
            "%s #%d: %s dispatch refused: %s", subject.fork, subject.pull, action.level.name, exc.message
        )
        return
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


async def time_out(t: Tiering, run: TierRun) -> None:
    """Stop waiting for `run`: it is marked timed out (a result that still comes is ignored)."""
    tier = tier_config(t.config, run.level)
    done = _finish(t, run, RunState.TIMED_OUT, detail=f"no result within {tier.timeout_minutes} minutes")
    await t.db(t.runs.save, done)
    output = timed_out(done, minutes=tier.timeout_minutes, owner=tier.owner)
    await show(t, run.head_sha, run.level, output)
    log.warning("%s #%d: %s attempt %d timed out", run.fork, run.pull, run.level.name, run.attempt)


def _finish(t: Tiering, run: TierRun, state: RunState, *, detail: str, **changes: Any) -> TierRun:
    return dataclasses.replace(run, state=state, detail=detail[:2000], completed_at=t.clock(), **changes)


async def _discard(t: Tiering, run: TierRun, *, why: str) -> None:
    await t.db(t.runs.save, _finish(t, run, RunState.STALE, detail=why))
    log.info(
        "%s #%d: %s attempt %d on %s discarded: %s",
        run.fork,
        run.pull,
        run.level.name,
        run.attempt,
        run.head_sha[:10],
        why,
    )


async def show(t: Tiering, sha: str, level: Level, output: CheckOutput) -> None:
    """Update the tier's check run on `sha`; a new one where there is none (a fork PR) or where a new attempt
    starts after a completed one (as Actions re-runs do: the completed one keeps its result)."""
    check = (await t.forge.check_runs(sha)).get(level.check.value)
    if check is None or (check.get("status") == "completed" and output.status != "completed"):
        title = TIER_TITLES[level.check]
        body = {"status": "queued", "output": {"title": title, "summary": f"{title}: queued by Sluice."}}
        check_id = await t.forge.new_check_run(sha, level.check.value, body)
    else:
        check_id = int(check["id"])
    for body in output.requests():
        await t.forge.update_check_run(check_id, body)


# --- results -----------------------------------------------------------------------------------------------


async def complete(t: Tiering, run_key: int, finished: Finished) -> None:
    """A run's result: ignored unless its run still waits and its head is still the PR's; else validated,
    triaged against trunk's latest report, shown on the check run; then the next tier (or a retry) starts."""
    run = await t.db(t.runs.get, run_key)
    if run is None or run.state is not RunState.DISPATCHED:
        log.info(
            "tier run %s: a result for a run that no longer waits (%s) is ignored", run_key, run and run.state
        )
        return
    pull = await t.forge.pull(run.pull)
    if pull.get("state") != "open" or pull["head"]["sha"] != run.head_sha:
        await _discard(t, run, why=f"the result is for {run.head_sha[:10]}, no longer the PR's head")
        return
    subject = subject_of(pull, fork=t.forge.repo)
    report, problem = read_report(finished, run)
    trunk = _parse(await t.db(t.runs.latest_report, run.fork, run.level, head_sha=subject.baseline_sha))
    trunk = trunk or _parse(await t.db(t.runs.latest_trunk_report, run.fork, run.level))  # trunk watch's
    facts = facts_of(report) if report is not None else None
    found = triage(
        finished.conclusion,
        facts,
        report_problem=problem,
        log=finished.log,
        trunk=facts_of(trunk) if trunk else None,
    )
    keep = finished.report if report is not None else None
    done = _finish(t, run, RunState.COMPLETED, detail=found.reason, verdict=found.verdict, report=keep)
    await t.db(t.runs.save, done)
    shown = dataclasses.replace(_shown(t, done, found, facts, report, trunk, subject), log_tail=finished.log)
    await show(t, run.head_sha, run.level, completed(done, shown))
    await advance(t, run.pull)


def _shown(
    t: Tiering,
    run: TierRun,
    found: Any,
    facts: ReportFacts | None,
    report: Report | None,
    trunk: Report | None,
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
        regressions=regressions(report, trunk, t.config) if report is not None else None,
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
    if report.run.tier.value != run.level.value:
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


def regressions(report: Report, trunk: Report | None, config: SluiceConfig) -> str | None:
    """runners.compare's markdown for the report's benchmarks against trunk's (None when either has none)."""
    from runners import compare

    if trunk is None or not report.benchmarks or not trunk.benchmarks:
        return None
    baseline = compare.Side.from_reports([trunk], name="trunk")
    candidate = compare.Side.from_reports([report], name="this head")
    try:
        return compare.render_markdown(compare.compare(baseline, candidate, config.performance))
    except compare.ContextRefused as refusal:
        return compare.render_refusal(refusal)


def _parse(text: str | None) -> Report | None:
    if text is None:
        return None
    try:
        return Report.model_validate_json(text)
    except (ValidationError, ValueError):
        return None


def unpack(archive: bytes | None, conclusion: str) -> Finished:
    """The artifact's zip as a result: its report.json and tier.log; a broken zip is no report."""
    if archive is None:
        return Finished(conclusion, None, problem=f"the run uploaded no `{ARTIFACT}` artifact")
    try:
        with zipfile.ZipFile(io.BytesIO(archive)) as zipped:
            report, log_text = (
                _member(zipped, REPORT_FILE),
                (_member(zipped, LOG_FILE) or "")[-MAX_LOG_CHARS:],
            )
    except zipfile.BadZipFile:
        return Finished(conclusion, None, problem=f"the `{ARTIFACT}` artifact is not a zip archive")
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


# --- the GitHub Actions backend -----------------------------------------------------------------------------


class ActionsBackend:
    """Each tier a `workflow_dispatch` of the fork's tier workflow on fork trunk: the run's id from GitHub's
    answer (`return_run_details`), else found among the dispatched runs by the id in its name."""

    def __init__(self, forge: TierForge, *, trunk: str, clock: Clock) -> None:
        self.forge, self.trunk, self.clock = forge, trunk, clock

    async def start(self, subject: Subject, run: TierRun, *, workflow: str) -> int | None:
        since = (self.clock() - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
        inputs = workflow_inputs(subject, run)
        run_id = await self.forge.dispatch_workflow(workflow, ref=self.trunk, inputs=inputs)
        if run_id is not None:
            return run_id
        for found in await self.forge.dispatched_runs(created_since=since):
            if request_of(str(found.get("display_title") or "")) == run.id:
                return int(found["id"])
        return None  # the workflow_run event names it by the same id
