"""`sluice schema`: the JSON Schema of `sluice plan --json` or `sluice pick --json`."""

from __future__ import annotations

import argparse
import json
import sys

from bot.core.models import PickReport, Plan

SCHEMAS: dict[str, type[Plan] | type[PickReport]] = {"plan": Plan, "pick": PickReport}


def run(args: argparse.Namespace) -> int:
    schema = SCHEMAS[args.output].model_json_schema(mode="serialization", by_alias=True)
    sys.stdout.write(json.dumps(schema, indent=2, sort_keys=True) + "\n")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    schema = sub.add_parser(
        "schema", help="print the JSON Schema of `sluice plan --json` or `sluice pick --json`"
    )
    schema.add_argument("output", nargs="?", choices=sorted(SCHEMAS), default="plan")
    schema.set_defaults(run=run)
