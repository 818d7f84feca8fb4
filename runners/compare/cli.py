"""`python -m runners compare`: the command line, its inputs, the verdicts, the exit code."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from bot.core.config import PerformanceConfig
from bot.core.errors import SluiceError
from runners.compare.ab import DEFAULT_ROUNDS, Arm, run_interleaved
from runners.compare.inputs import load_performance_section, load_thresholds, read_report
from runners.compare.model import EXIT_BAD_INPUT, EXIT_REFUSED, CompareInputError, ContextRefused
from runners.compare.render import refusal_json, render_markdown, render_refusal, to_json
from runners.compare.sides import Side
from runners.compare.verdicts import compare, exit_code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m runners compare",
        description="Noise-aware verdicts on benchmark samples (docs/compare.md). Exit codes: 0 fine, "
        "1 a critical kernel regressed, 2 bad input, 3 refused (different contexts).",
    )
    parser.add_argument("reports", nargs="*", metavar="REPORT", help="BASELINE.json CANDIDATE.json")
    parser.add_argument(
        "--ab",
        nargs=2,
        metavar=("BASELINE_PYTHON", "CANDIDATE_PYTHON"),
        help="run the benchmarks with both interpreters, interleaved, then compare",
    )
    parser.add_argument(
        "--rounds", type=int, default=DEFAULT_ROUNDS, metavar="N", help="A/B rounds (default: %(default)s)"
    )
    parser.add_argument("--out-dir", type=Path, metavar="DIR", help="keep the A/B rounds' reports here")
    parser.add_argument(
        "--thresholds", type=Path, metavar="FILE", help="YAML with the keys of the `performance:` section"
    )
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help=".github/sluice.yml: its `performance:` section; A/B runs are passed it too",
    )
    parser.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    parser.add_argument("--force-context", action="store_true", help="compare different contexts")
    parser.add_argument("--seed", type=int, default=0, metavar="N", help="of the bootstrap (default: 0)")
    return parser


def main(argv: list[str]) -> int:
    """`python -m runners compare …`; returns the exit code."""
    try:
        args = _parser().parse_args(argv)
        _check_arguments(args)
    except SystemExit as exit_:  # argparse: --help (0) or a usage error (2)
        return exit_.code if isinstance(exit_.code, int) else EXIT_BAD_INPUT
    try:
        config = _performance_config(args)
        baseline, candidate = _sides(args)
        comparison = compare(baseline, candidate, config, seed=args.seed, force_context=args.force_context)
    except ContextRefused as refusal:
        print(json.dumps(refusal_json(refusal), indent=2) if args.json else render_refusal(refusal))
        print(f"compare: refused: {refusal}", file=sys.stderr)
        return EXIT_REFUSED
    except SluiceError as err:
        print(f"compare: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    sys.stdout.write(
        json.dumps(to_json(comparison), indent=2) + "\n" if args.json else render_markdown(comparison)
    )
    return exit_code(comparison)


def _check_arguments(args: argparse.Namespace) -> None:
    usage = _parser()
    if args.ab and args.reports:
        usage.error("give either two reports or --ab with two interpreters, not both")
    if not args.ab and len(args.reports) != 2:
        usage.error("expected BASELINE.json CANDIDATE.json (or --ab BASELINE_PYTHON CANDIDATE_PYTHON)")
    if args.rounds < 1:
        usage.error("--rounds must be at least 1")


def _performance_config(args: argparse.Namespace) -> PerformanceConfig:
    if args.thresholds:
        return load_thresholds(args.thresholds)
    if args.config:
        return load_performance_section(args.config)
    return PerformanceConfig()


def _sides(args: argparse.Namespace) -> tuple[Side, Side]:
    if not args.ab:
        baseline = read_report(Path(args.reports[0]), name="baseline")
        candidate = read_report(Path(args.reports[1]), name="candidate")
        return Side.from_reports([baseline], name="baseline"), Side.from_reports(
            [candidate], name="candidate"
        )
    pythons = dict(zip(Arm, args.ab, strict=True))
    if args.out_dir:
        try:
            args.out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise CompareInputError(f"--out-dir {args.out_dir}: {err.strerror}") from None
        sides = run_interleaved(pythons, rounds=args.rounds, out_dir=args.out_dir, config=args.config)
    else:
        with tempfile.TemporaryDirectory(prefix="sluice-ab-") as tmp:
            sides = run_interleaved(pythons, rounds=args.rounds, out_dir=Path(tmp), config=args.config)
    return sides[Arm.BASELINE], sides[Arm.CANDIDATE]
