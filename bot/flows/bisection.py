"""Bisection of an ingestion PR that failed a tier: candidate branches for the search's prefixes, the failing
tier dispatched on them through the same backend as the PR's own runs, each result read as an outcome, and
at the end the culprits recorded for the planner and the PR rebuilt without them.

Another module starts one with `start(b, pull, level=…)` and reads it back with `latest(b, fork, pull)` (or
the store's `BisectionRecords.for_pull`); `probe_finished(b, run)` is the tier flows' `after` hook for probes,
`tier_failed(b, run)` for a PR's own finished runs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from bot.core import audit, bisect
from bot.core.bisect import Budget, Outcome, Phase, Probe
from bot.core.bisect_pr import (
    COMMENT_MARKER,
    STARTED_BY_SLUICE,
    BisectionRecord,
    ProbeRun,
    Status,
    candidate_branch,
    culprit_detail,
    is_build_failure,
    literal_head,
    outcome_of,
    probe_suite,
    regression_outcome_of,
    regression_reason,
    render,
    should_bisect,
)
from bot.core.config import Strategy
from bot.core.errors import BadInput, DispatchRefused, first_line
from bot.core.ingestion import Links, stacked
from bot.core.l3_metrics import MetricComparison, MetricRegression
from bot.core.models import PickStatus
from bot.core.recognise import UPSTREAM_TRAILER
from bot.core.tiers import (
    LEVELS,
    Level,
    RunState,
    Selection,
    Subject,
    SubjectKind,
    TierRun,
    Verdict,
    latest_runs,
    tier_config,
)
from bot.core.webhooks import Pull
from bot.flows.pick import Picker, pick_in_order
from bot.flows.tiers import (
    Tiering,
    baseline,
    compare_metrics,
    metric_regressions,
    parse_report,
    subject_of,
    time_out,
)
from bot.git.mirror import BranchUpdate
from bot.ports import BisectionRecords, GateRecords, Repository
from runners.report import Outcome as ReportOutcome

log = logging.getLogger("sluice.bisect")
SAVE_TRIES = 8


class BisectForge(Protocol):
    """What a bisection asks of GitHub besides the tiers': its sticky comment, and its branches deleted."""

    async def upsert_comment(self, number: int, *, marker: str, body: str) -> int: ...

    async def delete_branch(self, branch: str) -> None: ...


class Candidates(Protocol):
    """The fork's git as a bisection uses it (blocking work is the adapter's to put in a thread)."""

    async def commits(self, pull: int, *, base: str, head: str) -> tuple[str, list[tuple[str, str]]]:
        """The PR's fork point and its commits: (fork SHA, upstream SHA) each, upstream order."""
        ...

    async def build(self, record: BisectionRecord, probe: Probe, branch: str) -> str | None:
        """Push `branch` at the probe's prefix; its head, or None when the prefix does not pick cleanly."""
        ...


@dataclass(frozen=True)
class Bisecting:
    """What bisecting one fork's ingestion PRs works with."""

    tiering: Tiering
    records: BisectionRecords  # called through `tiering.db`
    forge: BisectForge
    candidates: Candidates
    depends_on: Callable[[str], Awaitable[Mapping[str, Sequence[str]]]]  # the plan's edges of an ingestion
    rebuild: Callable[[str], Awaitable[None]]  # plan the fork again (why), so the PR is rebuilt
    bot_login: str  # "<app slug>[bot]": only a PR it opened is an ingestion (a branch's name proves nothing)
    audits: GateRecords | None = None  # where the ingestion's audit record is kept (called through `db`)
    links: Links | None = None  # where the comment links upstream commits (suspects, culprits)


@dataclass(frozen=True)
class Regressed:
    """What a performance bisection bisects: L3's confident critical-kernel regressions on the PR's head, and
    the tier run whose report they regressed against (each probe is compared with that same report)."""

    baseline_run: int
    regressions: tuple[MetricRegression, ...]
    suites: frozenset[str] = frozenset()  # the suites that timed the regressed kernels


async def _db(b: Bisecting, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return await b.tiering.db(call, *args, **kwargs)


# --- starting -----------------------------------------------------------------------------------------------


async def start(
    b: Bisecting,
    number: int,
    *,
    level: Level | None = None,
    by: str = STARTED_BY_SLUICE,
    regressed: Regressed | None = None,
) -> BisectionRecord:
    """Start a bisection of ingestion PR `number` on `level` (default: the tier that failed on its head) now;
    with `regressed`, of L3's performance regression instead of a failure. Raises BadInput, saying why, on a
    PR that is no ingestion, a head no tier failed on, or while one runs."""
    t = b.tiering
    pull = await t.forge.get_pull(number)
    subject = subject_of(pull, fork=t.forge.repo)
    if not _ingestion(b, pull, subject):
        raise BadInput(
            f"#{number} is not an open ingestion PR (a bundle or a risky chain Sluice opened)",
            "bisect one of those",
        )
    runs = await _db(b, t.runs.for_pull, subject.fork, number)
    latest = latest_runs(subject.head_sha, runs)
    if level is None:
        level = next((lv for lv in LEVELS if (r := latest.get(lv)) is not None and r.failed), None)
        if level is None:
            raise BadInput(
                f"no tier failed on #{number}'s head `{subject.head_sha[:10]}`", "name the tier to bisect"
            )
    running = await _db(b, b.records.running, subject.fork, number)
    if running is not None:
        if running.head_sha == subject.head_sha:
            raise BadInput(
                f"a bisection of #{number} on {running.level.name} already runs "
                f"({running.state.runs} runs so far)",
                "wait for it: the PR's bisection comment shows where it stands",
            )
        await _supersede(b, running)
    failed = latest.get(level)
    if regressed is None and failed is not None and not failed.failed:  # `/bisect l3` on a regressed L3
        regressed = await _regressed(b, failed, base_sha=pull.base.sha)
    reason = failed.detail if failed is not None and failed.failed else f"{level.name} bisected on request"
    if regressed is not None:
        reason = regression_reason(regressed.regressions)
    record = await _new_record(
        b, subject, base=pull.base.sha, level=level, by=by, reason=reason, regressed=regressed
    )
    record = _probing(b, record, failed if failed is not None and failed.failed else None, regressed)
    saved = await _db(b, b.records.start, record, at=t.clock())
    if saved is None:
        raise BadInput(f"a bisection of #{number} already runs", "wait for it to finish")
    log.info(
        "%s #%d: bisecting %d commits on %s", subject.fork, number, len(record.state.commits), level.name
    )
    await _advance(b, saved)
    return saved


async def _new_record(
    b: Bisecting,
    subject: Subject,
    *,
    base: str,
    level: Level,
    by: str,
    reason: str,
    regressed: Regressed | None = None,
) -> BisectionRecord:
    """The search of the PR's commits (upstream order, the plan's dependency edges) within the budget."""
    number = subject.pull
    fork_point, commits = await b.candidates.commits(number, base=base, head=subject.head_sha)
    if len(commits) < 2:
        raise BadInput(
            f"#{number} carries {len(commits)} upstream commit: nothing to bisect", "its tier run names it"
        )
    config = b.tiering.config.bisect
    budget = Budget(
        max_runs=config.max_runs, max_runner_hours=config.max_runner_hours, hours_per_run=config.hours_per_run
    )
    state = bisect.start(
        subject.ingestion,
        [u for _, u in commits],
        tier=level.value,
        depends_on=await b.depends_on(subject.ingestion),
        budget=budget,
        kind=bisect.Kind.REGRESSION if regressed is not None else bisect.Kind.FAILURE,
        prefixes_only=b.tiering.config.strategy is Strategy.MERGE,
    )
    return BisectionRecord(
        fork=subject.fork,
        pull=number,
        ingestion=subject.ingestion,
        level=level,
        head_sha=subject.head_sha,
        base_sha=fork_point,
        fork_commits=tuple(f for f, _ in commits),
        state=state,
        started_by=by,
        reason=reason,
        build_failure=regressed is None and is_build_failure(reason),
        parallel=config.parallel,
        regressions=tuple(r.name for r in regressed.regressions) if regressed is not None else (),
        baseline_run=regressed.baseline_run if regressed is not None else None,
    )


def _ingestion(b: Bisecting, pull: Pull, subject: Subject) -> bool:
    """An open bundle or chain PR Sluice opened: its branch in the fork itself (`subject_of`) and the App its
    author. Another fork's PR, or a person's PR from a branch named like Sluice's, is never bisected: its
    commits' trailers would otherwise blame upstream commits for the planner."""
    ours = subject.kind in (SubjectKind.BUNDLE, SubjectKind.CHAIN) and pull.author == b.bot_login
    return pull.is_open and ours


def _probing(
    b: Bisecting, record: BisectionRecord, failed: TierRun | None, regressed: Regressed | None
) -> BisectionRecord:
    """The record with the one suite its probes run: what failed (the suites with failing tests in the PR's
    report, or those that timed the regressed kernels), when that is one suite the config names."""
    names = [s.name for s in tier_config(b.tiering.config, record.level).suites]
    if regressed is not None:
        failing: frozenset[str] = regressed.suites
    else:
        report = parse_report(failed.report) if failed is not None else None
        bad = (ReportOutcome.FAILED, ReportOutcome.ERROR)
        failing = frozenset(s.name for s in report.suites if s.outcome in bad) if report else frozenset()
    ran = failed.suite if failed is not None and regressed is None else None
    suite = probe_suite(names, failing, ran=ran)
    if suite is None:
        return record
    return record.model_copy(update={"suite": suite, "suite_name": names[suite]})


async def tier_failed(b: Bisecting, run: TierRun) -> BisectionRecord | None:
    """A PR's own tier run finished: bisect its ingestion when the tier failed for a real reason, or when L3
    passed its tests but regressed a critical kernel's metric confidently (once per head and tier); None when
    it calls for no bisection."""
    if not b.tiering.config.bisect.auto or run.bisection is not None:
        return None
    pull = await b.tiering.forge.get_pull(run.pull)
    subject = subject_of(pull, fork=b.tiering.forge.repo)
    if not _ingestion(b, pull, subject) or subject.head_sha != run.head_sha:
        return None
    regressed = None
    if not should_bisect(run, commits=2):  # the commit count is checked once the commits are read
        regressed = await _regressed(b, run, base_sha=pull.base.sha)
        if regressed is None:
            return None
    if stacked(pull) and not await _base_passed(b, pull, run.level):
        # A bisection takes its PR's base as good: on a stack whose base PR has not passed this tier, the
        # culprit may be below, and the PR below is bisected (this one is rebuilt when that one is).
        log.info("%s #%d: no bisection: its base PR has not passed %s", run.fork, run.pull, run.level.name)
        return None
    earlier = await _db(b, b.records.for_pull, run.fork, run.pull)
    if any(r.head_sha == run.head_sha and r.level is run.level for r in earlier):
        return None  # this head was bisected on this tier already
    try:
        return await start(b, run.pull, level=run.level, regressed=regressed)
    except BadInput as exc:
        log.info("%s #%d: no bisection: %s", run.fork, run.pull, exc.message)
        return None


async def _regressed(b: Bisecting, run: TierRun, *, base_sha: str) -> Regressed | None:
    """L3's run passed its tests: its confident regressions of critical kernels against the baseline report
    (the noise-aware comparison trunk watch bisects with), or None when nothing regressed so."""
    t = b.tiering
    passed = run.verdict in (Verdict.PASSED, Verdict.BROKEN_TRUNK)
    if run.level is not Level.L3 or run.state is not RunState.COMPLETED or not passed or run.id is None:
        return None
    if not any(r.critical for r in await _db(b, t.runs.regressions, run.id)):
        return None  # what the run's comparison recorded: no critical kernel regressed at all
    found = await baseline(t, run.level, base_sha)
    if found is not None and found.head_sha != base_sha:
        # Trunk watch's report on another trunk commit: what regressed may have come between that commit and
        # the PR's base, and a bisection of the PR's commits would blame one of them for it.
        log.info(
            "%s #%d: no performance bisection: L3's baseline report is of %s, not of the PR's base %s",
            run.fork,
            run.pull,
            found.head_sha[:10],
            base_sha[:10],
        )
        return None
    before, after = parse_report(found.report if found else None), parse_report(run.report)
    if found is None or found.id is None or before is None or after is None:
        return None
    regressions = await asyncio.to_thread(metric_regressions, before, after, t.config)
    if not regressions:
        return None
    keys = {r.name.rsplit(" · ", 1)[0] for r in regressions}
    suites = frozenset(bench.suite for bench in after.benchmarks if bench.key in keys)
    return Regressed(found.id, tuple(regressions), suites)


async def _probe_regressions(b: Bisecting, record: BisectionRecord, run: TierRun) -> MetricComparison | None:
    """A performance bisection's probe report against the bisection's baseline report (None: no answer)."""
    found = await _db(b, b.tiering.runs.get, record.baseline_run) if record.baseline_run else None
    before, after = parse_report(found.report if found else None), parse_report(run.report)
    if before is None or after is None:
        return None
    return await asyncio.to_thread(compare_metrics, before, after, b.tiering.config)


async def _base_passed(b: Bisecting, pull: Pull, level: Level) -> bool:
    check = (await b.tiering.forge.check_runs(pull.base.sha)).get(level.check.value)
    return check is not None and check.conclusion == "success"


async def latest(b: Bisecting, fork: str, pull: int) -> BisectionRecord | None:
    """The newest bisection of PR `pull` (running or finished), for whoever reads its result."""
    found = await _db(b, b.records.for_pull, fork, pull)
    return found[-1] if found else None


# --- results ------------------------------------------------------------------------------------------------


async def probe_finished(b: Bisecting, run: TierRun) -> None:
    """A probe's tier run finished (completed or timed out): retry it, or record its outcome and go on. A
    result for a bisection that stopped, was superseded, or for an attempt it no longer waits for is
    ignored."""
    assert run.bisection is not None and run.probe is not None
    record = await _db(b, b.records.get, run.bisection)
    if record is None or not record.active:
        log.info("probe %s of bisection %s: its bisection no longer runs; ignored", run.probe, run.bisection)
        return
    pull = await b.tiering.forge.get_pull(record.pull)
    if not pull.is_open or pull.head.sha != record.head_sha:
        await _supersede(b, record)
        return
    shown = record.probe_run(run.probe)
    if shown is None or shown.run != run.id or run.probe not in {p.id for p in record.state.in_flight}:
        log.info("probe %s of bisection %s: a result it no longer waits for; ignored", run.probe, record.id)
        await _advance(b, record)  # a job that recorded it but lost the race to dispatch: go on from here
        return
    tier = tier_config(b.tiering.config, record.level)
    if record.regressions:
        found = await _probe_regressions(b, record, run)
        outcome = regression_outcome_of(run, found, names=record.regressions, retries=tier.retries)
    else:
        outcome = outcome_of(run, retries=tier.retries, build_failure=record.build_failure)
    if outcome is None and not bisect.may_retry(record.state):
        outcome, detail = Outcome.SKIP, f"the budget has no run left to try it again ({run.detail})"[:200]
    else:
        detail = run.detail
    if outcome is None:  # an infrastructure failure: the same prefix again, as the tiers retry
        assert shown.head is not None
        key = await _dispatch(b, record, run.probe, shown.head, attempt=run.attempt + 1)
        retried = {"attempt": run.attempt + 1, "run": key, "detail": f"retried: {run.detail}"[:200]}
        again = _with_probe(shown.model_copy(update=retried))
        if key is None:  # no second run: the probe is a skip, and the budget paid for no retry
            record = await _change(b, record, again)
            await _advance(b, await _outcome(b, record, run.probe, Outcome.SKIP, "dispatch refused"))
        else:
            record = await _change(b, record, lambda r: _retried(again(r)))
            await _show(b, record)  # the probe's second attempt, and what the budget paid for the first
        return
    await _advance(b, await _outcome(b, record, run.probe, outcome, detail))


async def _outcome(
    b: Bisecting, record: BisectionRecord, probe: int, outcome: Outcome, detail: str
) -> BisectionRecord:
    def change(r: BisectionRecord) -> BisectionRecord:
        shown = r.probe_run(probe)
        assert shown is not None
        state = bisect.record(r.state, probe, outcome)
        said = "" if outcome is Outcome.PASS else detail[:200]
        done = shown.model_copy(update={"outcome": outcome, "detail": said})
        return r.model_copy(update={"state": state}).with_probe(done)

    return await _change(b, record, change)


# --- the search's steps -------------------------------------------------------------------------------------


async def _advance(b: Bisecting, record: BisectionRecord) -> None:
    """Dispatch the probes the search wants now (a prefix that does not pick is a skip at once), until it
    waits for results or ends."""
    while record.active:
        if record.state.phase is not Phase.SEARCHING:
            await _finish(b, record)
            return
        free = record.parallel - len(record.state.in_flight)
        state, probes = bisect.next_probes(record.state, free=free)
        if not probes:  # waiting for results, or the budget just ran out
            if state != record.state:
                record = await _change(b, record, _with_state(state))
            if record.state.phase is Phase.SEARCHING:
                await _show(b, record)
                return
            continue
        assert record.id is not None
        key = record.id
        branches = {p.id: candidate_branch(record.ingestion, key, p.id) for p in probes}
        planned = record.model_copy(update={"state": state})
        for p in probes:
            planned = planned.with_probe(ProbeRun(probe=p.id, branch=branches[p.id]))
        record = await _save(b, planned)
        for probe in probes:
            head = await b.candidates.build(record, probe, branches[probe.id])
            if head is None:
                why = "the prefix does not pick cleanly onto the base"
                record = await _outcome(b, record, probe.id, Outcome.SKIP, why)
                continue
            pushed = ProbeRun(probe=probe.id, branch=branches[probe.id], head=head)  # its branch exists now
            record = await _change(b, record, _with_probe(pushed))
            run = await _dispatch(b, record, probe.id, head, attempt=1)
            shown = ProbeRun(probe=probe.id, branch=branches[probe.id], head=head, run=run)
            record = await _change(b, record, _with_probe(shown))
            if run is None:
                record = await _outcome(b, record, probe.id, Outcome.SKIP, "dispatch refused")
        # round again: with every runner busy, next_probes asks for none and the loop shows and returns


Change = Callable[[BisectionRecord], BisectionRecord]


def _with_state(state: bisect.Bisection) -> Change:
    return lambda r: r.model_copy(update={"state": state})


def _retried(record: BisectionRecord) -> BisectionRecord:
    return record.model_copy(update={"state": bisect.retried(record.state)})


def _with_probe(run: ProbeRun) -> Change:
    return lambda r: r.with_probe(run)


async def _dispatch(
    b: Bisecting, record: BisectionRecord, probe: int, head: str, *, attempt: int
) -> int | None:
    """The failing tier on a candidate's head, as a tier run the store tells apart from the PR's own; its id,
    or None when the backend refused it."""
    t = b.tiering
    kind = SubjectKind.CHAIN if record.ingestion.startswith("chain-") else SubjectKind.BUNDLE
    subject = Subject(record.fork, record.pull, head, record.base_sha, kind, record.ingestion)
    run = TierRun(
        record.fork,
        record.pull,
        record.ingestion,
        record.level,
        head,
        attempt,
        RunState.DISPATCHED,
        t.clock(),
        selection=Selection.FULL,
        suite=record.suite,  # only what failed, where one suite of the tier did
        bisection=record.id,
        probe=probe,
    )
    added = await _db(b, t.runs.add, run)
    if added is None:
        return None
    tier = tier_config(t.config, record.level)
    try:
        run_id = await t.backend.start(subject, added, workflow=tier.workflow)
    except Exception as exc:  # refused, or GitHub failing underneath: a probe that never started is a skip
        # (left dispatched, its result would never come and the bisection would wait for it forever)
        said = (
            exc.message
            if isinstance(exc, DispatchRefused)
            else f"the dispatch failed: {type(exc).__name__}: {first_line(exc)}"
        )
        refused = dataclasses.replace(
            added, state=RunState.REFUSED, detail=said[:2000], completed_at=t.clock()
        )
        await _db(b, t.runs.save, refused)
        if not isinstance(exc, DispatchRefused):
            log.warning("%s #%d: bisection %s probe %d: %s", record.fork, record.pull, record.id, probe, said)
        return None
    if run_id is not None:
        await _db(b, t.runs.set_run_id, added.id, run_id)
    log.info(
        "%s #%d: bisection %s probe %d (attempt %d) on %s",
        record.fork,
        record.pull,
        record.id,
        probe,
        attempt,
        head[:10],
    )
    return added.id


async def _finish(b: Bisecting, record: BisectionRecord) -> None:
    """Done: blame the culprits for the planner, delete the candidates, rebuild the PR without them.
    Exhausted: say so and leave the rest to a person; a culprit it had confirmed before the budget ran out
    (looking for a second) is blamed, and the PR rebuilt without it, all the same."""
    t = b.tiering
    status = Status.DONE if record.state.phase is Phase.DONE else Status.EXHAUSTED
    record = await _change(b, record, lambda r: r.model_copy(update={"status": status}))
    assert record.id is not None
    if record.state.culprits:
        detail = culprit_detail(record)
        for culprit in record.state.culprits:
            for sha in culprit.shas:
                await _db(
                    b,
                    b.records.blame,
                    record.fork,
                    sha,
                    level=record.level,
                    pull=record.pull,
                    bisection=record.id,
                    detail=detail,
                    at=t.clock(),
                )
    await _delete_candidates(b, record)
    await _show(b, record)
    await _audit(b, record)
    log.info("%s #%d: bisection %s %s", record.fork, record.pull, record.id, bisect.summary(record.state))
    # A bundle is rebuilt without its culprits (they root a chain now); a chain stays whole for a person.
    if record.state.culprits and not record.ingestion.startswith("chain-"):
        await b.rebuild(f"bisection of #{record.pull} blamed {len(record.state.culprits)} culprit(s)")


async def _audit(b: Bisecting, record: BisectionRecord) -> None:
    """The bisection's entry in the ingestion's audit record (its tier runs, how it ended, whom it blamed)."""
    if b.audits is None or record.id is None:
        return
    found = await _db(b, b.audits.audit, record.fork, record.pull)
    if found is None:
        return
    entry = audit.AuditBisection(
        id=record.id,
        tier=record.level.name,
        head_sha=record.head_sha,
        status=record.status.value,
        runs=record.state.runs,
        culprits=tuple(sha for c in record.state.culprits for sha in c.shas),
        regressions=record.regressions,
    )
    await _db(b, b.audits.save_audit, audit.with_bisection(found, entry), at=b.tiering.clock())


async def time_out_probes(t: Tiering, pull: int) -> None:
    """Stop waiting for a probe that ran past its tier's timeout (its bisection reads it as a skip)."""
    now = t.clock()
    for run in await t.db(t.runs.for_pull, t.forge.repo, pull):
        if run.bisection is None or run.state is not RunState.DISPATCHED:
            continue
        if now >= run.dispatched_at + timedelta(minutes=tier_config(t.config, run.level).timeout_minutes):
            await time_out(t, run)


async def _supersede(b: Bisecting, record: BisectionRecord) -> None:
    record = await _change(b, record, lambda r: r.model_copy(update={"status": Status.SUPERSEDED}))
    await _delete_candidates(b, record)
    await _show(b, record)
    await _audit(b, record)
    log.info("%s #%d: bisection %s superseded: the PR's head moved on", record.fork, record.pull, record.id)


async def _delete_candidates(b: Bisecting, record: BisectionRecord) -> None:
    """Every probe's branch, pushed or not (one that is not there is fine)."""
    for branch in dict.fromkeys(probe.branch for probe in record.probes):
        await b.forge.delete_branch(branch)


async def _show(b: Bisecting, record: BisectionRecord) -> None:
    await b.forge.upsert_comment(record.pull, marker=COMMENT_MARKER, body=render(record, links=b.links))


async def _save(b: Bisecting, record: BisectionRecord) -> BisectionRecord:
    saved: BisectionRecord | None = await _db(b, b.records.save, record, at=b.tiering.clock())
    if saved is None:
        raise BadInput(f"bisection {record.id} changed meanwhile", "the job runs again", retryable=True)
    return saved


async def _change(
    b: Bisecting, record: BisectionRecord, change: Callable[[BisectionRecord], BisectionRecord]
) -> BisectionRecord:
    """`change` applied to the newest saved record and saved; read again and re-applied when another worker
    saved it meanwhile."""
    for _ in range(SAVE_TRIES):
        saved: BisectionRecord | None = await _db(b, b.records.save, change(record), at=b.tiering.clock())
        if saved is not None:
            return saved
        assert record.id is not None
        fresh = await _db(b, b.records.get, record.id)
        assert fresh is not None
        record = fresh
        await asyncio.sleep(0.05)
    raise BadInput(f"bisection {record.id} kept changing", "the job runs again", retryable=True)


# --- the fork's git -----------------------------------------------------------------------------------------


class GitCandidates:
    """Candidates in the fork's mirror: a literal prefix is the PR's own commit; after a culprit is taken out,
    the prefix is picked again onto the PR's fork point (the ingestion's pick machinery)."""

    def __init__(
        self,
        repo: Repository,
        picker: Picker,
        *,
        strategy: Strategy,
        fetch_pull: Callable[[int], Awaitable[str]],
        push: Callable[[Sequence[BranchUpdate]], Awaitable[None]],
    ) -> None:
        self.repo, self.picker, self.strategy = repo, picker, strategy
        self.fetch_pull, self.push = fetch_pull, push

    async def commits(self, pull: int, *, base: str, head: str) -> tuple[str, list[tuple[str, str]]]:
        fetched = await self.fetch_pull(pull)
        if fetched != head:
            raise BadInput(
                f"#{pull}'s head moved while it was read", "the bisection starts on the next failure"
            )
        return await asyncio.to_thread(self._commits, base, head)

    def _commits(self, base: str, head: str) -> tuple[str, list[tuple[str, str]]]:
        fork_point = self.repo.run("merge-base", base, head).strip()
        found = []
        for info in self.repo.commits(head, "--not", fork_point, first_parent=True):
            upstream = UPSTREAM_TRAILER.findall(info.message)
            if len(upstream) != 1:
                raise BadInput(
                    f"commit {info.sha[:10]} of the PR is not one upstream commit's pick",
                    "bisect only an ingestion PR Sluice built",
                )
            found.append((info.sha, upstream[0]))
        return fork_point, found

    async def build(self, record: BisectionRecord, probe: Probe, branch: str) -> str | None:
        head = literal_head(record, probe) or await asyncio.to_thread(self._pick, record, probe)
        if head is None:
            return None
        await self.push([BranchUpdate(branch, head, None)])
        return head

    def _pick(self, record: BisectionRecord, probe: Probe) -> str | None:
        infos = [self.repo.commits(sha, "-1")[-1] for sha in probe.commits]
        head, reports = pick_in_order(
            self.picker,
            record.base_sha,
            infos,
            strategy=self.strategy,
            trailers=[("Sluice-Ingestion", record.ingestion)],
        )
        if (
            head is None
            or len(reports) < len(infos)
            or any(r.status is PickStatus.NEEDS_HUMAN for r in reports)
        ):
            return None
        return head
