"""`sluice status`: ingestion tip, Days Behind Upstream, Backlog Commits (`--audit`: how picks matched)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from bot.app.cli.common import ProgressReporter, add_repo_options, existing_store, open_repo
from bot.core import render
from bot.core.config import SluiceConfig
from bot.core.recognise import unmatched_picks
from bot.flows.engine import Snapshot, take_snapshot
from bot.flows.planning import fork_key, held_by_people, with_dispositions
from bot.git.facts import CommitFacts
from bot.git.repo import GitRepo


def run(args: argparse.Namespace) -> int:
    repo, config = open_repo(args)  # bad refs fail before the store is opened
    store = existing_store(args.database)  # never created; one that exists spares re-reading commits
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
        text = json.dumps(audit, indent=2, sort_keys=True) + "\n" if args.json else audit_text(audit)
        sys.stdout.write(render.printable(text))
    elif args.json:
        sys.stdout.write(render.to_json(status))
    else:
        subjects = {c.sha: c.subject for c in snapshot.candidates}
        rows = [(records[sha], subjects[sha]) for sha in snapshot.pending if sha in held]
        render.print_renderable(render.status_renderable(status, held=rows))
    return 0


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


def add_parser(sub: argparse._SubParsersAction) -> None:
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
    status.set_defaults(run=run)
