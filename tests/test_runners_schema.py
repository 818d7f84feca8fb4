"""The tier report's JSON Schema: the committed copy is current, and it accepts and rejects what it should."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import ValidationError

from bot.core.tiers import Level
from runners import report as model  # not `import TestResult`: pytest would try to collect it
from runners.report import (
    Benchmark,
    Environment,
    KernelFacts,
    Outcome,
    Report,
    RunInfo,
    SuiteResult,
    json_schema,
)
from tests.support.runner_reports import round_trip

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_FILE = ROOT / "docs" / "report.schema.json"


def test_the_committed_schema_is_the_models_schema() -> None:
    assert SCHEMA_FILE.read_text() == json_schema(), (
        "regenerate it: python -m runners schema > docs/report.schema.json"
    )


def test_the_schema_command_prints_it() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "runners", "schema"], cwd=ROOT, capture_output=True, text=True, check=False
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout == SCHEMA_FILE.read_text()


def _full_report() -> Report:
    """Every optional field filled, as a GPU run would."""
    moment = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    return Report(
        run=RunInfo(
            tier=Level.L3,
            head_sha="a" * 40,
            baseline_sha="b" * 40,
            upstream_range="1234567..89abcde",
            ingestion_id="ing-7",
            started_at=moment,
            finished_at=moment,
        ),
        environment=Environment(
            gpu_model="NVIDIA H200",
            gpu_count=8,
            driver="550.54.15",
            cuda="12.8",
            clocks={"sm_mhz": "1980", "app_sm_mhz": "1980"},
            triton="3.9.0",
            torch="2.13.0",
            python="3.11.7",
            cpu="AMD EPYC",
            os="Linux",
            interpreter=False,
            context_hash="0" * 64,
        ),
        suites=(
            SuiteResult(
                name="unit",
                kind="command",
                command=("pytest", "--junitxml={junit}"),
                exit_code=1,
                expected=5,
                executed=3,
                passed=2,
                failed=1,
                outcome=Outcome.FAILED,
                problems=("ran 3 tests, expected 5 (expected_tests)",),
                notes=("a note",),
                duration_s=1.5,
            ),
        ),
        tests=(
            model.TestResult(
                suite="unit", name="t::a", outcome=Outcome.FAILED, duration_s=0.1, message="boom"
            ),
        ),
        benchmarks=(
            Benchmark(
                suite="bench",
                kernel="matmul",
                shape=(4096, 4096, 4096),
                dtype="float16",
                config={"BLOCK_M": 128, "variant": "tma"},
                warmup_iters=20,
                measured_iters=3,
                warmup_budget_ms=25,
                measure_budget_ms=100,
                samples_ms=(1.0, 1.1, 1.2),
                median_ms=1.1,
                p10_ms=1.02,
                p90_ms=1.18,
                p99_ms=1.198,
                iqr_ms=0.1,
                correctness_error=0.001,
                facts=KernelFacts(registers=168, spills=0, shared_bytes=98304),
                compile_cold_ms=900.0,
                compile_warm_ms=40.0,
                comparable=True,
            ),
        ),
    )


def test_a_report_with_every_field_round_trips() -> None:
    report = _full_report()

    assert round_trip(report) == report


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("schema",), "sluice.tier-report/2"),
        (("run", "tier"), "l4"),
        (("suites", 0, "outcome"), "flaky"),
        (("tests", 0, "outcome"), "bogus"),
        (("benchmarks", 0, "samples_ms"), ["fast"]),
        (("environment", "interpreter"), "yes"),
        (("suites", 0, "surprise"), 1),
    ],
    ids=lambda v: str(v),
)
def test_the_schema_rejects_a_broken_report(path: tuple[str | int, ...], value: object) -> None:
    data = json.loads(_full_report().to_json())
    target = data
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value

    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, json.loads(json_schema()))


def test_the_top_level_keys_are_the_documented_ones() -> None:
    data = json.loads(_full_report().to_json())

    assert list(data) == ["schema", "run", "environment", "suites", "tests", "benchmarks"]


def _passing_unit(data: dict[str, Any]) -> dict[str, Any]:
    """The full report's `unit` suite as one that passed: 3 tests run of 3 expected."""
    data["suites"][0] |= {"expected": 3, "passed": 3, "failed": 0, "outcome": "passed", "problems": []}
    data["tests"][0]["outcome"] = "passed"
    return data


def _edit(data: dict[str, Any], path: tuple[str | int, ...], value: object) -> dict[str, Any]:
    target = data
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("contradiction", "said"),
    [
        (lambda d: d | {"suites": [*d["suites"], d["suites"][0]]}, "two suites are named 'unit'"),
        (lambda d: _edit(d, ("suites", 0, "executed"), -5), "greater than or equal to 0"),
        (lambda d: _edit(d, ("suites", 0, "duration_s"), -10), "greater than or equal to 0"),
        (lambda d: _edit(d, ("tests", 0, "duration_s"), -1), "greater than or equal to 0"),
        (lambda d: _edit(d, ("suites", 0, "executed"), 7), "executed 7 tests, not its passed + failed"),
        (lambda d: _edit(d, ("suites", 0, "outcome"), "passed"), "'unit' passed, but 1 of its tests failed"),
        (
            lambda d: _edit(_passing_unit(d), ("suites", 0, "expected"), 5),
            "'unit' passed, but it ran 3 tests, expected 5",
        ),
        (
            lambda d: _edit(_passing_unit(d), ("suites", 0, "problems"), ["ran no tests"]),
            "'unit' passed, but it has problems: ran no tests",
        ),
        (
            lambda d: _edit(_passing_unit(d), ("tests", 0, "outcome"), "failed"),
            "suite 'unit' passed, but its test 't::a' is failed",
        ),
        (
            lambda d: _edit(d, ("tests", 0, "suite"), "lit"),
            "names suite 'lit', which is none of the report's",
        ),
    ],
)
def test_a_report_that_contradicts_itself_is_refused(
    contradiction: Callable[[dict[str, Any]], dict[str, Any]], said: str
) -> None:
    """A report whose suites pass while their counts or tests say otherwise would be read as a pass; one
    suite twice, or a test under no suite, leaves which result counts to chance."""
    data = json.loads(_full_report().to_json())
    assert Report.model_validate_json(json.dumps(_passing_unit(data))).suites[0].outcome is Outcome.PASSED
    with pytest.raises(ValidationError, match=re.escape(said)):
        Report.model_validate_json(json.dumps(contradiction(json.loads(_full_report().to_json()))))
