"""`sluice mirror`: create or update the local mirror that `plan` and `status` read."""

from __future__ import annotations

import argparse
from pathlib import Path

from bot.config_file import load_config
from bot.core.config import SluiceConfig
from bot.git.mirror import Mirror


def run(args: argparse.Namespace) -> int:
    """Create or update the local mirror that `plan` and `status` then read."""
    config = load_config(Path(args.config)) if args.config else SluiceConfig()
    result = Mirror(Path(args.dir)).sync(
        fork_url=args.fork_url,
        fork_branch=args.fork_branch or config.fork.branch,
        upstream_url=args.upstream_url or config.upstream.url,
        upstream_branch=args.upstream_branch or config.upstream.branch,
    )
    for ref, head, moved in (
        (result.fork_ref, result.fork_head, result.fork_moved),
        (result.upstream_ref, result.upstream_head, result.upstream_moved),
    ):
        print(f"{ref}: {head[:10]}{'' if moved else ' (unchanged)'}")
    print(f"next: sluice plan --repo {args.dir} --fork {result.fork_ref} --upstream {result.upstream_ref}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    mirror = sub.add_parser("mirror", help="create or update a local mirror of fork trunk and upstream")
    mirror.add_argument("--dir", required=True, help="the mirror (a bare repository; created on first use)")
    mirror.add_argument("--fork-url", required=True, help="the fork: URL or absolute path")
    mirror.add_argument("--upstream-url", help="default: upstream.url from the configuration")
    mirror.add_argument("--fork-branch", help="default: fork.branch from the configuration")
    mirror.add_argument("--upstream-branch", help="default: upstream.branch from the configuration")
    mirror.add_argument("--config", help="a sluice.yml to take the defaults from")
    mirror.set_defaults(run=run)
