"""The dashboard issue after each ingestion run: gather what it shows, render it, publish it in place."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from bot.app.context import Context
from bot.core.config import SluiceConfig
from bot.core.dashboard import (
    BacklogCommit,
    DashboardModel,
    HoldLine,
    OpenIngestion,
    PauseState,
    SignoffLine,
    ThrottleState,
    WaiverLine,
    render,
)
from bot.core.emergency import emergency_id, is_emergency_pull
from bot.core.ingestion import CheckName, IngestionRecord, Links
from bot.core.l3_metrics import by_area
from bot.core.models import Plan
from bot.core.webhooks import CheckRun
from bot.flows.dashboard import Published, publish
from bot.github.forge import ForkGitHub
from bot.ports import GateRecords, SignoffRecords

log = logging.getLogger("sluice.dashboard")
TIERS = frozenset(t.value for t in CheckName)
LIVE = ("open", "blocked")  # the registry's states of an ingestion that has a PR or a tracking issue


@dataclass(frozen=True)
class Shown:
    """What this ingestion run decided that the dashboard shows."""

    plan: Plan
    config: SluiceConfig
    backlog: tuple[BacklogCommit, ...]
    links: Links


async def update(ctx: Context, forge: ForkGitHub, shown: Shown) -> Published:
    """Render the dashboard from the lag history, the registry and the tiers' check runs; publish it."""
    repo = forge.repo
    history = await ctx.db(ctx.lag_history.history, repo)
    records = [r for state in LIVE for r in await ctx.db(ctx.registry.ingestions, repo, state=state)]
    ingestions = [await _ingestion(forge, r) for r in sorted(records, key=_order)]
    ingestions += await _emergency_picks(forge)
    live = [(i.number, i.head) for i in ingestions if not i.blocked and i.number is not None]
    limit = shown.config.gate.pause_after_failures
    gate = await ctx.db(gate_state, ctx.gates, repo, sorted(n for n, _ in live), limit=limit)
    heads = [(number, head) for number, head in live if head]
    signoffs = await ctx.db(signoff_state, ctx.signoffs, repo, heads, config=shown.config)
    model = DashboardModel(
        fork=repo,
        now=ctx.clock(),
        history=history,
        links=shown.links,
        chains=shown.plan.chains,
        components=shown.config.all_components,
        backlog=shown.backlog,
        ingestions=ingestions,
        waivers=gate.waivers,
        holds=gate.holds,
        signoffs=signoffs,
        paused=gate.paused,
        throttle=gate.throttle,
    )
    remembered = await ctx.db(ctx.registry.dashboard_issue, repo)
    published, number = await publish(forge, render(model), remembered=remembered)
    if number != remembered:
        await ctx.db(ctx.registry.remember_dashboard, repo, number)
    log.info("%s: dashboard #%d %s", repo, number, published.value)
    return published


@dataclass(frozen=True)
class GateShown:
    """What the gate remembers that the dashboard shows: the open ingestion PRs' waivers and holds, the
    fork's pause and its safety throttle."""

    waivers: tuple[WaiverLine, ...]
    holds: tuple[HoldLine, ...]
    paused: PauseState | None
    throttle: ThrottleState


def gate_state(gates: GateRecords, repo: str, numbers: list[int], *, limit: int) -> GateShown:
    """The gate's records for the open ingestion PRs `numbers` (blocking: one `ctx.db` call). A waiver
    stays listed after it expires, marked so, while its PR is open: the gate is closed again because of it."""
    waivers = tuple(
        WaiverLine(n, w.tier.name, w.reason, w.granted_by, w.expires_at)
        for n in numbers
        for w in gates.waivers(repo, n)
    )
    holds = tuple(HoldLine(n, h.by, h.reason, h.at) for n in numbers if (h := gates.hold(repo, n)))
    pause = gates.paused(repo)
    failures = gates.consecutive_failures(repo)
    return GateShown(
        waivers=waivers,
        holds=holds,
        paused=None if pause is None else PauseState(pause.by, pause.reason, pause.at),
        throttle=ThrottleState(failures=failures, limit=limit, tripped=failures >= limit),
    )


def signoff_state(
    signoffs: SignoffRecords, repo: str, heads: list[tuple[int, str]], *, config: SluiceConfig
) -> tuple[SignoffLine, ...]:
    """For each open ingestion PR (number, head) whose head's L3 run regressed: its areas and the signoffs
    given on that head (blocking: one `ctx.db` call)."""
    found = []
    for number, head in heads:
        metrics = signoffs.l3_metrics(repo, number, head_sha=head)
        if metrics is None or not metrics.regressions:
            continue
        signed = tuple(s.login for s in signoffs.signoffs(repo, number) if s.head_sha == head)
        areas = tuple(by_area(metrics.regressions, config))
        found.append(SignoffLine(number, head, len(metrics.regressions), areas, signed))
    return tuple(found)


def _order(record: IngestionRecord) -> tuple[int, str]:
    return (record.pr_number or 0, record.id)


async def _emergency_picks(forge: ForkGitHub) -> list[OpenIngestion]:
    """The open emergency picks (`/cherry-pick`'s PRs, which the registry does not keep) and their tiers."""
    found = []
    for pull in await forge.open_pulls():
        if is_emergency_pull(pull, fork=forge.repo):
            head = pull.head
            runs = await forge.check_runs(head.sha)
            found.append(
                OpenIngestion(emergency_id(head.ref), pull.number, False, 1, _states(runs), head.sha)
            )
    return found


async def _ingestion(forge: ForkGitHub, record: IngestionRecord) -> OpenIngestion:
    blocked = record.state == "blocked"
    runs = await forge.check_runs(record.head) if record.head and not blocked else {}
    return OpenIngestion(
        unit_id=record.id,
        number=record.pr_number,
        blocked=blocked,
        commits=record.commits,
        tiers=_states(runs),
        head=record.head,
    )


def _states(runs: Mapping[str, CheckRun]) -> dict[str, str]:
    return {name: run.state for name, run in runs.items() if name in TIERS}
