"""`sluice plan`: the pending upstream commits as low-risk bundles and risky chains."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from bot.app.cli.common import (
    ProgressReporter,
    add_repo_options,
    existing_store,
    open_repo,
    open_store,
)
from bot.app.clock import utc_now
from bot.core import render
from bot.core.config import SluiceConfig
from bot.core.models import Plan
from bot.db.store import Store
from bot.flows.planning import build_plan


def emit(plan: Plan, config: SluiceConfig, *, as_json: bool, full: bool = False) -> None:
    if as_json:
        sys.stdout.write(render.to_json(plan))
        return

    def component_of(path: str) -> str | None:
        component = config.component_for(path)
        return component.name if component else None

    render.print_renderable(render.plan_renderable(plan, full=full, component_of=component_of))


def _with_store(args: argparse.Namespace, make: Callable[[Store | None], Plan]) -> Plan:
    """`make` with the store. `--no-record` previews the plan the next ingestion would make: it reads the
    store where there is one (the chains it resumes, what people held, what bisections blamed), records no
    plan and creates no store."""
    store = existing_store(args.database) if args.no_record else open_store(args.database)
    try:
        return make(store)
    finally:
        if store is not None:
            store.close()


def plan_from(args: argparse.Namespace) -> tuple[Plan, SluiceConfig]:
    repo, config = open_repo(args)  # bad refs fail before the store is opened

    def make(store: Store | None) -> Plan:
        with ProgressReporter() as progress:
            return build_plan(
                repo,
                config,
                fork=args.fork,
                upstream=args.upstream,
                store=store,
                progress=progress,
                clock=utc_now,
                record=not args.no_record,
            )

    return _with_store(args, make), config


def run(args: argparse.Namespace) -> int:
    plan, config = plan_from(args)
    emit(plan, config, as_json=args.json, full=args.full)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    plan = sub.add_parser(
        "plan", help="split pending upstream commits into low-risk bundles and risky chains"
    )
    add_repo_options(plan)
    plan.add_argument("--database", help="SQLAlchemy URL (default: $SLUICE_DATABASE_URL, else a SQLite file)")
    plan.add_argument(
        "--no-record",
        action="store_true",
        help="preview: read the store where one exists, but record no plan, chain or disposition",
    )
    plan.add_argument("--full", action="store_true", help="after the summary, list every commit")
    plan.set_defaults(run=run)
