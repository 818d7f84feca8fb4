"""The `sluice` command line: the parser, from each command module's `add_parser`, and `main`."""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
from collections.abc import Sequence

from bot.app.cli import (
    audit,
    calibrate,
    config_check,
    database,
    demo,
    hold,
    mirror,
    pick,
    plan,
    remember,
    schema,
    serve,
    simulate,
    status,
)
from bot.core.config import ConfigError
from bot.core.errors import SluiceError


def _version() -> str:
    try:
        return importlib.metadata.version("sluice")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="sluice", description="Keep a long-lived fork flowing with its upstream."
    )
    top.add_argument("--version", action="version", version=f"sluice {_version()}")
    sub = top.add_subparsers(dest="command", required=True)
    for command in (
        plan,
        status,
        hold,
        demo,
        config_check,
        pick,
        remember,
        serve,
        mirror,
        calibrate,
        simulate,
        schema,
        audit,
        database,
    ):
        command.add_parser(sub)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.run(args))
    except ConfigError as exc:
        print(f"sluice: invalid configuration\n{exc}", file=sys.stderr)
        return 2
    except SluiceError as exc:
        print(f"sluice: error: {exc}", file=sys.stderr)
        return exc.exit_code
