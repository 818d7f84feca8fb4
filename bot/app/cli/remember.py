"""`sluice remember`: learn how a person resolved a pick's conflicts, to resolve them again."""

from __future__ import annotations

import argparse

from bot.app.cli.common import commit_arg, open_repo, open_store
from bot.app.clock import utc_now
from bot.core import render
from bot.core.errors import SluiceError
from bot.flows.pick import Picker, learn_resolutions
from bot.flows.planning import fork_key


def run(args: argparse.Namespace) -> int:
    """Learn how a human resolved a pick's conflicts, so the same conflicts resolve by themselves later."""
    repo, config = open_repo(args)
    upstream_sha, resolved_sha = (commit_arg(repo, a) for a in (args.upstream_commit, args.resolution))
    upstream, resolved = (repo.commits(sha, "-1")[-1] for sha in (upstream_sha, resolved_sha))
    if not resolved.parents or not upstream.parents:
        raise SluiceError("both commits need a parent", "give the pick commit a human made on fork trunk")
    learned = learn_resolutions(Picker(repo, config), upstream, resolved)
    store = open_store(args.database)
    try:
        key, now = fork_key(config, repo, args.fork), utc_now()
        for conflict, (path, lines) in sorted(learned.items()):
            store.remember_resolution(
                key,
                conflict,
                lines,
                path=path,
                recorded_by=args.by,
                upstream_sha=upstream_sha,
                fork_sha=resolved_sha,
                at=now,
            )
    finally:
        store.close()
    print(f"remembered {render.plural(len(learned), 'resolved conflict')} from {resolved_sha[:10]}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    remember = sub.add_parser("remember", help="remember how a human resolved a pick's conflicts")
    remember.add_argument("--repo", required=True, help="path of a clone or mirror")
    remember.add_argument("--fork", required=True, help="fork trunk ref (names the fork in the store)")
    remember.add_argument("--upstream-commit", required=True, help="the upstream commit that was picked")
    remember.add_argument("--resolution", required=True, help="the fork commit with the human's resolution")
    remember.add_argument("--by", required=True, help="who resolved it (GitHub login)")
    remember.add_argument("--config", help="a sluice.yml (default: .github/sluice.yml at --fork)")
    remember.add_argument(
        "--database", help="SQLAlchemy URL (default: $SLUICE_DATABASE_URL, else a SQLite file)"
    )
    remember.set_defaults(run=run)
