"""`sluice config check`: every problem in a sluice.yml, with its field and line."""

from __future__ import annotations

import argparse
from pathlib import Path

from bot.core.config import ConfigError, SluiceConfig, check_config, config_text, parse_config
from bot.core.errors import ConfigRefused, SluiceError
from bot.flows.engine import CONFIG_PATH
from bot.flows.planning import load_risk_model, model_problem
from bot.git.repo import GitRepo


def run(args: argparse.Namespace) -> int:
    """A file, or with --repo the `.github/sluice.yml` committed at --fork (what the App reads there)."""
    if (args.file is None) == (args.repo is None):
        raise SluiceError(
            "name a file, or a repository with --repo", "e.g. sluice config check --repo . --fork main"
        )
    repo: GitRepo | None = None
    if args.repo is not None:
        repo = GitRepo(Path(args.repo))
        fork = args.fork or SluiceConfig().fork.branch
        head = repo.resolve(fork, default_for=None if args.fork else "--fork")
        raw = repo.read_file(head, CONFIG_PATH)
        name = f"{fork}:{CONFIG_PATH}"
        if raw is None:
            print(f"{name}: none there (Sluice runs on its defaults; the App registers no fork without it)")
            return 0
    else:
        name = args.file
        try:
            raw = Path(args.file).read_bytes()
        except OSError as exc:
            raise SluiceError(f"cannot read {name}: {exc}", "give the path of a .github/sluice.yml") from exc
    try:
        text = config_text(raw, filename=name)  # strictly UTF-8, as the App and the runners read it
    except ConfigError as exc:
        problems = exc.problems
    else:
        # the committed file as the App reads it: no path on this machine (`risk.model`)
        problems = check_config(text, filename=name, machine_paths=args.repo is None)
    for problem in problems:
        print(problem.render(name))
    if problems:
        return 2
    if repo is not None:  # and the risk model it names, as registration loads it from the same tree
        try:
            load_risk_model(repo, parse_config(text, filename=name, machine_paths=False), fork_head=head)
        except ConfigRefused as exc:
            print(model_problem(exc))
            return 2
    print(f"{name}: ok")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    config = sub.add_parser("config", help="repository configuration")
    config_sub = config.add_subparsers(dest="config_command", required=True)
    check = config_sub.add_parser(
        "check", help="report every problem in a sluice.yml with its field and line"
    )
    check.add_argument("file", nargs="?", help="a sluice.yml to check")
    check.add_argument("--repo", help="or a repository: check the .github/sluice.yml committed on --fork")
    check.add_argument("--fork", help="the branch or commit whose file --repo checks (default: main)")
    check.set_defaults(run=run)
