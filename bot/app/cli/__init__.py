"""The `sluice` command line: its parser and `main`, and the commands with no module of their own in this
package (plan, status, skip and defer, demo, config check, pick, remember, serve, mirror, schema, audit)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import importlib.metadata
import json
import logging
import os
import re
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from bot.app.cli import calibrate, database, simulate
from bot.app.cli.common import add_repo_options
from bot.app.clock import utc_now
from bot.config_file import load_config
from bot.core import render
from bot.core.audit import render as render_audit
from bot.core.bisect_pr import Blame
from bot.core.config import (
    MERGE_HOLDS_NOTHING,
    ConfigError,
    ResolverConfig,
    SluiceConfig,
    Strategy,
    check_config,
)
from bot.core.errors import BadInput, GitError, NotFound, SluiceError
from bot.core.models import CommitInfo, Disposition, DispositionRecord, PickReport, PickStatus, Plan, RiskKind
from bot.core.recognise import unmatched_picks
from bot.core.refs import ref_problem, validate_rev
from bot.db.bisections import Bisections
from bot.db.gates import GateStore
from bot.db.store import DEFAULT_URL_ENV, Store, default_sqlite_path
from bot.db.tier_runs import TierRuns
from bot.flows.engine import CONFIG_PATH, Snapshot, load_repo_config, take_snapshot
from bot.flows.pick import Picker, PickRequest, check_branch, learn_resolutions, run_pick
from bot.flows.planning import build_plan, fork_key, held_by_people, with_dispositions
from bot.flows.swapped import check_not_swapped, merge_habit, strategy_note
from bot.git.facts import CommitFacts
from bot.git.mirror import Mirror
from bot.git.repo import GitRepo

if TYPE_CHECKING:
    from aiohttp import web

    from bot.app.settings import Settings
    from bot.demo import Sandbox

SLOW_AFTER_S = 2.0
log = logging.getLogger("sluice.serve")


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


def _open_repo(args: argparse.Namespace, *, fork_option: str = "--fork") -> tuple[GitRepo, SluiceConfig]:
    """The repository and its configuration, with the refs left to their defaults filled in and checked."""
    repo = GitRepo(Path(args.repo))
    operator = load_config(Path(args.config)) if args.config else None
    attr = fork_option.removeprefix("--")
    fork_sha = _resolve_option(repo, args, attr, default=(operator or SluiceConfig()).fork.branch)
    fork = getattr(args, attr)
    config = operator or _fork_config(repo, fork_sha, fork)
    if hasattr(args, "upstream"):
        _resolve_option(repo, args, "upstream", default=f"upstream/{config.upstream.branch}")
        options = (fork_option, "--upstream")
        check_not_swapped(repo, fork=fork, upstream=args.upstream, config=config, options=options)
        chosen = getattr(args, "strategy", None)  # `pick --strategy` overrides the configuration's
        used = config.model_copy(update={"strategy": Strategy(chosen)}) if chosen else config
        if used.strategy is Strategy.CHERRY_PICK:  # the only strategy the fork's habit can contradict
            merges, picks = merge_habit(repo, fork=fork, upstream=args.upstream)
            if note := strategy_note(used, merges=merges, picks=picks):
                print(f"sluice: note: {note}", file=sys.stderr)
    return repo, config


def _resolve_option(repo: GitRepo, args: argparse.Namespace, attr: str, *, default: str) -> str:
    """Resolve `--<attr>`; when it was not given, its default, which the message names if it is missing."""
    given = getattr(args, attr)
    if given is None:
        setattr(args, attr, default)  # the commands read the ref by name (it keys the store)
    return repo.resolve(getattr(args, attr), default_for=None if given else f"--{attr}")


def _fork_config(repo: GitRepo, fork_sha: str, fork: str) -> SluiceConfig:
    config = load_repo_config(repo, fork_sha, fork)
    if config.resolver.command:
        # Whoever can push to fork trunk writes that file: it must not choose what runs on this machine.
        print(
            f"sluice: ignoring resolver.command from {fork}:{CONFIG_PATH}; "
            "the operator's --config can name a resolver",
            file=sys.stderr,
        )
        config = config.model_copy(update={"resolver": ResolverConfig()})
    return config


def _emit(plan: Plan, config: SluiceConfig, *, as_json: bool, full: bool = False) -> None:
    if as_json:
        sys.stdout.write(render.to_json(plan))
        return

    def component_of(path: str) -> str | None:
        component = config.component_for(path)
        return component.name if component else None

    render.print_renderable(render.plan_renderable(plan, full=full, component_of=component_of))


def open_store(url: str | None, *, given_by: str = database.GIVEN_BY) -> Store:
    """The store, or a clear error that names the database without its password."""
    try:
        return Store.open(url)
    except (ImportError, SQLAlchemyError, ValueError, OSError, sqlite3.Error) as exc:
        raise database.store_failure(url, exc, given_by=given_by) from exc


def _with_store(args: argparse.Namespace, run: Callable[[Store | None], Plan]) -> Plan:
    store = None if args.no_record else open_store(args.database)
    try:
        return run(store)
    finally:
        if store is not None:
            store.close()


def _plan(args: argparse.Namespace) -> tuple[Plan, SluiceConfig]:
    repo, config = _open_repo(args)  # bad refs fail before the store is opened

    def run(store: Store | None) -> Plan:
        with ProgressReporter() as progress:
            return build_plan(
                repo,
                config,
                fork=args.fork,
                upstream=args.upstream,
                store=store,
                progress=progress,
                clock=utc_now,
            )

    return _with_store(args, run), config


def cmd_plan(args: argparse.Namespace) -> int:
    plan, config = _plan(args)
    _emit(plan, config, as_json=args.json, full=args.full)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    repo, config = _open_repo(args)  # bad refs fail before the store is opened
    store = _existing_store(args.database)  # never created here; one that exists spares re-reading commits
    try:
        with ProgressReporter() as progress:
            snapshot = take_snapshot(
                repo,
                fork_ref=args.fork,
                upstream_ref=args.upstream,
                config=config,
                progress=progress,
                facts=CommitFacts(repo, store),
            )
        records = store.dispositions(fork_key(config, repo, args.fork)) if store else {}
    finally:
        if store is not None:
            store.close()
    held = held_by_people(snapshot, records, strategy=config.strategy)
    status = with_dispositions(snapshot, held)
    if args.audit:
        audit = recognition_audit(repo, snapshot, config)
        sys.stdout.write(
            json.dumps(audit, indent=2, sort_keys=True) + "\n" if args.json else audit_text(audit)
        )
    elif args.json:
        sys.stdout.write(render.to_json(status))
    else:
        subjects = {c.sha: c.subject for c in snapshot.candidates}
        rows = [(records[sha], subjects[sha]) for sha in snapshot.pending if sha in held]
        render.print_renderable(render.status_renderable(status, held=rows))
    return 0


def _store_to_read(url: str) -> Store:
    """A store named to be read: a SQLite file that is not there is a mistyped path, not a new store."""
    try:
        parsed = make_url(url)
    except (SQLAlchemyError, ValueError):
        parsed = None
    if parsed is not None and parsed.get_backend_name() == "sqlite":
        path = parsed.database
        if path not in (None, "", ":memory:") and not Path(path).exists():
            raise SluiceError(f"no store at {path}", "pass --database with the URL of an existing store")
    return open_store(url)


def _existing_store(url: str | None) -> Store | None:
    """The store, when one is configured or the default file exists; status never creates one."""
    if not (url or os.environ.get(DEFAULT_URL_ENV) or default_sqlite_path().exists()):
        return None
    return open_store(url)


HOLD_VERB = {Disposition.SKIPPED: "skipped", Disposition.DEFERRED: "deferred"}


def cmd_hold(args: argparse.Namespace) -> int:
    """`skip` / `defer`: a person's decision about upstream commits, recorded in the store."""
    held = Disposition(args.disposition)
    reason = (args.reason or "").strip() or None
    if held == Disposition.SKIPPED and not args.undo and reason is None:
        raise SluiceError("skipping needs a reason", 'say why it will not be ported: --reason "…"')
    repo, config = _open_repo(args)
    if config.strategy is Strategy.MERGE and not args.undo:
        raise SluiceError(*MERGE_HOLDS_NOTHING)
    snapshot = take_snapshot(repo, fork_ref=args.fork, upstream_ref=args.upstream, config=config)
    commits = _pending_commits(repo, snapshot, args.shas)
    approver = args.by or _git_user(repo)
    store = open_store(args.database)
    try:
        key = fork_key(config, repo, args.fork)
        if args.undo:
            _check_held(store.dispositions(key), commits, held)
        now, wanted = utc_now(), Disposition.PENDING if args.undo else held
        for commit in commits:
            store.set_disposition(key, commit.sha, wanted, reason=reason, approver=approver, at=now)
    finally:
        store.close()
    if args.json:
        shown = [{"sha": c.sha, "subject": c.subject} for c in commits]
        record = {"schema_version": 1, "disposition": wanted.value, "by": approver, "reason": reason}
        print(json.dumps({**record, "commits": shown}, indent=2, sort_keys=True))
        return 0
    done = f"no longer {HOLD_VERB[held]}" if args.undo else HOLD_VERB[held]
    for commit in commits:
        print(f"{commit.sha[:10]} {done} by {approver}: {commit.subject}")
    return 0


def _new_branch_name(branch: str) -> None:
    """`--branch` names a branch to write: refused as such (not with what a ref to read may be)."""
    problem = ref_problem(branch)
    if problem is not None:
        raise BadInput(
            f"--branch {branch[:80]!a} is not a valid git branch name: {problem}",
            "give a new branch's name, such as sluice/pick-fix",
        )


def _pending_commits(repo: GitRepo, snapshot: Snapshot, args: Sequence[str]) -> list[CommitInfo]:
    """The named upstream commits, each once; anything not pending on the upstream stream is refused."""
    stream, pending = {sha for sha, _ in snapshot.stream}, set(snapshot.pending)
    infos = {c.sha: c for c in snapshot.candidates}
    chosen: dict[str, CommitInfo] = {}
    for arg in args:
        sha = _commit_arg(repo, arg)
        if sha not in stream:
            raise SluiceError(f"{arg} is not an upstream commit", f"name commits of {snapshot.upstream_ref}")
        if sha not in pending:
            raise SluiceError(
                f"{arg} is already in the fork; there is nothing to hold", "name a commit `sluice plan` lists"
            )
        chosen[sha] = infos[sha]
    return list(chosen.values())


def _check_held(
    records: dict[str, DispositionRecord], commits: Sequence[CommitInfo], held: Disposition
) -> None:
    for commit in commits:
        record = records.get(commit.sha)
        if record is None or record.disposition != held:
            now = record.disposition if record else "not recorded"
            raise SluiceError(
                f"{commit.sha[:10]} is not {HOLD_VERB[held]} ({now}); nothing to undo",
                f"name a commit that is {HOLD_VERB[held]}",
            )


def _git_user(repo: GitRepo) -> str:
    try:
        name = repo.run("config", "user.name").strip()
    except GitError:
        name = ""
    if not name:
        raise SluiceError("who decided this? git has no user.name here", "pass --by LOGIN")
    return name


def recognition_audit(repo: GitRepo, snapshot: Snapshot, config: SluiceConfig) -> dict[str, Any]:
    """Which fork commit matched which upstream commit, by method; and the picks that matched nothing."""
    subjects = {c.sha: c.subject for c in snapshot.candidates}
    position = {sha: i for i, (sha, _) in enumerate(snapshot.stream)}
    methods: dict[str, list[dict[str, str | None]]] = {}
    for sha, rec in sorted(snapshot.recognised.items(), key=lambda item: position[item[0]]):
        entry = {"upstream": sha, "fork": rec.fork_sha, "subject": subjects[sha], "detail": rec.detail}
        methods.setdefault(rec.method.value, []).append(
            entry | ({"emergency": "yes"} if rec.emergency else {})
        )
    stream = repo.commits(snapshot.upstream_head, first_parent=True)
    reached = [c for c in stream if c.sha not in snapshot.missing]
    unmatched, superseded = unmatched_picks(
        snapshot.fork_commits, snapshot.recognised, ancestors=reached, config=config
    )
    return {
        "ancestry": len(snapshot.stream) - len(snapshot.missing),
        "methods": methods,
        "unmatched_picks": [
            {"fork": u.fork_sha, "subject": u.subject, "evidence": u.evidence} for u in unmatched
        ],
        "picks_reached_by_ancestry": superseded,
    }


def audit_text(audit: dict[str, Any]) -> str:
    lines = [f"ancestry: {audit['ancestry']} upstream commits are ancestors of fork trunk"]
    for method, entries in audit["methods"].items():
        lines.append(f"{method}: {render.plural(len(entries), 'commit')}")
        for e in entries:
            fork = (e["fork"] or "—")[:10]
            detail = f"  ({e['detail']})" if e["detail"] else ""
            lines.append(f"  {fork:10} → {e['upstream'][:10]}  {e['subject']}{detail}")
    unmatched = audit["unmatched_picks"]
    lines.append(f"look like picks but matched nothing: {render.plural(len(unmatched), 'fork commit')}")
    lines += [f"  {u['fork'][:10]}  {u['subject']}  (by {u['evidence']})" for u in unmatched]
    lines.append(
        f"picks of upstream commits fork trunk has since merged: {audit['picks_reached_by_ancestry']}"
    )
    return "\n".join(lines) + "\n"


def cmd_demo(args: argparse.Namespace) -> int:
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
    plan, config = _plan(args)
    _emit(plan, config, as_json=args.json, full=args.full)
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
        now=utc_now(),
    )
    print(f"\n$ sluice pick --dry-run --onto {args.fork} " + " ".join(c.sha[:10] for c in chain.commits))
    render.print_renderable(render.pick_renderable(run_pick(Picker(repo, config), request)))


def cmd_config_check(args: argparse.Namespace) -> int:
    """A file, or with --repo the `.github/sluice.yml` committed at --fork (what the App reads there)."""
    if (args.file is None) == (args.repo is None):
        raise SluiceError(
            "name a file, or a repository with --repo", "e.g. sluice config check --repo . --fork main"
        )
    if args.repo is not None:
        repo = GitRepo(Path(args.repo))
        fork = args.fork or SluiceConfig().fork.branch
        raw = repo.read_file(repo.resolve(fork, default_for=None if args.fork else "--fork"), CONFIG_PATH)
        name = f"{fork}:{CONFIG_PATH}"
        if raw is None:
            print(f"{name}: none there (Sluice runs on its defaults; the App registers no fork without it)")
            return 0
        text = raw.decode("utf-8", "replace")  # as the App reads it
    else:
        name = args.file
        try:
            text = Path(args.file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SluiceError(f"cannot read {name}: {exc}", "give the path of a .github/sluice.yml") from exc
    problems = check_config(text, filename=name)
    for problem in problems:
        print(problem.render(name))
    if problems:
        return 2
    print(f"{name}: ok")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the webhook service; every missing or malformed setting is reported before anything starts."""
    from pydantic import ValidationError

    from bot.app.service import GIL_SWITCH_INTERVAL_S, create_app
    from bot.app.settings import Settings, unknown_variables

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    try:
        settings = Settings()
    except ValidationError as exc:  # a value of the wrong form or out of range: named, never echoed (secrets)
        problems = [
            f"SLUICE_{'_'.join(str(part) for part in error['loc']).upper()}: {error['msg']}"
            for error in exc.errors()
        ]
        # and every other problem, in the same round: the settings with the malformed ones at their defaults
        malformed = {str(error["loc"][0]) for error in exc.errors() if error["loc"]}
        defaults = {
            name: Settings.model_fields[name].default for name in malformed if name in Settings.model_fields
        }
        named = tuple(f"SLUICE_{name.upper()}" for name in malformed)
        with contextlib.suppress(ValidationError):
            problems += [p for p in Settings(**defaults).problems() if not p.startswith(named)]
    else:
        problems = settings.problems()
    if problems:
        for problem in problems:
            print(f"sluice serve: {problem}", file=sys.stderr)
        return 2
    for said, _ in unknown_variables(os.environ):
        log.warning("%s", said)
    store = open_store(settings.database_url, given_by="SLUICE_DATABASE_URL")
    try:
        _serve(create_app(settings, store=store, background=True), settings, args)
    finally:
        store.close()
    return 0


def _serve(app: web.Application, settings: Settings, args: argparse.Namespace) -> None:
    """Run the app until SIGTERM or SIGINT, saying where it listens and with what; a port it cannot take is
    a clear error."""
    from aiohttp import web

    log.info(
        "starting on http://%s:%d; store %s; git mirrors in %s; %d workers; tiers run %s",
        args.host,
        args.port,
        database.shown_url(settings.database_url),
        settings.data_dir.absolute(),
        settings.workers,
        "on this machine" if settings.tier_backend == "local" else "in the fork's GitHub Actions workflows",
    )
    try:
        web.run_app(app, host=args.host, port=args.port, print=None)
    except OSError as exc:
        if exc.errno not in (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES):
            raise
        raise SluiceError(
            f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}",
            "stop what listens there, or give another --port or --host",
        ) from exc
    log.info("stopped")


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


SHA_ARG = re.compile(r"^[0-9a-fA-F]{7,40}\Z")


def _upstream_commits(repo: GitRepo, snapshot: Snapshot, shas: Sequence[str]) -> tuple[CommitInfo, ...]:
    """The named upstream commits, refusing anything that is not a pending commit of the upstream stream."""
    stream = {sha for sha, _ in snapshot.stream}
    ingested, emergency = snapshot.ingested, snapshot.emergency
    infos = {c.sha: c for c in snapshot.candidates}
    chosen = []
    for arg in shas:
        sha = _commit_arg(repo, arg)
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


def cmd_pick(args: argparse.Namespace) -> int:
    repo, config = _open_repo(args, fork_option="--onto")  # bad refs fail before the store is opened
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


def cmd_remember(args: argparse.Namespace) -> int:
    """Learn how a human resolved a pick's conflicts, so the same conflicts resolve by themselves later."""
    repo, config = _open_repo(args)
    upstream_sha, resolved_sha = (_commit_arg(repo, a) for a in (args.upstream_commit, args.resolution))
    upstream, resolved = (repo.commits(sha, "-1")[-1] for sha in (upstream_sha, resolved_sha))
    if not resolved.parents or not upstream.parents:
        raise SluiceError("both commits need a parent", "give the pick commit a human made on fork trunk")
    learned = learn_resolutions(Picker(repo, config), upstream, resolved)
    store = open_store(args.database)
    try:
        key, now = fork_key(config, repo, args.fork), utc_now()
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
    print(f"remembered {render.plural(len(learned), 'resolved conflict')} from {resolved_sha[:10]}")
    return 0


def _commit_arg(repo: GitRepo, arg: str) -> str:
    """The commit a SHA argument names: a SHA (7 to 40 hex digits) or a revision (`upstream/main~2`)."""
    try:
        validate_rev(arg)
    except GitError:
        raise SluiceError(
            f"not a commit SHA or revision: {arg!r}",
            "give 7 to 40 hex digits, or a revision such as upstream/main~2 (no ranges or options)",
        ) from None
    return repo.resolve(arg.lower() if SHA_ARG.match(arg) else arg)


SCHEMAS: dict[str, type[Plan] | type[PickReport]] = {"plan": Plan, "pick": PickReport}


def _blamed(args: argparse.Namespace, repo: GitRepo, config: SluiceConfig) -> dict[str, Blame] | None:
    """The culprits Sluice's own tier runs blamed on the fork (bisections, one-commit PRs that failed), from
    the store `--database` names; None without one (only a store named on the command line is read, so the
    same history gives the same answer)."""
    if not args.database:
        return None
    store = _store_to_read(args.database)
    try:
        key = fork_key(config, repo, args.fork)
        blamed = TierRuns(store).failed_alone(key)
        for sha, blame in Bisections(store).blames(key).items():  # the earliest blame of a commit counts
            if sha not in blamed or blame.time < blamed[sha].time:
                blamed[sha] = blame
    finally:
        store.close()
    return blamed


def cmd_calibrate(args: argparse.Namespace) -> int:
    repo, config = _open_repo(args)  # bad refs fail before the store is opened
    return calibrate.run(repo, config, args, blamed=_blamed(args, repo, config))


def cmd_simulate(args: argparse.Namespace) -> int:
    repo, config = _open_repo(args)  # bad refs fail before the store is opened
    if args.culprits and args.database:
        raise BadInput("--culprits and --database both say which commits broke the fork", "give one of them")
    return simulate.run(repo, config, args, blamed=_blamed(args, repo, config))


def cmd_schema(args: argparse.Namespace) -> int:
    schema = SCHEMAS[args.output].model_json_schema(mode="serialization", by_alias=True)
    sys.stdout.write(json.dumps(schema, indent=2, sort_keys=True) + "\n")
    return 0


def _version() -> str:
    try:
        return importlib.metadata.version("sluice")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def _add_hold_command(sub: argparse._SubParsersAction, held: Disposition, summary: str) -> None:
    name = {Disposition.SKIPPED: "skip", Disposition.DEFERRED: "defer"}[held]
    command = sub.add_parser(name, help=summary)
    add_repo_options(command)
    command.add_argument(
        "--reason", help="why (required for skip)" if held == Disposition.SKIPPED else "why (optional)"
    )
    command.add_argument("--by", help="who decided (default: git's user.name)")
    command.add_argument("--undo", action="store_true", help=f"make {HOLD_VERB[held]} commits pending again")
    command.add_argument(
        "--database", help="SQLAlchemy URL (default: $SLUICE_DATABASE_URL, else a SQLite file)"
    )
    command.add_argument("shas", nargs="+", metavar="UPSTREAM_SHA")
    command.set_defaults(run=cmd_hold, disposition=held.value)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="sluice", description="Keep a long-lived fork flowing with its upstream."
    )
    top.add_argument("--version", action="version", version=f"sluice {_version()}")
    sub = top.add_subparsers(dest="command", required=True)
    _add_plan_command(sub)
    _add_status_command(sub)
    for held, summary in (
        (Disposition.SKIPPED, "mark upstream commits as won't-port (they stop counting as pending)"),
        (Disposition.DEFERRED, "hold upstream commits out of plans for now (they stay pending work)"),
    ):
        _add_hold_command(sub, held, summary)
    _add_demo_command(sub)
    _add_config_command(sub)
    _add_pick_command(sub)
    _add_remember_command(sub)
    _add_serve_command(sub)
    _add_mirror_command(sub)
    calibrate.add_parser(sub, run=cmd_calibrate)
    simulate.add_parser(sub, run=cmd_simulate)
    _add_schema_command(sub)
    _add_audit_command(sub)
    database.add_parser(sub)
    return top


def _add_plan_command(sub: argparse._SubParsersAction) -> None:
    plan = sub.add_parser(
        "plan", help="split pending upstream commits into low-risk bundles and risky chains"
    )
    add_repo_options(plan)
    plan.add_argument("--database", help="SQLAlchemy URL (default: $SLUICE_DATABASE_URL, else a SQLite file)")
    plan.add_argument(
        "--no-record", action="store_true", help="do not store the plan, chains or dispositions"
    )
    plan.add_argument("--full", action="store_true", help="after the summary, list every commit")
    plan.set_defaults(run=cmd_plan)


def _add_status_command(sub: argparse._SubParsersAction) -> None:
    status = sub.add_parser("status", help="ingestion tip, Days Behind Upstream, Backlog Commits")
    add_repo_options(status)
    status.add_argument(
        "--database",
        help="store with per-commit facts and skipped/deferred commits (default: $SLUICE_DATABASE_URL, "
        "else the default SQLite file when it exists; status never creates one)",
    )
    status.add_argument(
        "--audit",
        action="store_true",
        help="list which fork commit matched which upstream commit, and picks that matched nothing",
    )
    status.set_defaults(run=cmd_status)


def _seconds(text: str) -> float:
    """A positive number of seconds (argparse reports anything else as a bad value)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"a positive number of seconds, not {text!r}")
    return value


def _add_demo_command(sub: argparse._SubParsersAction) -> None:
    demo = sub.add_parser(
        "demo",
        help="run Sluice's whole loop on a generated Triton-shaped sandbox against the GitHub simulator",
    )
    add_repo_options(demo, required=False)
    demo.add_argument("--dir", help="where to build the sandbox (default: a new temporary directory)")
    demo.add_argument("--database", help="SQLAlchemy URL (default: a SQLite file beside the sandbox)")
    demo.add_argument("--no-record", action="store_true", help=argparse.SUPPRESS)
    demo.add_argument(
        "--plan-only", action="store_true", help="only plan the sandbox and dry-run a pick (as with --repo)"
    )
    demo.add_argument(
        "--timeout", type=_seconds, default=900.0, help="seconds the whole loop may take (default 900)"
    )
    demo.add_argument("--full", action="store_true", help="with --plan-only: after the summary, every commit")
    demo.set_defaults(run=cmd_demo)


def _add_config_command(sub: argparse._SubParsersAction) -> None:
    config = sub.add_parser("config", help="repository configuration")
    config_sub = config.add_subparsers(dest="config_command", required=True)
    check = config_sub.add_parser(
        "check", help="report every problem in a sluice.yml with its field and line"
    )
    check.add_argument("file", nargs="?", help="a sluice.yml to check")
    check.add_argument("--repo", help="or a repository: check the .github/sluice.yml committed on --fork")
    check.add_argument("--fork", help="the branch or commit whose file --repo checks (default: main)")
    check.set_defaults(run=cmd_config_check)


def _add_pick_command(sub: argparse._SubParsersAction) -> None:
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


def _add_remember_command(sub: argparse._SubParsersAction) -> None:
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


def _add_serve_command(sub: argparse._SubParsersAction) -> None:
    serve = sub.add_parser(
        "serve", help="run the GitHub App webhook service (settings from SLUICE_* variables)"
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8080, help="port to listen on (default 8080)")
    serve.set_defaults(run=cmd_serve)


def _add_mirror_command(sub: argparse._SubParsersAction) -> None:
    mirror = sub.add_parser("mirror", help="create or update a local mirror of fork trunk and upstream")
    mirror.add_argument("--dir", required=True, help="the mirror (a bare repository; created on first use)")
    mirror.add_argument("--fork-url", required=True, help="the fork: URL or absolute path")
    mirror.add_argument("--upstream-url", help="default: upstream.url from the configuration")
    mirror.add_argument("--fork-branch", help="default: fork.branch from the configuration")
    mirror.add_argument("--upstream-branch", help="default: upstream.branch from the configuration")
    mirror.add_argument("--config", help="a sluice.yml to take the defaults from")
    mirror.set_defaults(run=cmd_mirror)


def _add_schema_command(sub: argparse._SubParsersAction) -> None:
    schema = sub.add_parser(
        "schema", help="print the JSON Schema of `sluice plan --json` or `sluice pick --json`"
    )
    schema.add_argument("output", nargs="?", choices=sorted(SCHEMAS), default="plan")
    schema.set_defaults(run=cmd_schema)


def cmd_audit(args: argparse.Namespace) -> int:
    """Print the audit records an audit number or an ingestion id names."""
    store = open_store(args.database)
    try:
        found = GateStore(store).find_audits(args.id)
    finally:
        store.close()
    if not found:
        raise NotFound(
            f"no audit record {args.id!r}", "give an audit number or an ingestion id (bundle-…, chain-…)"
        )
    if args.json:
        print(
            json.dumps([{"id": n, **r.model_dump(mode="json")} for n, r in found], indent=2, sort_keys=True)
        )
    else:
        print("\n".join(render_audit(n, r) for n, r in found), end="")
    return 0


def _add_audit_command(sub: argparse._SubParsersAction) -> None:
    audit = sub.add_parser("audit", help="print the audit record of an ingestion (by number or ingestion id)")
    audit.add_argument("id", help="an audit number, or an ingestion id such as bundle-1a2b3c4d5e")
    audit.add_argument("--database", help="the store (default: $SLUICE_DATABASE_URL, else the SQLite file)")
    audit.add_argument("--json", action="store_true", help="the records as JSON")
    audit.set_defaults(run=cmd_audit)


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
