"""`sluice demo`: Sluice's whole loop on a generated sandbox, or a plan of it (`--plan-only`, `--repo`)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from bot.app.cli.common import ProgressReporter, add_repo_options, open_repo
from bot.app.cli.plan import emit, plan_from
from bot.app.clock import utc_now
from bot.core import render
from bot.core.errors import BadInput
from bot.core.models import Plan, RiskKind
from bot.flows.pick import Picker, PickRequest, run_pick

if TYPE_CHECKING:
    from bot.demo import Sandbox


def run(args: argparse.Namespace) -> int:
    """The whole loop on a generated sandbox (`--plan-only`: plan it and dry-run a conflicting chain; with
    `--repo` those repositories are planned instead)."""
    if args.repo:
        return _demo_run(args)
    if args.full and not args.plan_only:
        raise BadInput(
            "--full lists a plan's commits", "give it with --plan-only (the whole loop has no plan table)"
        )
    if args.dir:
        return _demo_in(Path(args.dir), args)
    # Nothing of a throwaway sandbox outlives the run; --dir keeps one to look at.
    with tempfile.TemporaryDirectory(prefix="sluice-demo-") as tmp:
        return _demo_in(Path(tmp), args)


def _demo_in(root: Path, args: argparse.Namespace) -> int:
    from bot.demo import CULPRIT_SUBJECT, DEMO, build_sandbox

    root.mkdir(parents=True, exist_ok=True)
    with ProgressReporter() as progress:
        progress("building the sandbox")
        sandbox = build_sandbox(root / "sandbox", DEMO, progress=progress)
    kept = "" if args.dir else " (removed at exit; --dir DIR keeps it)"
    print(f"Sandbox: upstream {sandbox.upstream}, fork {sandbox.fork}{kept}", file=sys.stderr)
    for sha in sandbox.manifest.culprits:
        print(
            f"Planted culprit: {sha[:10]} {CULPRIT_SUBJECT}: clean and low-risk, it breaks L1's TLX tests "
            "(ci/validate.sh l1 in a clone of the fork runs L1)",
            file=sys.stderr,
        )
    store_kept = bool(args.dir or args.database)  # else the store is in the directory removed at exit
    args.database = args.database or f"sqlite:///{root / 'sluice.db'}"
    if not args.plan_only:
        from bot.app import demo_loop

        try:
            return _demo_loop(sandbox, root, args, store_kept=store_kept)
        except demo_loop.NeedsCheckout as exc:
            print(f"sluice demo: the full loop needs a checkout: {exc}; planning only", file=sys.stderr)
    args.repo, args.fork, args.upstream = str(sandbox.fork), sandbox.fork_ref, sandbox.upstream_ref
    return _demo_run(args)


def _demo_loop(sandbox: Sandbox, root: Path, args: argparse.Namespace, *, store_kept: bool) -> int:
    """Sandbox → simulator → the App with real workers → PRs, tiers, gate, merges; then the summary, which
    points at the store only when it outlives the run (`store_kept`)."""
    from bot.app import demo_loop

    def say(line: str) -> None:
        print(f"sluice demo: {line}", file=sys.stderr, flush=True)

    result = demo_loop.run_demo(
        sandbox, root=root, database_url=args.database, timeout_s=args.timeout, say=say
    )
    result = dataclasses.replace(result, kept=bool(args.dir), store_kept=store_kept)
    if args.json:
        print(json.dumps(result.as_json(), indent=2, sort_keys=True))
    else:
        sys.stdout.write(demo_loop.summary_text(result))
    return 1 if result.pending else 0


def _demo_run(args: argparse.Namespace) -> int:
    plan, config = plan_from(args)
    emit(plan, config, as_json=args.json, full=args.full)
    if not args.json:
        _demo_pick(args, plan)
    return 0


def _demo_pick(args: argparse.Namespace, plan: Plan) -> None:
    """Show what `sluice pick --dry-run` says of the first chain that meets a conflict."""
    conflict = {RiskKind.PREDICTED_CONFLICT, RiskKind.MECHANICAL_CONFLICT}
    chain = next(
        (c for c in plan.chains if any(r.kind in conflict for p in c.commits for r in p.reasons)), None
    )
    if chain is None:
        return
    repo, config = open_repo(args)
    infos = {c.sha: c for c in repo.commits(plan.upstream_head, "--not", plan.fork_head, first_parent=True)}
    request = PickRequest(
        onto=plan.fork_head,
        commits=tuple(infos[c.sha] for c in chain.commits),
        strategy=config.strategy,
        dry_run=True,
        branch=None,
        branch_old=None,
        now=utc_now(),
    )
    print(f"\n$ sluice pick --dry-run --onto {args.fork} " + " ".join(c.sha[:10] for c in chain.commits))
    render.print_renderable(render.pick_renderable(run_pick(Picker(repo, config), request)))


def _seconds(text: str) -> float:
    """A positive number of seconds (argparse reports anything else as a bad value)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"a positive number of seconds, not {text!r}")
    return value


def add_parser(sub: argparse._SubParsersAction) -> None:
    demo = sub.add_parser(
        "demo",
        help="run Sluice's whole loop on a generated Triton-shaped sandbox against the GitHub simulator",
    )
    add_repo_options(demo, required=False)
    demo.add_argument("--dir", help="where to build the sandbox (default: a new temporary directory)")
    demo.add_argument("--database", help="SQLAlchemy URL (default: a SQLite file beside the sandbox)")
    demo.add_argument(
        "--plan-only", action="store_true", help="only plan the sandbox and dry-run a pick (as with --repo)"
    )
    demo.add_argument(
        "--timeout", type=_seconds, default=900.0, help="seconds the whole loop may take (default 900)"
    )
    demo.add_argument("--full", action="store_true", help="with --plan-only: after the summary, every commit")
    demo.set_defaults(run=run, no_record=False)  # its plans are recorded, as `sluice plan` records them
