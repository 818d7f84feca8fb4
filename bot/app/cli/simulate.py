"""`sluice simulate`: its options and inputs, and the figures it prints (the work: bot.flows.simulate)."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from bot.app.cli.common import (
    add_repo_options,
    blamed_by_tiers,
    open_repo,
    output_path,
    progress,
    write_output,
)
from bot.core import days_chart
from bot.core.bisect import Budget
from bot.core.errors import BadInput
from bot.core.risk_model import RiskModel
from bot.core.simulation import Batching, SimOptions, simulate
from bot.flows import calibrate
from bot.flows.risk_files import default_model, read_model
from bot.flows.simulate import as_json, headline, report, sim_commits

SHA_LINE = re.compile(r"^[0-9a-f]{40}\Z")


def read_culprits(path: Path) -> set[str]:
    """One full upstream SHA a line; blank lines and `#` comments are ignored."""
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise BadInput(f"cannot read --culprits {path}: {exc.strerror}", "give a readable file") from None
    found = set()
    for number, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip().lower()
        if not text:
            continue
        if not SHA_LINE.match(text):
            raise BadInput(
                f"{path}:{number}: {line.strip()[:50]!r} is not a 40-hex upstream SHA",
                "write one full upstream commit SHA per line",
            )
        found.add(text)
    return found


def choose_model(name: str) -> RiskModel | None:
    if name == "none":
        return None
    if name == "default":
        return default_model()
    return read_model(Path(name))


def add_parser(sub: argparse._SubParsersAction) -> None:
    command = sub.add_parser(
        "simulate", help="replay a period of upstream through batching and bisection: runs, Days Behind"
    )
    add_repo_options(command)
    command.add_argument("--from", dest="since", required=True, help="first day replayed (YYYY-MM-DD, UTC)")
    command.add_argument("--until", required=True, help="replay upstream commits before this date")
    command.add_argument(
        "--culprits", help="upstream SHAs the tier fails on, one a line (default: mined as calibrate does)"
    )
    command.add_argument(
        "--database",
        help="mine the culprits Sluice's tier runs blamed in this store too, as calibrate --database does",
    )
    command.add_argument("--runners", type=int, default=1, help="tier runs side by side (default 1)")
    command.add_argument(
        "--strategy",
        dest="batching",  # not the configuration's `strategy`, which `pick --strategy` overrides
        choices=[s.value for s in Batching],
        default=Batching.SLUICE.value,
        help="(default sluice)",
    )
    command.add_argument(
        "--max-commits", type=int, default=20, help="most commits per candidate (default 20)"
    )
    command.add_argument(
        "--max-wait-hours", type=float, default=24.0, help="how long a short candidate waits (default 24)"
    )
    command.add_argument(
        "--budget-runs", type=int, default=40, help="runs one bisection may spend (default 40)"
    )
    command.add_argument("--model", default="default", help="risk model: default, none, or a model file")
    command.add_argument("--svg", help="also write Days Behind Upstream over the period as an SVG")
    command.set_defaults(run=run)


def options_from(args: argparse.Namespace) -> tuple[SimOptions, int, int]:
    since = calibrate.parse_date(args.since, "--from")
    until = calibrate.parse_date(args.until, "--until")
    if until <= since:
        raise BadInput(f"--until {args.until} is not after --from {args.since}", "give a later --until")
    for name, value in (("--runners", args.runners), ("--max-commits", args.max_commits)):
        if value < 1:
            raise BadInput(f"{name} {value} is not a positive count", f"pass {name} N with N ≥ 1")
    if args.budget_runs < 0 or args.max_wait_hours < 0:
        raise BadInput("--budget-runs and --max-wait-hours cannot be negative", "e.g. --budget-runs 40")
    options = SimOptions(
        strategy=Batching(args.batching),
        runners=args.runners,
        max_commits=args.max_commits,
        max_wait_hours=args.max_wait_hours,
        budget=Budget(max_runs=args.budget_runs),
        start=since,
        end=until,
    )
    return options, since, until


def run(args: argparse.Namespace) -> int:
    """`sluice simulate`: the figures (or their JSON) on stdout, progress on stderr. The culprits are
    `--culprits`, else mined as calibrate mines them, with those Sluice's own tier runs blamed in the store
    `--database` names."""
    svg = output_path(args.svg, "--svg") if args.svg else None  # before minutes of mining
    repo, config = open_repo(args)  # bad refs fail before the store is opened
    if args.culprits and args.database:
        raise BadInput("--culprits and --database both say which commits broke the fork", "give one of them")
    blamed = blamed_by_tiers(args, repo, config)
    options, since, until = options_from(args)
    model = choose_model(args.model)
    if args.culprits:
        culprits = read_culprits(Path(args.culprits))
    else:
        progress("mining culprits from the fork's past ingestions (as sluice calibrate does)")
        mined = calibrate.CalibrateOptions(until=until)
        culprits = set(
            calibrate.mined_culprits(
                repo, config, fork=args.fork, upstream=args.upstream, options=mined, blamed=blamed
            )
        )
    commits = sim_commits(
        repo,
        config,
        fork=args.fork,
        upstream=args.upstream,
        since=since,
        until=until,
        model=model,
        progress=progress,
    )
    result = simulate(commits, culprits, options)
    if svg is not None:
        title = f"Days Behind Upstream, {args.since} .. {args.until}"
        write_output(
            svg, days_chart.days_svg(result.samples, title=title, subtitle=headline(result)), "--svg"
        )
    if args.json:
        print(json.dumps(as_json(result), indent=2, sort_keys=True))
    else:
        print("\n".join(report(result)))
    return 0
