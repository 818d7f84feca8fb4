"""`installation` and `installation_repositories` events: record and forget installations and their repos.

A delivery only says what happened; GitHub's own answer (asked with the App's JWT and the installation's
token) says what is true. Sluice records only what GitHub confirms, so a validly signed but forged or stale
delivery cannot put an installation or repository into the registry, move one, or forget one.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from gidgethub.routing import Router

from bot.app.context import Context
from bot.core.webhooks import InstallationEvent, InstallationRepositoriesEvent
from bot.github.installations import GitHubInstallation, on_github, repos_on_github
from bot.ports import Job
from handlers import requests

router = Router()
log = logging.getLogger("sluice.installation")
RECORDING_ACTIONS = frozenset({"created", "unsuspend", "new_permissions_accepted"})


def split(claimed: Iterable[str], held: frozenset[str]) -> tuple[list[str], list[str]]:
    """The claimed repositories GitHub confirms, and those it does not, in the delivery's order."""
    claimed = list(claimed)
    return [r for r in claimed if r in held], [r for r in claimed if r not in held]


@router.register("installation")
async def on_installation(event: InstallationEvent, *, ctx: Context, job: Job) -> None:
    inst = event.installation
    if event.action == "deleted":
        await _forget(ctx, job, inst.id)
        return
    if event.action not in RECORDING_ACTIONS:
        return
    found = await _confirmed(ctx, job, inst.id)
    if found is None:
        return
    held = await repos_on_github(ctx.github, inst.id)
    claimed = [r.full_name for r in event.repositories]
    repos, refused = split(claimed, held) if claimed else (sorted(held), [])
    _drop(job, refused, f"installation {inst.id} on GitHub does not hold", "not recorded")
    await ctx.db(ctx.registry.record_installation, inst.id, found.account, repos, at=ctx.clock())
    for repo in repos:
        await requests.register(ctx, repo, installation_id=inst.id)


@router.register("installation_repositories")
async def on_installation_repositories(
    event: InstallationRepositoriesEvent, *, ctx: Context, job: Job
) -> None:
    inst = event.installation
    found = await _confirmed(ctx, job, inst.id)
    if found is None:
        return
    held = await repos_on_github(ctx.github, inst.id)
    kept, removed = split((r.full_name for r in event.repositories_removed), held)
    added, refused = split((r.full_name for r in event.repositories_added), held)
    _drop(job, kept, f"installation {inst.id} on GitHub still holds", "not forgotten")
    _drop(job, refused, f"installation {inst.id} on GitHub does not hold", "not recorded")
    if removed:
        await ctx.db(ctx.registry.remove_repos, inst.id, removed)
        log.info("installation %d: forgot %s", inst.id, ", ".join(removed))
    if added:
        await ctx.db(ctx.registry.record_installation, inst.id, found.account, added, at=ctx.clock())
        for repo in added:
            await requests.register(ctx, repo, installation_id=inst.id)


async def _confirmed(ctx: Context, job: Job, installation_id: int) -> GitHubInstallation | None:
    found = await on_github(ctx.github, installation_id)
    if found is None or found.suspended:
        why = "suspended" if found else "unknown to GitHub for this App"
        log.warning(
            "delivery %s (%s): installation %d is %s; dropped, registry unchanged",
            job.delivery_id,
            job.kind,
            installation_id,
            why,
        )
        return None
    return found


async def _forget(ctx: Context, job: Job, installation_id: int) -> None:
    if await on_github(ctx.github, installation_id) is not None:
        log.warning(
            "delivery %s: installation %d deleted, but GitHub still has it; dropped, registry unchanged",
            job.delivery_id,
            installation_id,
        )
        return
    await ctx.db(ctx.registry.forget_installation, installation_id)
    log.info("installation %d deleted: forgotten with its forks", installation_id)


def _drop(job: Job, repos: Sequence[str], fact: str, outcome: str) -> None:
    if repos:
        log.warning("delivery %s (%s): %s %s; %s", job.delivery_id, job.kind, fact, ", ".join(repos), outcome)
