"""What several `sluice` commands share: the repository and its refs, the store, progress, tier blames."""

from __future__ import annotations

import argparse
import os
import re
import sqlite3
import sys
import time
from contextlib import AbstractContextManager
from pathlib import Path

from rich.console import Console
from sqlalchemy.exc import SQLAlchemyError

from bot.app.cli import database
from bot.config_file import load_config
from bot.core.bisect_pr import Blame
from bot.core.config import ResolverConfig, SluiceConfig, Strategy
from bot.core.errors import GitError, SluiceError
from bot.core.refs import validate_rev
from bot.db.bisections import Bisections
from bot.db.store import DEFAULT_URL_ENV, Store, default_sqlite_path
from bot.db.tier_runs import TierRuns
from bot.flows.engine import CONFIG_PATH, load_repo_config
from bot.flows.planning import fork_key
from bot.flows.swapped import check_not_swapped, merge_habit, strategy_note
from bot.git.repo import GitRepo


def add_repo_options(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    parser.add_argument("--repo", required=required, help="path of a clone or mirror holding both refs")
    parser.add_argument("--fork", help="fork trunk: a ref or revision (default: fork.branch, i.e. main)")
    parser.add_argument(
        "--upstream", help="upstream: a ref or revision (default: upstream/<upstream.branch>)"
    )
    parser.add_argument(
        "--config", help="a sluice.yml (default: .github/sluice.yml at fork trunk, else defaults)"
    )
    parser.add_argument("--json", action="store_true", help="print the versioned JSON form")


def progress(message: str) -> None:
    print(f"sluice: {message}", file=sys.stderr, flush=True)


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


def open_repo(args: argparse.Namespace, *, fork_option: str = "--fork") -> tuple[GitRepo, SluiceConfig]:
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


def open_store(url: str | None, *, given_by: str = database.GIVEN_BY) -> Store:
    """The store, or a clear error that names the database without its password."""
    try:
        return Store.open(url)
    except (ImportError, SQLAlchemyError, ValueError, OSError, sqlite3.Error) as exc:
        raise database.store_failure(url, exc, given_by=given_by) from exc


def store_to_read(url: str) -> Store:
    """A store named to be read: a SQLite file that is not there is a mistyped path, not a new store."""
    missing = database.missing_file(url)
    if missing is not None:
        raise SluiceError(f"no store at {missing}", "pass --database with the URL of an existing store")
    return open_store(url)


def existing_store(url: str | None) -> Store | None:
    """The store to read, never created here: the one `--database` names (a SQLite file that is not there is
    a mistyped path), else `$SLUICE_DATABASE_URL`'s or the default SQLite file where it exists; None where
    there is none yet."""
    if url:
        return store_to_read(url)
    configured = os.environ.get(DEFAULT_URL_ENV)
    if configured:
        return None if database.missing_file(configured) is not None else open_store(configured)
    return open_store(None) if default_sqlite_path().exists() else None


SHA_ARG = re.compile(r"^[0-9a-fA-F]{7,40}\Z")


def commit_arg(repo: GitRepo, arg: str) -> str:
    """The commit a SHA argument names: a SHA (7 to 40 hex digits) or a revision (`upstream/main~2`)."""
    try:
        validate_rev(arg)
    except GitError:
        raise SluiceError(
            f"not a commit SHA or revision: {arg!r}",
            "give 7 to 40 hex digits, or a revision such as upstream/main~2 (no ranges or options)",
        ) from None
    return repo.resolve(arg.lower() if SHA_ARG.match(arg) else arg)


def blamed_by_tiers(args: argparse.Namespace, repo: GitRepo, config: SluiceConfig) -> dict[str, Blame] | None:
    """The culprits Sluice's own tier runs blamed on the fork (bisections, one-commit PRs that failed), from
    the store `--database` names; None without one (only a store named on the command line is read, so the
    same history gives the same answer)."""
    if not args.database:
        return None
    store = store_to_read(args.database)
    try:
        key = fork_key(config, repo, args.fork)
        blamed = TierRuns(store).failed_alone(key)
        for sha, blame in Bisections(store).blames(key).items():  # the earliest blame of a commit counts
            if sha not in blamed or blame.time < blamed[sha].time:
                blamed[sha] = blame
    finally:
        store.close()
    return blamed


def output_path(value: str, flag: str) -> Path:
    """Where a command will write `flag`'s file, checked before any work: a folder that is missing or not
    writable is said now, not after minutes of mining."""
    path = Path(value)
    folder = path.parent  # `.` for a bare file name
    if not folder.is_dir():
        raise SluiceError(
            f"{flag} {value}: the folder {folder} does not exist", f"give {flag} a path in an existing folder"
        )
    if not os.access(folder, os.W_OK) or (path.exists() and (path.is_dir() or not os.access(path, os.W_OK))):
        raise SluiceError(
            f"{flag} {value}: cannot be written here", f"give {flag} a path this user may write"
        )
    return path


def write_output(path: Path, text: str, flag: str) -> None:
    try:
        path.write_text(text)
    except OSError as exc:
        raise SluiceError(
            f"{flag} {path}: {exc.strerror or exc}", f"give {flag} a path this user may write"
        ) from None
