"""Fit Sluice's shipped default risk model on a public Triton fork's history and print its calibration report.

    python benchmarks/make_default_model.py PATH [--fork main] [--upstream upstream] [--until 2025-10-01]
        [--since DATE] [--limit N] [--out bot/data/default_risk_model.json] [--curve docs/risk-tradeoff.svg]

PATH is a clone holding the fork trunk and upstream (for the shipped model: Intel's XPU Triton fork, `main`,
with upstream Triton as `upstream`). It runs exactly `sluice calibrate`, in a `--shared` clone in a temporary
directory (the planner's probe objects go there; PATH is only read). The planner's features per ingestion
are cached in --cache (under /tmp: mined data is never committed), so a second run only fits.
With no PATH it prints "skipped: no repository given" and exits 0.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.app.cli import main as sluice  # noqa: E402

SOURCE = "intel/intel-xpu-backend-for-triton main, upstream triton-lang/triton (public history)"
CACHE = Path(tempfile.gettempdir()) / "sluice-calibrate" / "intel-features.jsonl"


def arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("path", nargs="?", type=Path, help="a clone of the fork with upstream (only read)")
    parser.add_argument("--fork", default="main", help="fork trunk (default: main)")
    parser.add_argument("--upstream", default="upstream", help="upstream (default: upstream)")
    parser.add_argument(
        "--until", default="2025-10-01", help="history before this date (default: 2025-10-01)"
    )
    parser.add_argument("--since", help="ingestions from this date on (default: all)")
    parser.add_argument("--limit", help="only the newest N ingestions")
    parser.add_argument("--cache", type=Path, default=CACHE, help=f"mined features (default: {CACHE})")
    parser.add_argument("--source", default=SOURCE, help="how the provenance names the history")
    parser.add_argument("--out", type=Path, default=ROOT / "bot" / "data" / "default_risk_model.json")
    parser.add_argument("--curve", type=Path, default=ROOT / "docs" / "risk-tradeoff.svg")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = arguments(argv)
    if args.path is None:
        print("skipped: no repository given")
        return 0
    optional = [
        *(["--since", args.since] if args.since else []),
        *(["--limit", args.limit] if args.limit else []),
    ]
    with tempfile.TemporaryDirectory(prefix="sluice-default-model-") as tmp:
        clone = Path(tmp) / "clone.git"
        subprocess.run(
            ["git", "clone", "--bare", "--shared", "--quiet", "--", str(args.path), str(clone)], check=True
        )
        return sluice(
            [
                "calibrate",
                *("--repo", str(clone), "--fork", args.fork, "--upstream", args.upstream),
                *("--until", args.until, *optional),
                *("--cache", str(args.cache), "--source", args.source),
                *("--out", str(args.out), "--curve", str(args.curve)),
            ]
        )


if __name__ == "__main__":
    sys.exit(main())
