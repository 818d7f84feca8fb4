"""`sluice pick`: apply upstream commits onto a ref, resolving only mechanical conflicts."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from bot.app.cli.common import commit_arg, open_repo, open_store
from bot.app.clock import utc_now
from bot.core import render
from bot.core.config import Strategy
from bot.core.errors import BadInput, SluiceError
from bot.core.models import CommitInfo, PickStatus
from bot.core.refs import ref_problem
from bot.flows.engine import Snapshot, take_snapshot
from bot.flows.pick import Picker, PickRequest, check_branch, run_pick
from bot.flows.planning import fork_key
from bot.git.facts import CommitFacts
from bot.git.repo import GitRepo


def _new_branch_name(branch: str) -> None:
    """`--branch` names a branch to write: refused as such (not with what a ref to read may be)."""
    problem = ref_problem(branch)
    if problem is not None:
        raise BadInput(
            f"--branch {branch[:80]!a} is not a valid git branch name: {problem}",
            "give a new branch's name, such as sluice/pick-fix",
        )


def _upstream_commits(repo: GitRepo, snapshot: Snapshot, shas: Sequence[str]) -> tuple[CommitInfo, ...]:
    """The named upstream commits, refusing anything that is not a pending commit of the upstream stream."""
    stream = {sha for sha, _ in snapshot.stream}
    ingested, emergency = snapshot.ingested, snapshot.emergency
    infos = {c.sha: c for c in snapshot.candidates}
    chosen = []
    for arg in shas:
        sha = commit_arg(repo, arg)
        if sha not in stream:
            raise SluiceError(f"{arg} is not an upstream commit", f"pick commits of {snapshot.upstream_ref}")
        if sha in ingested or sha in emergency:
            how = _how_ingested(snapshot, sha)
            raise SluiceError(
                f"{arg} is already ingested{how}; not picking it again", "name a commit `sluice plan` lists"
            )
        chosen.append(infos[sha])
    return tuple(chosen)


def _how_ingested(snapshot: Snapshot, sha: str) -> str:
    how = snapshot.recognised.get(sha)
    if how is None:
        return " (an ancestor)"
    if how.fork_sha:
        return f" ({how.method} in {how.fork_sha[:10]})"
    return f" ({how.method}: {how.detail})"


def run(args: argparse.Namespace) -> int:
    repo, config = open_repo(args, fork_option="--onto")  # bad refs fail before the store is opened
    store = None if args.no_record else open_store(args.database)
    try:
        facts = CommitFacts(repo, store)
        snapshot = take_snapshot(
            repo, fork_ref=args.onto, upstream_ref=args.upstream, config=config, facts=facts
        )
        commits = _upstream_commits(repo, snapshot, args.shas)
        branch = args.branch or f"sluice/pick-{commits[0].sha[:10]}"
        _new_branch_name(branch)
        check_branch(repo, branch, onto=args.onto, trunk=config.fork.branch)
        existing = repo.resolve_optional(f"refs/heads/{branch}")
        if existing and not args.force and not args.dry_run:
            raise SluiceError(f"branch {branch} exists", "pass --force to replace it, or another --branch")
        key = fork_key(config, repo, config.fork.branch)  # --onto may be any base; memory is per fork
        recall = (lambda keys: store.resolutions(key, keys)) if store else (lambda keys: {})
        picker = Picker(repo, config, recall=recall)
        request = PickRequest(
            onto=snapshot.fork_head,
            commits=commits,
            strategy=Strategy(args.strategy or config.strategy),
            dry_run=args.dry_run,
            branch=branch,
            branch_old=existing,
            now=utc_now(),
        )
        report = run_pick(picker, request)
    finally:
        if store is not None:
            store.close()
    if args.json:
        sys.stdout.write(render.pick_json(report))
    else:
        render.print_renderable(render.pick_renderable(report))
    return 1 if any(c.status == PickStatus.NEEDS_HUMAN for c in report.commits) else 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    pick = sub.add_parser(
        "pick", help="apply upstream commits onto a ref, resolving only mechanical conflicts"
    )
    pick.add_argument("--repo", required=True, help="path of a clone or mirror holding both refs")
    pick.add_argument("--onto", required=True, help="the ref to build on, e.g. main")
    pick.add_argument("--upstream", help="upstream ref (default: upstream/<upstream.branch>)")
    pick.add_argument(
        "--strategy", choices=[s.value for s in Strategy], help="default: strategy from the config"
    )
    pick.add_argument("--dry-run", action="store_true", help="report only; write no ref")
    pick.add_argument("--branch", help="branch to write (default: sluice/pick-<first sha>)")
    pick.add_argument("--force", action="store_true", help="replace an existing --branch")
    pick.add_argument("--config", help="a sluice.yml (default: .github/sluice.yml at --onto, else defaults)")
    pick.add_argument("--json", action="store_true", help="print the versioned JSON report")
    pick.add_argument("--database", help="store with remembered resolutions (default: $SLUICE_DATABASE_URL)")
    pick.add_argument("--no-record", action="store_true", help="do not consult remembered resolutions")
    pick.add_argument("shas", nargs="+", metavar="UPSTREAM_SHA")
    pick.set_defaults(run=run)
