"""`sluice skip` and `sluice defer`: a person's decision about upstream commits, recorded in the store."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from bot.app.cli.common import add_repo_options, commit_arg, open_repo, open_store
from bot.app.clock import utc_now
from bot.core.config import MERGE_HOLDS_NOTHING, Strategy
from bot.core.errors import GitError, SluiceError
from bot.core.models import CommitInfo, Disposition, DispositionRecord
from bot.core.render import printable
from bot.flows.engine import Snapshot, take_snapshot
from bot.flows.planning import fork_key
from bot.git.repo import GitRepo

HOLD_VERB = {Disposition.SKIPPED: "skipped", Disposition.DEFERRED: "deferred"}


def run(args: argparse.Namespace) -> int:
    """`skip` / `defer`: a person's decision about upstream commits, recorded in the store."""
    held = Disposition(args.disposition)
    reason = (args.reason or "").strip() or None
    if held == Disposition.SKIPPED and not args.undo and reason is None:
        raise SluiceError("skipping needs a reason", 'say why it will not be ported: --reason "…"')
    repo, config = open_repo(args)
    if config.strategy is Strategy.MERGE and not args.undo:
        raise SluiceError(*MERGE_HOLDS_NOTHING)
    snapshot = take_snapshot(repo, fork_ref=args.fork, upstream_ref=args.upstream, config=config)
    commits = _pending_commits(repo, snapshot, args.shas)
    approver = args.by or _git_user(repo)
    store = open_store(args.database)
    try:
        key = fork_key(config, repo, args.fork)
        if args.undo:
            _check_held(store.dispositions(key), commits, held)
        now, wanted = utc_now(), Disposition.PENDING if args.undo else held
        for commit in commits:
            store.set_disposition(key, commit.sha, wanted, reason=reason, approver=approver, at=now)
    finally:
        store.close()
    if args.json:
        shown = [{"sha": c.sha, "subject": c.subject} for c in commits]
        record = {"schema_version": 1, "disposition": wanted.value, "by": approver, "reason": reason}
        print(json.dumps({**record, "commits": shown}, indent=2, sort_keys=True))
        return 0
    done = f"no longer {HOLD_VERB[held]}" if args.undo else HOLD_VERB[held]
    for commit in commits:
        print(printable(f"{commit.sha[:10]} {done} by {approver}: {commit.subject}"))
    return 0


def _pending_commits(repo: GitRepo, snapshot: Snapshot, args: Sequence[str]) -> list[CommitInfo]:
    """The named upstream commits, each once; anything not pending on the upstream stream is refused."""
    stream, pending = {sha for sha, _ in snapshot.stream}, set(snapshot.pending)
    infos = {c.sha: c for c in snapshot.candidates}
    chosen: dict[str, CommitInfo] = {}
    for arg in args:
        sha = commit_arg(repo, arg)
        if sha not in stream:
            raise SluiceError(f"{arg} is not an upstream commit", f"name commits of {snapshot.upstream_ref}")
        if sha not in pending:
            raise SluiceError(
                f"{arg} is already in the fork; there is nothing to hold", "name a commit `sluice plan` lists"
            )
        chosen[sha] = infos[sha]
    return list(chosen.values())


def _check_held(
    records: dict[str, DispositionRecord], commits: Sequence[CommitInfo], held: Disposition
) -> None:
    for commit in commits:
        record = records.get(commit.sha)
        if record is None or record.disposition != held:
            now = record.disposition if record else "not recorded"
            raise SluiceError(
                f"{commit.sha[:10]} is not {HOLD_VERB[held]} ({now}); nothing to undo",
                f"name a commit that is {HOLD_VERB[held]}",
            )


def _git_user(repo: GitRepo) -> str:
    try:
        name = repo.run("config", "user.name").strip()
    except GitError:
        name = ""
    if not name:
        raise SluiceError("who decided this? git has no user.name here", "pass --by LOGIN")
    return name


def add_parser(sub: argparse._SubParsersAction) -> None:
    for held, summary in (
        (Disposition.SKIPPED, "mark upstream commits as won't-port (they stop counting as pending)"),
        (Disposition.DEFERRED, "hold upstream commits out of plans for now (they stay pending work)"),
    ):
        _add_command(sub, held, summary)


def _add_command(sub: argparse._SubParsersAction, held: Disposition, summary: str) -> None:
    name = {Disposition.SKIPPED: "skip", Disposition.DEFERRED: "defer"}[held]
    command = sub.add_parser(name, help=summary)
    add_repo_options(command)
    command.add_argument(
        "--reason", help="why (required for skip)" if held == Disposition.SKIPPED else "why (optional)"
    )
    command.add_argument("--by", help="who decided (default: git's user.name)")
    command.add_argument("--undo", action="store_true", help=f"make {HOLD_VERB[held]} commits pending again")
    command.add_argument(
        "--database", help="SQLAlchemy URL (default: $SLUICE_DATABASE_URL, else a SQLite file)"
    )
    command.add_argument("shas", nargs="+", metavar="UPSTREAM_SHA")
    command.set_defaults(run=run, disposition=held.value)
