"""`/cherry-pick <upstream PR number or SHA> [--reason "…"]`: an emergency pick onto fork trunk as its own
ingestion PR. A PR number is asked of upstream's API (merged? its merge commit?), and the commit must be
on upstream's first-parent stream before any other git call."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from gidgethub import BadRequest

from bot.app.context import Context
from bot.core import audit, emergency
from bot.core.command_args import CommandRefused, Flag, Kind, Positional, PullNumber, ShaPrefix, Usage
from bot.core.config import Strategy
from bot.core.emergency import EmergencyPick, is_emergency_pull
from bot.core.ingestion import TIER_TITLES, CheckName, Label
from bot.core.models import CommitReport, Disposition
from bot.core.permissions import Permission
from bot.core.refs import SHA_RE
from bot.core.upstream_access import UpstreamRefused
from bot.core.webhooks import Pull
from bot.flows.pick import Picker, pick_in_order
from bot.git.mirror import BranchUpdate
from bot.github.forge import ForkGitHub
from bot.ports import Fork
from handlers import ingest, requests
from handlers.commands.call import Call, Outcome
from handlers.commands.upstream_commit import Synced, synced

NAME = "cherry-pick"
WHO = Permission.WRITE
USAGE = Usage(NAME, (Positional("upstream PR number or SHA", Kind.PULL_OR_SHA),), (Flag("reason"),))
HELP = (
    f"`{USAGE.line}` — emergency pick onto fork trunk as its own ingestion PR; never moves the ingestion tip"
)


@dataclass(frozen=True)
class Picked:
    pick: EmergencyPick
    head: str
    report: CommitReport


async def handle(call: Call, *, ctx: Context) -> Outcome:
    target = call.args.get("upstream PR number or SHA")
    assert isinstance(target, PullNumber | ShaPrefix)
    fork, prefix, pull = await _target(ctx, call.fork, target)
    sha = await asyncio.to_thread(
        fork.stream_commit, prefix, shown=f"#{pull}'s merge commit" if pull else None
    )
    reason = call.args.get("reason")
    picked = await asyncio.to_thread(
        _pick, ctx, fork, call, sha, pull, reason if isinstance(reason, str) else None
    )
    opened = await _open_pull_for(ctx, call.fork, picked.pick.branch)
    if opened is None:
        number, head = await _publish(ctx, call.fork, picked), picked.head
    else:  # the same command again, or its job retried after a step failed: what is left is finished
        number, head = opened.number, opened.head.sha
    await _complete(ctx, call, picked, number=number, head=head)
    if opened is not None:
        done = f"the emergency pick of {picked.pick.named} is already open as #{number}"
        return Outcome(done, reply=f"Nothing to do: {done}.\n")
    return Outcome(
        f"opened #{number}, the emergency pick of {picked.pick.named}",
        emergency.opened_reply(picked.pick, number),
    )


async def _target(ctx: Context, fork: Fork, target: PullNumber | ShaPrefix) -> tuple[Synced, str, int | None]:
    """The fork synced, the SHA prefix to pick and the upstream PR it came from. A PR is asked of
    upstream's API before any git call. Seven to nine bare digits may be a PR or a SHA prefix: the commit
    when upstream has no such PR (or no PRs on this GitHub), refused as ambiguous when an upstream commit
    also starts so, else the PR."""
    if isinstance(target, ShaPrefix):
        return await synced(ctx, fork), target.text, None
    if target.sha is None:
        merged = await merge_commit(ctx, fork, target.number)
        return await synced(ctx, fork), merged, target.number
    if fork.upstream_repo is None:
        return await synced(ctx, fork), target.sha, None
    try:
        pulled: str | Unmerged = await merge_commit(ctx, fork, target.number)
    except NoSuchPull:
        return await synced(ctx, fork), target.sha, None
    except Unmerged as exc:
        pulled = exc
    done = await synced(ctx, fork)
    starting = await asyncio.to_thread(done.stream_commits, target.sha)
    if starting:
        raise CommandRefused(
            f"`{target.sha}` is both upstream PR #{target.number} and the start of upstream commit "
            f"`{starting[0][:10]}`",
            f"write `#{target.number}` for the PR, or give more of the SHA",
        )
    if isinstance(pulled, Unmerged):
        raise pulled
    return done, pulled, target.number


class NoSuchPull(CommandRefused):
    """Upstream's API has no PR by that number (404 or 410)."""


class Unmerged(CommandRefused):
    """The upstream PR exists and is not merged."""


async def merge_commit(ctx: Context, fork: Fork, number: int) -> str:
    """The merge commit of the upstream PR, as upstream's API says; refused unless it is merged."""
    if fork.upstream_repo is None:
        raise CommandRefused(
            "the fork's upstream is not a repository on this GitHub, so PR numbers mean nothing here",
            "give the upstream commit's SHA instead",
        )
    upstream = await _upstream(ctx, fork)
    try:
        pull = await upstream.get_pull(number)
    except BadRequest as exc:
        if exc.status_code in (404, 410):
            raise NoSuchPull(
                f"{fork.upstream_repo} has no PR #{number} that Sluice can see",
                "give a merged upstream PR, or the upstream commit's SHA",
            ) from None
        raise
    sha = pull.merge_commit_sha
    if not pull.merged or sha is None or not SHA_RE.match(sha):
        raise Unmerged(
            f"upstream PR #{number} is not merged ({pull.state})",
            "wait until it is merged upstream, or give the SHA of an upstream commit",
        )
    return sha


async def _upstream(ctx: Context, fork: Fork) -> ForkGitHub:
    """Upstream as the fork may read it through the API: with the upstream installation's token where the
    upstream access rule grants it to this fork, else anonymously (a public upstream shows anyone its PRs).
    Without an upstream installation nothing is decided by git, so a refused PR never reaches git."""
    assert fork.upstream_repo is not None
    api = ctx.github.anonymous()
    if await ctx.db(ctx.registry.installation_of, fork.upstream_repo) is not None:
        try:
            access = await ctx.upstream_access(
                fork.repo, installation_id=fork.installation_id, upstream_url=fork.upstream_url
            )
        except UpstreamRefused as exc:
            raise CommandRefused(exc.message, exc.remedy) from None
        if access.installation_id is not None:
            api = ctx.github.for_installation(access.installation_id)
    return ForkGitHub(api, fork.upstream_repo, bot_login=ctx.bot_login)


def _pick(ctx: Context, fork: Synced, call: Call, sha: str, pull: int | None, reason: str | None) -> Picked:
    """The commit picked onto fork trunk on its own (blocking git work); nothing is pushed here."""
    snapshot = fork.snapshot()
    if sha in snapshot.ingested or sha in snapshot.emergency:
        raise CommandRefused(f"upstream commit `{sha[:10]}` is already in the fork", "nothing to pick")
    commit = next(c for c in snapshot.candidates if c.sha == sha)
    pick = EmergencyPick(commit, pull=pull, requested_by=call.actor, reason=reason)
    recall = lambda keys: ctx.store.resolutions(call.fork.repo, keys)  # noqa: E731
    picker = Picker(fork.repo, fork.config, recall=recall, use_resolver=False)
    head, reports = pick_in_order(
        picker, fork.sync.fork_head, [commit], strategy=Strategy.CHERRY_PICK, trailers=pick.trailers
    )
    if head is None:
        raise CommandRefused(
            emergency.needs_human(pick, reports[-1]), "pick it by hand: `git cherry-pick -x`"
        )
    return Picked(pick, head, reports[-1])


async def _open_pull_for(ctx: Context, fork: Fork, branch: str) -> Pull | None:
    """The pick's open PR: from Sluice's branch in the fork itself (not a same-named one from elsewhere)."""
    pulls = await ctx.forge(fork.installation_id, fork.repo).open_pulls()
    return next((p for p in pulls if is_emergency_pull(p, fork=fork.repo) and p.head.ref == branch), None)


async def _publish(ctx: Context, fork: Fork, picked: Picked) -> int:
    """Push the pick's branch and open its PR; its number."""
    auth = await ctx.git_auth(fork.installation_id)
    mirror = ctx.mirror(fork.repo)
    existing = await asyncio.to_thread(
        mirror.fetch_branches, ctx.clone_url(fork.repo), emergency.EMERGENCY_PREFIX, auth=auth
    )
    update = BranchUpdate(picked.pick.branch, picked.head, existing.get(picked.pick.branch))
    await asyncio.to_thread(mirror.push, [update], auth=auth)
    forge = ctx.forge(fork.installation_id, fork.repo)
    body = emergency.pr_body(picked.pick, picked.report, links=ingest.links_of(ctx, fork))
    pull = await forge.create_pull(
        title=emergency.title(picked.pick), body=body, head=picked.pick.branch, base=fork.branch
    )
    return pull.number


async def _complete(ctx: Context, call: Call, picked: Picked, *, number: int, head: str) -> None:
    """What the pick's PR needs once open, each step skipped where done: a retry of the job after a step
    failed (or the same command again) finishes the rest. Its audit record, its label, L1 queued on its
    head, the commit's disposition and an ingestion run that leaves it out."""
    fork, sha = call.fork, picked.pick.commit.sha
    forge = ctx.forge(fork.installation_id, fork.repo)
    if await ctx.db(ctx.gates.audit, fork.repo, number) is None:
        opened = audit.emergency_opened(
            picked.pick, picked.report, fork=fork.repo, pr_number=number, head=head
        )
        await ctx.db(ctx.gates.save_audit, opened, at=ctx.clock())
    await forge.replace_labels(number, [Label.EMERGENCY.value])
    if CheckName.L1.value not in await forge.check_runs(head):
        await forge.create_check_run(head, CheckName.L1.value, title=TIER_TITLES[CheckName.L1])
    held = (await ctx.db(ctx.store.dispositions, fork.repo)).get(sha)
    if held is not None and held.disposition is Disposition.EMERGENCY:
        return
    reason = f"/cherry-pick by @{call.actor} in #{number}"
    await ctx.db(
        ctx.store.set_disposition,
        fork.repo,
        sha,
        Disposition.EMERGENCY,
        reason=reason,
        approver=call.actor,
        at=ctx.clock(),
    )
    await requests.ingest(ctx, fork.repo, reason=f"emergency pick {sha[:10]} opened as #{number}")
