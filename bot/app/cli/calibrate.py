"""`sluice calibrate`: its options, and the model and the report it writes (the work: bot.flows.calibrate)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bot.app.cli.common import (
    add_repo_options,
    blamed_by_tiers,
    open_repo,
    output_path,
    progress,
    write_output,
)
from bot.core.errors import SluiceError
from bot.flows.calibrate import CalibrateOptions, calibrate, curve_svg, parse_date, report

DEFAULT_OUT = "risk-model.json"


def add_parser(sub: argparse._SubParsersAction) -> None:
    command = sub.add_parser(
        "calibrate", help="learn the fork's risk model from its past ingestions and their fixes"
    )
    add_repo_options(command)
    command.add_argument("--since", help="only ingestions from this date on (YYYY-MM-DD, UTC)")
    command.add_argument("--until", help="only history before this date: ingestions and their fixes")
    command.add_argument("--limit", type=int, help="only the newest N ingestions")
    command.add_argument(
        "--out", default=DEFAULT_OUT, help=f"where to write the model (default {DEFAULT_OUT})"
    )
    command.add_argument("--curve", help="also write the recall / bundled-share trade-off curve (an SVG)")
    command.add_argument(
        "--database",
        help="also count the culprits Sluice's tier runs blamed on the fork in this store (bisections, and "
        "one-commit PRs that failed): a SQLAlchemy URL, e.g. $SLUICE_DATABASE_URL; without it, git alone",
    )
    command.add_argument(
        "--cache", help="a JSON-lines file of mined rows to reuse and extend (keep it under /tmp)"
    )
    command.add_argument(
        "--fix-days",
        type=float,
        default=7.0,
        help="how long after an ingestion a fix on trunk counts (default 7)",
    )
    command.add_argument(
        "--bundled-share",
        type=float,
        default=0.7,
        help="the share bundled that recall is judged at (default 0.7)",
    )
    command.add_argument(
        "--source", help="how the model's provenance names the repository (default: its path)"
    )
    command.set_defaults(run=run)


def options_from(args: argparse.Namespace) -> CalibrateOptions:
    if args.limit is not None and args.limit < 1:
        raise SluiceError(
            f"--limit {args.limit} is not a positive count", "pass --limit N with N ≥ 1, or leave it out"
        )
    if not 0.0 < args.bundled_share < 1.0 or args.fix_days < 0:
        raise SluiceError(
            "--bundled-share must lie strictly between 0 and 1, --fix-days be ≥ 0",
            "e.g. --bundled-share 0.7 --fix-days 7",
        )
    since = parse_date(args.since, "--since") if args.since else None
    until = parse_date(args.until, "--until") if args.until else None
    if since is not None and until is not None and until <= since:
        raise SluiceError(f"--until {args.until} is not after --since {args.since}", "give a later --until")
    return CalibrateOptions(
        since=since,
        until=until,
        limit=args.limit,
        fix_days=args.fix_days,
        bundled_share=args.bundled_share,
        source=args.source or args.repo,
    )


def run(args: argparse.Namespace) -> int:
    """`sluice calibrate`: the model to --out, the report to stdout (or its JSON with --json). The culprits
    counted are git's, and those Sluice's tier runs blamed in the store `--database` names."""
    out = output_path(args.out, "--out")  # before minutes of mining
    curve = output_path(args.curve, "--curve") if args.curve else None
    repo, config = open_repo(args)  # bad refs fail before the store is opened
    blamed = blamed_by_tiers(args, repo, config)
    options = options_from(args)
    cache = Path(args.cache) if args.cache else None
    cal = calibrate(
        repo,
        config,
        fork=args.fork,
        upstream=args.upstream,
        options=options,
        cache=cache,
        progress=progress,
        blamed=blamed,
    )
    write_output(out, cal.model.to_json(), "--out")
    if curve is not None and (svg := curve_svg(cal, options)) is not None:
        write_output(curve, svg, "--curve")
    if args.json:
        sys.stdout.write(cal.model.to_json())
    else:
        print("\n".join(report(cal, options)))
        print(f"calibrate: model written to {args.out}")
    return 0
