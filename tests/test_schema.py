"""The `sluice plan --json` schema is versioned: the committed schema is what the code emits."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from bot.app.cli import main
from tests.support.scenarios import CPP_PASS, Scenario

SCHEMA = Path(__file__).parent.parent / "docs" / "plan.schema.json"


@pytest.mark.parametrize("output", ["plan", "pick"])
def test_committed_schema_matches_the_code(capsys: pytest.CaptureFixture[str], output: str) -> None:
    assert main(["schema", output]) == 0
    emitted = capsys.readouterr().out
    committed = (SCHEMA.parent / f"{output}.schema.json").read_text()
    assert emitted == committed, f"the {output} schema changed: bump its schema_version and commit the schema"


def test_plan_output_validates_against_the_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = Scenario(tmp_path)
    s.upstream("Initial import (#1)", {"lib/Dialect/TritonGPU/Transforms/P.cpp": CPP_PASS})
    s.fork_here()
    s.upstream(
        "[BACKEND] cap (#2)", {"lib/Dialect/TritonGPU/Transforms/P.cpp": CPP_PASS.replace("+= 1", "+= 3")}
    )
    s.upstream("[DOCS] add (#3)", {"docs/x.md": "x\n"})
    assert main(["plan", *s.repo_args(), "--json", "--no-record"]) == 0
    plan = json.loads(capsys.readouterr().out)
    jsonschema.validate(plan, json.loads(SCHEMA.read_text()))
    assert len(plan["bundles"]) == 1 and len(plan["chains"]) == 1
