"""`python -m runners`: `run` a tier, `compare` two sets of benchmarks, print the report's `schema`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bot.core.tiers import ONE_SUITE, Level, Selection, decode_selection

DESCRIPTION = "Sluice's tier runner: runs a tier's suites on a CI machine and writes the tier report."


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["compare"]:  # its own parser, in runners.compare; imported only when used
        from runners import compare

        return compare.main(args[1:])
    parsed = _parser().parse_args(args)
    handler = getattr(parsed, "handler", None)
    if handler is None:
        _parser().print_help(sys.stderr)
        return 2
    code: int = handler(parsed)
    return code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m runners", description=DESCRIPTION)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    run = commands.add_parser("run", help="run a tier's suites and write its report")
    run.add_argument("--tier", required=True, choices=[t.value for t in Level], help="the tier to run")
    run.add_argument("--out", required=True, type=Path, help="where to write the report (JSON)")
    run.add_argument(
        "--config", type=Path, help="the repo configuration (default: .github/sluice.yml when present)"
    )
    run.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="SUITE",
        help="run only this suite of the tier, by name or built-in kind (repeatable)",
    )
    run.add_argument(
        "--baseline-report",
        type=Path,
        metavar="FILE",
        help="a previous report: a suite that runs fewer tests than it did there fails",
    )
    run.add_argument("--head-sha", help="the commit under test (default: $GITHUB_SHA, else git HEAD)")
    run.add_argument("--baseline-sha", help="the commit the benchmarks compare against")
    run.add_argument("--upstream-range", metavar="A..B", help="the upstream commits this ingestion brings")
    run.add_argument("--ingestion-id", help="the ingestion this run validates")
    run.add_argument(
        "--selection",
        type=_selection,
        default=int(Selection.FULL),
        help="0: an ingestion's suites, with the extensions' (default); 1: a fork PR's critical subset; "
        f"{ONE_SUITE}+i: only the tier's suite i (0-based, in the config's order)",
    )
    run.set_defaults(handler=_run)

    commands.add_parser(
        "compare",
        help="compare benchmarks: python -m runners compare --help",
        add_help=False,
    )
    schema = commands.add_parser("schema", help="print the report's JSON Schema")
    schema.set_defaults(handler=_schema)
    return parser


def _selection(text: str) -> int:
    """`--selection`: a non-negative integer (see bot.core.tiers.selection_code)."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a selection (0, 1 or {ONE_SUITE}+i)")
    return int(text)


def _run(args: argparse.Namespace) -> int:
    from runners import run

    selection, suite = decode_selection(args.selection)
    request = run.RunArgs(
        tier=Level(args.tier),
        out=args.out,
        config=args.config,
        only=tuple(args.only),
        baseline_report=args.baseline_report,
        head_sha=args.head_sha,
        baseline_sha=args.baseline_sha,
        upstream_range=args.upstream_range,
        ingestion_id=args.ingestion_id,
        selection=selection,
        suite=suite,
    )
    return run.main(request)


def _schema(args: argparse.Namespace) -> int:
    from runners.report import json_schema

    sys.stdout.write(json_schema())
    return 0
