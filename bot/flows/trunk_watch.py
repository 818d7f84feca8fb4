"""Trunk watch: tier runs on fork trunk's head on a schedule; what got worse since the last one is bisected
over the trunk commits between them (each prefix is a trunk commit) and tracked in one issue per failure."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from bot.core import bisect
from bot.core.errors import DispatchRefused
from bot.core.l3_metrics import MetricComparison
from bot.core.tiers import (
    TRUNK_PULL,
    Level,
    RunState,
    Selection,
    Subject,
    SubjectKind,
    TierRun,
    Verdict,
    tier_config,
    triage,
)
from bot.core.trunk_watch import (
    LABEL,
    PROBE,
    WATCH,
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
    still_worse,
    title,
    worsened,
)
from bot.flows.tiers import (
    Finished,
    Tiering,
    compare_metrics,
    facts_of,
    metric_regressions,
    parse_report,
    read_report,
)
from bot.ports import Forge, TrunkWatchRecords
from runners.report import Report

log = logging.getLogger("sluice.trunk_watch")
History = Callable[[str, str], Awaitable[list[Suspect]]]  # (good, bad) -> the trunk commits between
CAS_TRIES = 8
MAX_ROUNDS = 64
FIXED_COMMENT = (
    "Passes again on fork trunk at `{sha}` (tier run {run}): closing. Sluice reopens it if it comes back."
)
SUPERSEDED = "Sluice keeps one issue per trunk failure: this one is superseded by #{number}."


@dataclass(frozen=True)
class Watch:
    """What watching one fork's trunk works with."""

    tiering: Tiering
    records: TrunkWatchRecords  # called through `tiering.db`
    issues: Forge
    history: History

    @property
    def fork(self) -> str:
        return self.tiering.forge.repo


# --- the schedule ------------------------------------------------------------------------------------------


async def watch(w: Watch, *, head: str) -> list[TierRun]:
    """Time out stalled trunk runs; then, when trunk's head is due (see `due`), dispatch its trunk runs."""
    t, policy = w.tiering, w.tiering.config.trunk_watch
    for run in await t.db(w.records.waiting, w.fork):
        deadline = run.dispatched_at + timedelta(minutes=tier_config(t.config, run.level).timeout_minutes)
        if t.clock() >= deadline:
            await time_out(w, run)
    last = await t.db(w.records.trunk_runs, w.fork, ingestion=WATCH, level=Level.L2, limit=1)
    why = due(
        policy,
        head=head,
        last_head=last[0].head_sha if last else None,
        last_at=last[0].dispatched_at if last else None,
        now=t.clock(),
    )
    if why is None:
        return []
    names = [s.name for s in t.config.tiers.l3.suites]
    started = [
        await _dispatch(w, level, head, ingestion=WATCH, suite=suite, tries=1)
        for level, suite in levels(policy, names)
    ]
    log.info("%s: trunk runs on %s dispatched (%s)", w.fork, head[:10], why)
    return [run for run in started if run is not None]


async def time_out(w: Watch, run: TierRun) -> None:
    """Stop waiting for a trunk run: timed out, it answers a bisection waiting on its commit as a skip."""
    minutes = tier_config(w.tiering.config, run.level).timeout_minutes
    done = _finish(w, run, RunState.TIMED_OUT, detail=f"no result within {minutes} minutes")
    if not await w.tiering.db(w.tiering.runs.finish, done):
        return  # its result came first
    log.warning("%s: trunk %s on %s timed out", w.fork, run.level.name, run.head_sha[:10])
    await _answered(w, done, None)


async def _dispatch(
    w: Watch, level: Level, sha: str, *, ingestion: str, suite: int | None, tries: int = CAS_TRIES
) -> TierRun | None:
    """A trunk tier run on `sha` (the next attempt there): recorded, then started; a refusal is recorded.
    With `tries=1`, None when another worker recorded that attempt first (two looks at one trunk head)."""
    t = w.tiering
    for _ in range(tries):  # another worker may take the same attempt number: take the next
        attempts = [r.attempt for r in await t.db(w.records.runs_on, w.fork, level, sha)]
        run = TierRun(
            w.fork,
            TRUNK_PULL,
            ingestion,
            level,
            sha,
            max(attempts, default=0) + 1,
            RunState.DISPATCHED,
            t.clock(),
            selection=Selection.FULL,
            suite=suite,
        )
        added = await t.db(t.runs.add, run)
        if added is not None:
            break
    else:
        return None
    subject = Subject(w.fork, TRUNK_PULL, sha, sha, SubjectKind.TRUNK, ingestion)
    try:
        run_id = await t.backend.start(subject, added, workflow=tier_config(t.config, level).workflow)
    except DispatchRefused as exc:
        refused = _finish(w, added, RunState.REFUSED, detail=exc.message)
        await t.db(t.runs.save, refused)
        log.warning("%s: trunk %s on %s refused: %s", w.fork, level.name, sha[:10], exc.message)
        await _answered(w, refused, None)
        return refused
    if run_id is not None:
        await t.db(t.runs.set_run_id, added.id, run_id)
    return added


def _finish(w: Watch, run: TierRun, state: RunState, *, detail: str, **changes: Any) -> TierRun:
    return dataclasses.replace(
        run, state=state, detail=detail[:2000], completed_at=w.tiering.clock(), **changes
    )


# --- results -----------------------------------------------------------------------------------------------


async def complete(w: Watch, run_key: int, finished: Finished) -> None:
    """A trunk run's result: recorded and triaged (an infrastructure failure is retried on the same commit);
    then it answers the bisections waiting on its commit and, for a scheduled run, is compared with the
    previous one."""
    t = w.tiering
    run = await t.db(t.runs.get, run_key)
    if run is None or run.pull != TRUNK_PULL or run.state is not RunState.DISPATCHED:
        return
    report, problem = read_report(finished, run)
    facts = facts_of(report) if report is not None else None
    found = triage(finished.conclusion, facts, report_problem=problem, log=finished.log)
    keep = finished.report if report is not None else None
    done = _finish(w, run, RunState.COMPLETED, detail=found.reason, verdict=found.verdict, report=keep)
    if not await t.db(t.runs.finish, done):
        return  # timed out (or completed by another worker) meanwhile
    log.info("%s: trunk %s on %s: %s", w.fork, run.level.name, run.head_sha[:10], found.verdict.value)
    if found.verdict is Verdict.INFRA and run.attempt <= tier_config(t.config, run.level).retries:
        await _dispatch(w, run.level, run.head_sha, ingestion=run.ingestion, suite=run.suite)
        return  # the retry answers for this commit
    if found.verdict is Verdict.INFRA:  # the machine failed, not the code: it says nothing about either
        await _answered(w, done, None)
        return
    await _answered(w, done, report, usable=True)
    if run.ingestion == WATCH:
        await _compared(w, done, report, tail=finished.log)


async def _answered(w: Watch, run: TierRun, report: Report | None, *, usable: bool = False) -> None:
    """The bisections waiting on `run`'s commit get its answer and go on (a skip unless the run is `usable`:
    it completed on a machine that worked, with or without a report)."""
    for tracked, _ in await w.tiering.db(w.records.open_failures, w.fork):
        state = tracked.bisection
        if (tracked.level, tracked.suite) != (run.level, run.suite) or state is None:
            continue
        if tracked.phase is not Phase.BISECTING:
            continue
        if not any(tracked.probe_sha(p) == run.head_sha for p in state.in_flight):
            continue
        answer = await _outcome(w, tracked, report) if usable else bisect.Outcome.SKIP
        await _bisect(w, tracked.key, answer=(run, answer))


async def _outcome(w: Watch, tracked: Tracked, report: Report | None) -> bisect.Outcome:
    outcomes = outcomes_of(report) if report is not None else None
    return probe_outcome(tracked.worse, outcomes, await _regressions_since(w, tracked, report))


async def _regressions_since(w: Watch, tracked: Tracked, report: Report | None) -> MetricComparison | None:
    """`report` against the failure's last good trunk run: its metric regressions, and what it measured."""
    good = await w.tiering.db(w.tiering.runs.get, tracked.good_run)
    before = parse_report(good.report if good else None)
    if report is None or before is None:
        return None
    return await asyncio.to_thread(compare_metrics, before, report, w.tiering.config)


async def _compared(w: Watch, run: TierRun, report: Report | None, *, tail: str = "") -> None:
    """A scheduled run against the previous one: a new failure is tracked (and bisected), a tracked one seen
    again is noted, a fixed one closed."""
    t = w.tiering
    await _sightings(w, run, report)
    previous = await _previous(w, run)
    if previous is None:
        return
    before = parse_report(previous.report)
    assert before is not None and previous.id is not None and run.id is not None
    if report is None:
        found: tuple[Worse, ...] = (run_broke(run.detail, tail),)
    else:
        metrics = await asyncio.to_thread(metric_regressions, before, report, t.config) or []
        found = worsened(outcomes_of(before), outcomes_of(report), metrics)
    if not found:
        return
    commits = await w.history(previous.head_sha, run.head_sha)
    for worse in found:
        tracked = begin(
            w.fork,
            run.level,
            worse,
            good=(previous.head_sha, previous.id),
            bad=(run.head_sha, run.id),
            commits=commits,
            policy=t.config.trunk_watch,
            now=t.clock(),
            suite=run.suite,
        )
        if await _track(w, tracked):
            log.info("%s: trunk %s got worse: %s %s", w.fork, run.level.name, worse.kind.value, worse.name)
            await _bisect(w, tracked.key)


async def _track(w: Watch, tracked: Tracked) -> bool:
    """Start tracking a failure: a new one, or one fixed before that came back (its issue is reopened)."""
    t = w.tiering
    if await t.db(w.records.add, tracked, at=t.clock()):
        return True
    known = await t.db(w.records.tracked, w.fork, tracked.key)
    if known is None or known[0].phase is not Phase.FIXED:
        return False  # tracked already, still open: its sightings say it still fails
    return bool(await t.db(w.records.save, tracked, version=known[1], at=t.clock()))


async def _sightings(w: Watch, run: TierRun, report: Report | None) -> None:
    """Each open failure of this tier, as this later scheduled run shows it."""
    assert run.id is not None
    for tracked, _ in await w.tiering.db(w.records.open_failures, w.fork):
        if (tracked.level, tracked.suite) != (run.level, run.suite) or run.id <= tracked.bad_run:
            continue
        outcomes = outcomes_of(report) if report is not None else None
        failing = still_worse(tracked.worse, outcomes, await _regressions_since(w, tracked, report))
        if failing is None:
            continue
        seen = Sighting(sha=run.head_sha, run=run.id, at=w.tiering.clock(), failing=failing)
        updated = await _update(w, tracked.key, functools.partial(sighted, sighting=seen))
        if updated is not None:
            await publish(w, updated)


async def _previous(w: Watch, run: TierRun) -> TierRun | None:
    """The newest scheduled trunk run of the same tier and suites before `run` that left a report."""
    earlier = await w.tiering.db(w.records.trunk_runs, w.fork, ingestion=WATCH, level=run.level, limit=50)
    assert run.id is not None
    return next(
        (
            r
            for r in earlier
            if r.id is not None
            and r.id < run.id
            and r.suite == run.suite
            and r.report is not None
            and r.state is RunState.COMPLETED
            and r.verdict is not Verdict.INFRA
        ),
        None,
    )


# --- bisection ---------------------------------------------------------------------------------------------


async def _bisect(w: Watch, key: str, *, answer: tuple[TierRun, bisect.Outcome] | None = None) -> None:
    """Record a run's answer, plan the next probes (answered at once by a finished run on their commit where
    one exists), save, then dispatch what has no run yet and show the issue."""
    t = w.tiering
    reused: dict[str, bisect.Outcome] = {}
    for _ in range(CAS_TRIES):
        found = await t.db(w.records.tracked, w.fork, key)
        if found is None:
            return
        tracked, version = found
        tracked, wanted = await _plan(w, tracked, answer, reused)
        if await t.db(w.records.save, tracked, version=version, at=t.clock()):
            break
    else:
        raise RuntimeError(f"{w.fork}: the trunk failure {key} kept changing under this worker")
    for sha in wanted:
        runs = await t.db(w.records.runs_on, w.fork, tracked.level, sha)
        if any(r.state is RunState.DISPATCHED and r.suite == tracked.suite for r in runs):
            continue  # another failure's probe, or a retry, is running there: its result answers this one
        await _dispatch(w, tracked.level, sha, ingestion=PROBE, suite=tracked.suite)
    await publish(w, tracked)


async def _plan(
    w: Watch,
    tracked: Tracked,
    answer: tuple[TierRun, bisect.Outcome] | None,
    reused: dict[str, bisect.Outcome],
) -> tuple[Tracked, list[str]]:
    state = tracked.bisection
    if state is None or tracked.phase is not Phase.BISECTING:
        return tracked, []
    probes = dict(tracked.probes)
    if answer is not None:
        run, said = answer
        for probe in [p for p in state.in_flight if tracked.probe_sha(p) == run.head_sha]:
            state = bisect.record(state, probe.id, said)
            if run.id is not None:
                probes[probe.id] = run.id
    wanted: list[str] = []
    for _ in range(MAX_ROUNDS):  # each round is answered by finished runs, or it dispatches and stops
        if state.culprits or state.phase is not bisect.Phase.SEARCHING:
            break
        free = tracked_parallel(w) - len(state.in_flight)
        state, new = bisect.next_probes(state, free=free)
        answered = False
        for probe in new:
            sha = tracked.probe_sha(probe)
            outcome: bisect.Outcome | None = None
            if probe.purpose is bisect.Purpose.SEARCH:
                outcome = reused.get(sha)
            if outcome is None and probe.purpose is bisect.Purpose.SEARCH:
                outcome = await _finished_answer(w, tracked, sha)
            if outcome is not None:
                reused[sha] = outcome
                state, answered = bisect.record(state, probe.id, outcome), True
            elif sha not in wanted:
                wanted.append(sha)
        if not answered:
            break
    return settle(tracked.model_copy(update={"bisection": state, "probes": probes})), wanted


def tracked_parallel(w: Watch) -> int:
    return w.tiering.config.trunk_watch.parallel


async def _finished_answer(w: Watch, tracked: Tracked, sha: str) -> bisect.Outcome | None:
    """What a finished trunk run on `sha` (another failure's probe, a scheduled run) says, if one did."""
    runs = await w.tiering.db(w.records.runs_on, w.fork, tracked.level, sha)
    usable = [
        r
        for r in runs
        if r.state is RunState.COMPLETED
        and r.report
        and r.verdict is not Verdict.INFRA
        and r.suite == tracked.suite
    ]
    if not usable:
        return None
    return await _outcome(w, tracked, parse_report(usable[-1].report))


async def _update(w: Watch, key: str, change: Callable[[Tracked], Tracked]) -> Tracked | None:
    t = w.tiering
    for _ in range(CAS_TRIES):
        found = await t.db(w.records.tracked, w.fork, key)
        if found is None:
            return None
        tracked, version = found
        changed = change(tracked)
        if changed == tracked or await t.db(w.records.save, changed, version=version, at=t.clock()):
            return changed
    raise RuntimeError(f"{w.fork}: the trunk failure {key} kept changing under this worker")


# --- the tracking issue ------------------------------------------------------------------------------------


async def publish(w: Watch, tracked: Tracked) -> int | None:
    """Show `tracked` in its issue, found by its marker: edited in place, reopened when it came back, closed
    when it is fixed, created only when there is none. The issue's number, or None when none was needed."""
    body, heading, mark = render(tracked), title(tracked), marker(tracked.key)
    opened = sorted(
        (i for i in await w.issues.open_issues(label=LABEL) if mark in i.text), key=lambda i: i.number
    )
    if opened:
        keep, *extra = opened
        number = keep.number
        for issue in extra:
            await w.issues.close_issue(issue.number, comment=SUPERSEDED.format(number=number))
        if keep.text != body or keep.title != heading:
            await w.issues.edit_issue(number, title=heading, body=body)
        if tracked.phase is Phase.FIXED:
            last = tracked.sightings[-1]
            await w.issues.close_issue(number, comment=FIXED_COMMENT.format(sha=last.sha[:10], run=last.run))
        return number
    closed = [i for i in await w.issues.closed_issues(label=LABEL) if mark in i.text]
    if tracked.phase is Phase.FIXED:
        return closed[0].number if closed else None
    if closed:
        number = min(i.number for i in closed)
        await w.issues.reopen_issue(number, title=heading, body=body)
        return number
    number = await w.issues.create_issue(title=heading, body=body, labels=[LABEL])
    log.info("%s: opened #%d for trunk failure %s", w.fork, number, tracked.worse.name)
    return number


# --- reading reports ---------------------------------------------------------------------------------------


def outcomes_of(report: Report) -> RunOutcomes:
    tests = {f"{t.suite}::{t.name}": t for t in report.tests}
    return RunOutcomes(
        outcomes={key: t.outcome.value for key, t in tests.items()},
        messages={key: t.message or "" for key, t in tests.items()},
        suites=frozenset(s.name for s in report.suites if s.executed > 0),
    )
