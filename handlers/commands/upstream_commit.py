"""What the commands that name an upstream commit share: the fork's mirror brought up to date, the commit
found on upstream's first-parent stream by its SHA prefix (no git call takes the user's text), and who
owns the files it touches."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from bot.app.context import Context
from bot.core.codeowners import CODEOWNERS_PATHS, CodeOwners, parse_codeowners
from bot.core.command_args import CommandRefused
from bot.core.config import SluiceConfig
from bot.core.permissions import Ownership, ownership
from bot.flows.engine import Snapshot, take_snapshot
from bot.git.mirror import Mirror, SyncResult
from bot.ports import Fork, Repository
from handlers import ingest, upstream


@dataclass(frozen=True)
class Synced:
    """The fork's mirror just fetched: both heads, and the fork's config at trunk."""

    repo: Repository
    sync: SyncResult
    config: SluiceConfig
    mirror: Mirror
    upstream_auth: dict[str, str] | None

    def upstream_ref(self, name: str) -> str:
        """The upstream commit a tag or upstream's own branch names (blocking; the name is a valid ref)."""
        if name in (self.sync.upstream_ref.removeprefix("upstream/"), self.sync.upstream_ref):
            return self.sync.upstream_head
        sha = self.mirror.upstream_tag(name, auth=self.upstream_auth)
        if sha is None:
            raise CommandRefused(
                f"upstream has no tag or branch `{name}` Sluice tracks",
                f"name a tag of upstream, its branch `{self.sync.upstream_ref}`, or an upstream SHA",
            )
        return self.stream_commit(sha, shown=name)

    def stream_commits(self, prefix: str) -> list[str]:
        """Every commit on upstream's first-parent stream whose SHA starts with `prefix` (blocking)."""
        stream = self.repo.first_parent_times(self.sync.upstream_head)
        return [sha for sha, _ in stream if sha.startswith(prefix)]

    def stream_commit(self, prefix: str, *, shown: str | None = None) -> str:
        """The full SHA of the one commit on upstream's first-parent stream starting with `prefix`."""
        found = self.stream_commits(prefix)
        named = shown or prefix
        if not found:
            raise CommandRefused(
                f"`{named}` is not a commit on upstream's first-parent stream ({self.sync.upstream_ref})",
                "name a commit of upstream's branch (a merged PR's merge commit, or a commit pushed to it)",
            )
        if len(found) > 1:
            raise CommandRefused(f"`{named}` names {len(found)} upstream commits", "give more of the SHA")
        return found[0]

    def snapshot(self) -> Snapshot:
        """Both histories read (blocking), to tell pending commits from those the fork has."""
        return take_snapshot(
            self.repo, fork_ref=self.sync.fork_ref, upstream_ref=self.sync.upstream_ref, config=self.config
        )

    def codeowners(self) -> CodeOwners:
        """Fork trunk's CODEOWNERS, from the first place GitHub looks that has one (blocking)."""
        for path in CODEOWNERS_PATHS:
            text = self.repo.read_file(self.sync.fork_head, path)
            if text is not None:
                return parse_codeowners(text.decode("utf-8", "replace"))
        return CodeOwners()

    def ownership_of(self, sha: str) -> Ownership:
        """Who owns each file the upstream commit touches, on fork trunk (blocking)."""
        changes = self.repo.changed_files([sha]).get(sha, ())
        paths = sorted({c.path for c in changes} | {c.old_path for c in changes if c.old_path})
        return ownership(paths, codeowners=self.codeowners(), config=self.config)


async def synced(ctx: Context, fork: Fork) -> Synced:
    """Fetch the fork's trunk and upstream branch into the fork's mirror and read the fork's config."""
    auth, upstream_auth = await upstream.fork_auth(ctx, fork)
    mirror, sync = await asyncio.to_thread(ctx.sync_fork, fork, auth=auth, upstream_auth=upstream_auth)
    repo = await asyncio.to_thread(ctx.repository, mirror)
    config = await asyncio.to_thread(ingest.fork_config, ctx, repo, sync, fork)
    return Synced(repo, sync, config, mirror, upstream_auth)


def pending_commit(synced: Synced, sha: str) -> Snapshot:
    """The snapshot, refusing a commit the fork already has (blocking)."""
    snapshot = synced.snapshot()
    if sha not in snapshot.pending:
        raise CommandRefused(
            f"upstream commit `{sha[:10]}` is already in the fork; there is nothing to hold",
            "name a commit the plan still lists",
        )
    return snapshot
