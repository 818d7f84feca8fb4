"""Internal jobs (`ingest`, `register`): their payload models, and the one way handlers enqueue them."""

from __future__ import annotations

import logging

from pydantic import BaseModel, ConfigDict, Field

from bot.app.context import Context
from bot.core.config import Name
from bot.core.tiers import Level
from bot.core.webhooks import CommitSha, GitHubId, RepoName

INGEST, REGISTER = "ingest", "register"  # the jobs' kinds
TIERS, TIER_LOCAL, TIER_TIMEOUTS = "tiers", "tier-local", "tier-timeouts"
BISECT, TRUNK_WATCH = "bisect", "trunk-watch"
GATE = "gate"
log = logging.getLogger("sluice.requests")


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)  # written by Sluice only: anything else is a bug


class IngestRequest(Request):
    """Plan a fork again and bring its ingestion PRs up to date."""

    fork: RepoName
    reason: str = Field(max_length=1000)  # for the log: what moved
    # `/ingest <ref>`: open only the units whose commits all come at or before this upstream commit
    upto: str | None = Field(default=None, pattern=r"^[0-9a-f]{40}$")


class RegisterRequest(Request):
    """Read an installed repository's `.github/sluice.yml`: is it a fork Sluice keeps in sync?"""

    repo: RepoName
    installation_id: GitHubId


class TiersRequest(Request):
    """Bring one PR's tiers forward: start the next, retry, time out; a re-run or L3 when a person asked."""

    fork: RepoName
    pull: GitHubId
    rerun: Level | None = None
    l3: bool = False
    suite: Name | None = None  # with `l3`: run only this L3 suite
    # The head a person asked on (a check run's button, "Re-run all checks"): nothing starts when the PR's
    # head has moved on since. None: a plain request, a slash command, or an ask queued before heads were kept
    # (brought forward on the PR's head then, as before).
    head: CommitSha | None = None


class LocalTierRequest(Request):
    """Run one tier run on this machine (the `local` tier backend)."""

    fork: RepoName
    run: GitHubId  # the tier run's id


class TierTimeoutsRequest(Request):
    """Time out the fork's tier runs that are past their tier's timeout (the periodic sweep)."""

    fork: RepoName


class TrunkWatchRequest(Request):
    """Look whether fork trunk is due its trunk runs (trunk watch); time out stalled ones."""

    fork: RepoName


class BisectRequest(Request):
    """A tier run finished that a bisection may want: a PR's own real failure, or one of its probes."""

    fork: RepoName
    run: GitHubId  # the tier run's id


class GateRequest(Request):
    """Judge a PR's gate again (a waiver on it expired): the periodic sweep's ask."""

    fork: RepoName
    pull: GitHubId
    reason: str = Field(max_length=200)  # for the log


PAYLOADS: dict[str, type[BaseModel]] = {
    INGEST: IngestRequest,
    REGISTER: RegisterRequest,
    TIERS: TiersRequest,
    TIER_LOCAL: LocalTierRequest,
    TIER_TIMEOUTS: TierTimeoutsRequest,
    BISECT: BisectRequest,
    TRUNK_WATCH: TrunkWatchRequest,
    GATE: GateRequest,
}


async def ingest(ctx: Context, fork: str, *, reason: str, upto: str | None = None) -> bool:
    """Ask for an ingestion run of `fork`; a burst of requests with the same `upto` coalesces into one queued
    job (so a request made while one is queued is answered by that one: False). A whole run and one capped
    at `upto` (`/ingest <sha>`) never answer each other: each is queued, and they run in turn."""
    payload = IngestRequest(fork=fork, reason=reason, upto=upto).model_dump(mode="json")
    queue, now = ctx.job_requests, ctx.clock()
    if await ctx.db(queue.enqueue_once, INGEST, payload, key=fork, now=now, same=("upto",)) is None:
        return False
    log.info("ingestion of %s requested: %s", fork, reason)
    return True


async def register(ctx: Context, repo: str, *, installation_id: int) -> None:
    """Ask for `repo` to be (re-)registered from its config; requests for one repo coalesce too."""
    payload = RegisterRequest(repo=repo, installation_id=installation_id).model_dump(mode="json")
    queue, now = ctx.job_requests, ctx.clock()
    await ctx.db(queue.enqueue_once, REGISTER, payload, key=repo, now=now, same=("installation_id",))


async def tiers(
    ctx: Context,
    fork: str,
    pull: int,
    *,
    rerun: Level | None = None,
    l3: bool = False,
    suite: str | None = None,
    head: str | None = None,
) -> None:
    """Ask for PR `pull`'s tiers to be brought forward; plain requests for one PR coalesce, asks do not
    (`suite`, with `l3`: run only that L3 suite; `head`: the head the ask was made on, which must still be the
    PR's when it is acted on)."""
    request = TiersRequest(fork=fork, pull=pull, rerun=rerun, l3=l3, suite=suite, head=head)
    payload = request.model_dump(mode="json")
    key = f"{fork}#{pull}" + (f":rerun-{rerun.value}" if rerun else "") + (":l3" if l3 else "")
    key += (f":{suite}" if suite else "") + (f"@{head}" if head else "")
    await ctx.db(ctx.job_requests.enqueue_once, TIERS, payload, key=key, now=ctx.clock())


async def tier_timeouts(ctx: Context, fork: str) -> None:
    """Ask for the fork's stalled tier runs to be timed out; requests for one fork coalesce."""
    payload = TierTimeoutsRequest(fork=fork).model_dump(mode="json")
    await ctx.db(ctx.job_requests.enqueue_once, TIER_TIMEOUTS, payload, key=fork, now=ctx.clock())


async def local_tier(ctx: Context, fork: str, run: int) -> None:
    """Ask for tier run `run` to run on this machine."""
    payload = LocalTierRequest(fork=fork, run=run).model_dump(mode="json")
    await ctx.db(
        ctx.job_requests.enqueue_once, TIER_LOCAL, payload, key=f"{fork}:tier-run-{run}", now=ctx.clock()
    )


async def bisect(ctx: Context, fork: str, run: int) -> None:
    """Ask for finished tier run `run` to be read by the bisections (a real failure may start one)."""
    payload = BisectRequest(fork=fork, run=run).model_dump(mode="json")
    key = f"{fork}:bisect-run-{run}"
    await ctx.db(ctx.job_requests.enqueue_once, BISECT, payload, key=key, now=ctx.clock())


async def trunk_watch(ctx: Context, fork: str) -> None:
    """Ask whether `fork`'s trunk is due its trunk runs; requests for one fork coalesce."""
    payload = TrunkWatchRequest(fork=fork).model_dump(mode="json")
    await ctx.db(ctx.job_requests.enqueue_once, TRUNK_WATCH, payload, key=fork, now=ctx.clock())


async def gate(ctx: Context, fork: str, pull: int, *, reason: str) -> None:
    """Ask for PR `pull`'s gate to be judged again; requests for one PR coalesce."""
    payload = GateRequest(fork=fork, pull=pull, reason=reason).model_dump(mode="json")
    await ctx.db(ctx.job_requests.enqueue_once, GATE, payload, key=f"{fork}#{pull}:gate", now=ctx.clock())
