"""What several `sluice` subcommands share: the repository options, progress lines on stderr."""

from __future__ import annotations

import argparse
import sys


def add_repo_options(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    parser.add_argument("--repo", required=required, help="path of a clone or mirror holding both refs")
    parser.add_argument("--fork", help="fork trunk: a ref or revision (default: fork.branch, i.e. main)")
    parser.add_argument(
        "--upstream", help="upstream: a ref or revision (default: upstream/<upstream.branch>)"
    )
    parser.add_argument(
        "--config", help="a sluice.yml (default: .github/sluice.yml at fork trunk, else defaults)"
    )
    parser.add_argument("--json", action="store_true", help="print the versioned JSON form")


def progress(message: str) -> None:
    print(f"sluice: {message}", file=sys.stderr, flush=True)
