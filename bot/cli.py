"""The `sluice` command line: plan, status, demo and config check."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import re
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

from rich.console import Console
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from bot import render
from bot.config import ConfigError, ResolverConfig, SluiceConfig, Strategy, check_config, load_config
from bot.engine import CONFIG_PATH, Snapshot, load_repo_config, take_snapshot
from bot.errors import SluiceError
from bot.gitio import GitRepo, validate_ref
from bot.mirror import Mirror
from bot.models import CommitInfo, PickReport, PickStatus, Plan, RiskKind
from bot.pick import Picker, PickRequest, learn_resolutions, run_pick
from bot.planning import build_plan, fork_key
from bot.store import Store, default_database_url

SLOW_AFTER_S = 2.0


class ProgressReporter(AbstractContextManager["ProgressReporter"]):
    """A spinner on a terminal; elsewhere, stage lines once a run has taken more than a moment."""

    def __init__(self) -> None:
        self.console = Console(stderr=True)
        self.started = time.monotonic()
        self._status = self.console.status("starting") if self.console.is_terminal else None

    def __enter__(self) -> ProgressReporter:
        if self._status is not None:
            self._status.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.__exit__(None, None, None)

    def __call__(self, message: str) -> None:
        if self._status is not None:
            self._status.update(message)
        elif time.monotonic() - self.started > SLOW_AFTER_S:
            print(f"sluice: {message} …", file=sys.stderr, flush=True)


def _open_repo(args: argparse.Namespace, *, fork: str | None = None) -> tuple[GitRepo, SluiceConfig]:
    repo = GitRepo(Path(args.repo))
    fork = fork or args.fork
    if args.config:
        return repo, load_config(Path(args.config))
    config = load_repo_config(repo, repo.resolve(fork), fork)
    if config.resolver.command:
        # Whoever can push to fork trunk writes that file: it must not choose what runs on this machine.
        print(
            f"sluice: ignoring resolver.command from {fork}:{CONFIG_PATH}; "
            "the operator's --config can name a resolver",
            file=sys.stderr,
        )
        config = config.model_copy(update={"resolver": ResolverConfig()})
    return repo, config


def _emit(plan: Plan, *, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(render.to_json(plan))
    else:
        render.print_renderable(render.plan_renderable(plan))


def open_store(url: str | None) -> Store:
    """The store, or a clear error that names the database without its password."""
    try:
        return Store.open(url)
    except (SQLAlchemyError, ValueError, OSError, sqlite3.Error) as exc:
        try:
            shown = make_url(url or default_database_url()).render_as_string(hide_password=True)
        except (SQLAlchemyError, ValueError):
            shown = "the given database URL"
        raise SluiceError(
            f"cannot open the store at {shown}: {type(exc).__name__}: {str(exc).splitlines()[0]}",
            "check --database or SLUICE_DATABASE_URL (sqlite:///PATH or postgresql+psycopg://USER@HOST/DB)",
        ) from exc


def _with_store(args: argparse.Namespace, run: Callable[[Store | None], Plan]) -> Plan:
    store = None if args.no_record else open_store(args.database)
    try:
        return run(store)
    finally:
        if store is not None:
            store.close()


def _plan(args: argparse.Namespace) -> Plan:
    repo, config = _open_repo(args)
    repo.resolve(args.upstream)  # bad refs fail before the store is opened

    def run(store: Store | None) -> Plan:
        with ProgressReporter() as progress:
            return build_plan(
                repo, config, fork=args.fork, upstream=args.upstream, store=store, progress=progress
            )

    return _with_store(args, run)


def cmd_plan(args: argparse.Namespace) -> int:
    _emit(_plan(args), as_json=args.json)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    repo, config = _open_repo(args)
    with ProgressReporter() as progress:
        snapshot = take_snapshot(
            repo, fork_ref=args.fork, upstream_ref=args.upstream, config=config, progress=progress
        )
    if args.json:
        sys.stdout.write(render.to_json(snapshot.status))
    else:
        render.print_renderable(render.status_table(snapshot.status))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Build a Triton-shaped sandbox (unless repos are given), plan it, dry-run a conflicting chain."""
    from bot.sandbox import DEMO, build_sandbox

    if not args.repo:
        root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="sluice-demo-"))
        root.mkdir(parents=True, exist_ok=True)
        with ProgressReporter() as progress:
            progress("building the sandbox")
            sandbox = build_sandbox(root / "sandbox", DEMO, progress=progress)
        print(f"Sandbox: upstream {sandbox.upstream}, fork {sandbox.fork}", file=sys.stderr)
        args.repo, args.fork, args.upstream = str(sandbox.fork), sandbox.fork_ref, sandbox.upstream_ref
        args.database = args.database or f"sqlite:///{root / 'sluice.db'}"
    plan = _plan(args)
    _emit(plan, as_json=args.json)
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
    repo, config = _open_repo(args)
    infos = {c.sha: c for c in repo.commits(plan.upstream_head, "--not", plan.fork_head, first_parent=True)}
    request = PickRequest(
        onto=plan.fork_head,
        commits=tuple(infos[c.sha] for c in chain.commits),
        strategy=config.strategy,
        dry_run=True,
        branch=None,
        branch_old=None,
        now=int(time.time()),
    )
    print(f"\n$ sluice pick --dry-run --onto {args.fork} " + " ".join(c.sha[:10] for c in chain.commits))
    render.print_renderable(render.pick_renderable(run_pick(Picker(repo, config), request)))


def cmd_config_check(args: argparse.Namespace) -> int:
    path = Path(args.file)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SluiceError(f"cannot read {path}: {exc}", "give the path of a .github/sluice.yml") from exc
    problems = check_config(text, filename=str(path))
    for problem in problems:
        print(problem.render(str(path)))
    if problems:
        return 2
    print(f"{path}: ok")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the webhook service; every missing setting is reported before anything starts."""
    from aiohttp import web

    from bot.service import GIL_SWITCH_INTERVAL_S, create_app
    from bot.settings import Settings

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    settings = Settings()
    problems = settings.problems()
    if problems:
        for problem in problems:
            print(f"sluice serve: {problem}", file=sys.stderr)
        return 2
    store = open_store(settings.database_url)
    try:
        web.run_app(
            create_app(settings, store=store, background=True), host=args.host, port=args.port, print=None
        )
    finally:
        store.close()
    return 0


def cmd_mirror(args: argparse.Namespace) -> int:
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


SHA_ARG = re.compile(r"^[0-9a-fA-F]{7,40}$")


def _upstream_commits(repo: GitRepo, snapshot: Snapshot, shas: Sequence[str]) -> tuple[CommitInfo, ...]:
    """The named upstream commits, refusing anything that is not a pending commit of the upstream stream."""
    stream = {sha for sha, _ in snapshot.stream}
    ingested, emergency = snapshot.ingested, snapshot.emergency
    infos = {c.sha: c for c in snapshot.candidates}
    chosen = []
    for arg in shas:
        sha = repo.resolve(_sha_arg(arg))
        if sha not in stream:
            raise SluiceError(f"{arg} is not an upstream commit", f"pick commits of {snapshot.upstream_ref}")
        if sha in ingested or sha in emergency:
            how = snapshot.recognised.get(sha)
            detail = f" ({how.method} in {how.fork_sha[:10]})" if how and how.fork_sha else " (an ancestor)"
            raise SluiceError(f"{arg} is already ingested{detail}; not picking it again")
        chosen.append(infos[sha])
    return tuple(chosen)


def cmd_pick(args: argparse.Namespace) -> int:
    repo, config = _open_repo(args, fork=args.onto)
    upstream = args.upstream or f"upstream/{config.upstream.branch}"
    snapshot = take_snapshot(repo, fork_ref=args.onto, upstream_ref=upstream, config=config)
    commits = _upstream_commits(repo, snapshot, args.shas)
    branch = args.branch or f"sluice/pick-{commits[0].sha[:10]}"
    validate_ref(branch)
    existing = repo.resolve_optional(f"refs/heads/{branch}")
    if existing and not args.force and not args.dry_run:
        raise SluiceError(f"branch {branch} exists", "pass --force to replace it, or another --branch")
    store = None if args.no_record else open_store(args.database)
    try:
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
            now=int(time.time()),
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


def cmd_remember(args: argparse.Namespace) -> int:
    """Learn how a human resolved a pick's conflicts, so the same conflicts resolve by themselves later."""
    repo, config = _open_repo(args)
    upstream_sha, resolved_sha = (repo.resolve(_sha_arg(a)) for a in (args.upstream_commit, args.resolution))
    upstream, resolved = (repo.commits(sha, "-1")[-1] for sha in (upstream_sha, resolved_sha))
    if not resolved.parents or not upstream.parents:
        raise SluiceError("both commits need a parent", "give the pick commit a human made on fork trunk")
    learned = learn_resolutions(Picker(repo, config), upstream, resolved)
    store = open_store(args.database)
    try:
        key, now = fork_key(config, repo, args.fork), dt.datetime.now(dt.UTC)
        for conflict, (path, lines) in sorted(learned.items()):
            store.remember_resolution(
                key,
                conflict,
                lines,
                path=path,
                recorded_by=args.by,
                upstream_sha=upstream_sha,
                fork_sha=resolved_sha,
                at=now,
            )
    finally:
        store.close()
    print(f"remembered {len(learned)} resolved conflict(s) from {resolved_sha[:10]}")
    return 0


def _sha_arg(arg: str) -> str:
    if not SHA_ARG.match(arg):
        raise SluiceError(f"not a commit SHA: {arg!r}", "give 7 to 40 hex digits")
    return arg.lower()


SCHEMAS: dict[str, type[Plan] | type[PickReport]] = {"plan": Plan, "pick": PickReport}


def cmd_schema(args: argparse.Namespace) -> int:
    schema = SCHEMAS[args.output].model_json_schema(mode="serialization", by_alias=True)
    sys.stdout.write(json.dumps(schema, indent=2, sort_keys=True) + "\n")
    return 0


def _add_repo_options(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    parser.add_argument("--repo", required=required, help="path of a clone or mirror holding both refs")
    parser.add_argument("--fork", required=required, help="fork trunk ref, e.g. main")
    parser.add_argument("--upstream", required=required, help="upstream ref, e.g. upstream/main")
    parser.add_argument(
        "--config", help="a sluice.yml (default: .github/sluice.yml at fork trunk, else defaults)"
    )
    parser.add_argument("--json", action="store_true", help="print the versioned JSON form")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="sluice", description="Keep a long-lived fork flowing with its upstream."
    )
    sub = top.add_subparsers(dest="command", required=True)
    plan = sub.add_parser(
        "plan", help="split pending upstream commits into low-risk bundles and risky chains"
    )
    _add_repo_options(plan)
    plan.add_argument("--database", help="SQLAlchemy URL (default: $SLUICE_DATABASE_URL, else a SQLite file)")
    plan.add_argument(
        "--no-record", action="store_true", help="do not store the plan, chains or dispositions"
    )
    plan.set_defaults(run=cmd_plan)
    status = sub.add_parser("status", help="ingestion tip, Days Behind Upstream, Backlog Commits")
    _add_repo_options(status)
    status.set_defaults(run=cmd_status)
    demo = sub.add_parser("demo", help="plan a generated Triton-shaped sandbox (or the repos given)")
    _add_repo_options(demo, required=False)
    demo.add_argument("--dir", help="where to build the sandbox (default: a new temporary directory)")
    demo.add_argument("--database", help="SQLAlchemy URL (default: a SQLite file beside the sandbox)")
    demo.add_argument("--no-record", action="store_true", help=argparse.SUPPRESS)
    demo.set_defaults(run=cmd_demo)
    config = sub.add_parser("config", help="repository configuration")
    config_sub = config.add_subparsers(dest="config_command", required=True)
    check = config_sub.add_parser(
        "check", help="report every problem in a sluice.yml with its field and line"
    )
    check.add_argument("file")
    check.set_defaults(run=cmd_config_check)
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
    pick.set_defaults(run=cmd_pick)
    remember = sub.add_parser("remember", help="remember how a human resolved a pick's conflicts")
    remember.add_argument("--repo", required=True, help="path of a clone or mirror")
    remember.add_argument("--fork", required=True, help="fork trunk ref (names the fork in the store)")
    remember.add_argument("--upstream-commit", required=True, help="the upstream commit that was picked")
    remember.add_argument("--resolution", required=True, help="the fork commit with the human's resolution")
    remember.add_argument("--by", required=True, help="who resolved it (GitHub login)")
    remember.add_argument("--config", help="a sluice.yml (default: .github/sluice.yml at --fork)")
    remember.add_argument(
        "--database", help="SQLAlchemy URL (default: $SLUICE_DATABASE_URL, else a SQLite file)"
    )
    remember.set_defaults(run=cmd_remember)
    serve = sub.add_parser(
        "serve", help="run the GitHub App webhook service (settings from SLUICE_* variables)"
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8080, help="port to listen on (default 8080)")
    serve.set_defaults(run=cmd_serve)
    mirror = sub.add_parser("mirror", help="create or update a local mirror of fork trunk and upstream")
    mirror.add_argument("--dir", required=True, help="the mirror (a bare repository; created on first use)")
    mirror.add_argument("--fork-url", required=True, help="the fork: URL or absolute path")
    mirror.add_argument("--upstream-url", help="default: upstream.url from the configuration")
    mirror.add_argument("--fork-branch", help="default: fork.branch from the configuration")
    mirror.add_argument("--upstream-branch", help="default: upstream.branch from the configuration")
    mirror.add_argument("--config", help="a sluice.yml to take the defaults from")
    mirror.set_defaults(run=cmd_mirror)
    schema = sub.add_parser(
        "schema", help="print the JSON Schema of `sluice plan --json` or `sluice pick --json`"
    )
    schema.add_argument("output", nargs="?", choices=sorted(SCHEMAS), default="plan")
    schema.set_defaults(run=cmd_schema)
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


if __name__ == "__main__":
    sys.exit(main())
