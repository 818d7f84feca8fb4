"""`sluice audit`: the audit records of an ingestion."""

from __future__ import annotations

import argparse
import json

from bot.app.cli.common import existing_store
from bot.core.audit import render as render_audit
from bot.core.errors import NotFound
from bot.core.render import printable
from bot.db.gates import GateStore


def run(args: argparse.Namespace) -> int:
    """Print the audit records an audit number or an ingestion id names."""
    store = existing_store(args.database)  # a mistyped --database is said so, never created and migrated
    if store is None:
        raise NotFound(
            "there is no store yet, so no audit record", "pass --database with the URL of the store"
        )
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
        print(printable("\n".join(render_audit(n, r) for n, r in found)), end="")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    audit = sub.add_parser("audit", help="print the audit record of an ingestion (by number or ingestion id)")
    audit.add_argument("id", help="an audit number, or an ingestion id such as bundle-1a2b3c4d5e")
    audit.add_argument("--database", help="the store (default: $SLUICE_DATABASE_URL, else the SQLite file)")
    audit.add_argument("--json", action="store_true", help="the records as JSON")
    audit.set_defaults(run=run)
