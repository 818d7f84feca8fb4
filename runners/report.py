"""The tier report: what a tier job ran and measured, in one versioned JSON file the bot reads."""

from __future__ import annotations

import enum
import json
from datetime import datetime
from pathlib import Path
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from bot.core.tiers import Level

SCHEMA: Final = "sluice.tier-report/1"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class Outcome(enum.StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"  # the test (or the suite's command) could not run
    SKIPPED = "skipped"


class RunInfo(_Model):
    tier: Level
    head_sha: str | None = None  # the commit under test
    baseline_sha: str | None = None  # the commit the benchmarks compare against
    upstream_range: str | None = None  # "a1b2c3d..e4f5a6b": the upstream commits this ingestion brings
    ingestion_id: str | None = None  # the `sluice/ingest/<id>` this run validates
    started_at: datetime
    finished_at: datetime


class Environment(_Model):
    """Where the run happened; `context_hash` changes whenever a field of the context does: every field but
    the momentary clocks and, for a Triton built from the checkout (`triton_origin: checkout`), its version
    (`runners.environment.context_fields`)."""

    gpu_model: str | None = None
    gpu_count: int = 0
    driver: str | None = None
    cuda: str | None = None
    clocks: dict[str, str] = {}  # e.g. {"sm_mhz": "1980", "mem_mhz": "2619"}, where readable
    triton: str | None = None
    # "checkout": the Triton the suites ran was built from the tree under test (`tiers.build`), so it is what
    # is compared, not part of the context; "installed": a Triton installed apart from it; None: no Triton
    triton_origin: Literal["checkout", "installed"] | None = None
    torch: str | None = None
    python: str
    cpu: str
    os: str
    interpreter: bool  # TRITON_INTERPRET=1: kernels ran on the CPU; timings are not comparable
    context_hash: str


# A count of tests, and a duration in seconds: never negative.
Count = Annotated[int, Field(ge=0)]
Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class TestResult(_Model):
    suite: str
    name: str
    outcome: Outcome
    duration_s: Seconds = 0.0
    message: str | None = None  # the failure message, for failed and error outcomes


class SuiteResult(_Model):
    name: str
    kind: Literal[
        "builtin", "command", "build"
    ]  # "build": the tier's build (`tiers.build`), before the suites
    command: tuple[
        str, ...
    ] = ()  # argv of a command suite (of the build: the command that failed, or the last)
    exit_code: int | None = None  # of a command suite
    expected: Count | None = None  # tests the suite must run (its baseline); None: no expectation
    executed: Count  # tests that ran (passed + failed + error; skipped ones do not count)
    passed: Count = 0
    failed: Count = 0
    errors: Count = 0
    skipped: Count = 0
    outcome: Outcome  # failed when a test failed, the command failed, or fewer tests ran than expected
    problems: tuple[str, ...] = ()  # why the suite failed, in words, e.g. "ran 3 tests, expected 5"
    notes: tuple[str, ...] = ()  # what a reader must know that is no failure, e.g. a reduced CPU sweep
    duration_s: Seconds = 0.0

    @model_validator(mode="after")
    def _counts_agree(self) -> SuiteResult:
        if self.executed != self.passed + self.failed + self.errors:
            raise ValueError(
                f"suite {self.name!r} executed {self.executed} tests, not its passed + failed + errors "
                f"({self.passed + self.failed + self.errors})"
            )
        if self.outcome is Outcome.PASSED:
            contradiction = _why_not_passed(self)
            if contradiction is not None:
                raise ValueError(f"suite {self.name!r} passed, but {contradiction}")
        return self


def _why_not_passed(suite: SuiteResult) -> str | None:
    """What in a suite's result says it did not pass, as `runners.run.judge` decides."""
    if suite.failed or suite.errors:
        return f"{suite.failed} of its tests failed and {suite.errors} could not run"
    if suite.problems:
        return f"it has problems: {suite.problems[0]}"
    if suite.executed == 0 and suite.kind != "build":
        return "it ran no tests"
    if suite.expected is not None and suite.executed < suite.expected:
        return f"it ran {suite.executed} tests, expected {suite.expected}"
    return None


class KernelFacts(_Model):
    """Static facts of a compiled kernel, when the backend exposes them."""

    registers: int | None = None
    spills: int | None = None
    shared_bytes: int | None = None


# A timing: milliseconds, finite and greater than zero (a zero or negative time is a broken timer, and would
# divide by zero when compared).
Milliseconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
# The most samples one benchmark may carry: more says nothing a comparison could use, and would make the
# bot's bootstrap over them take minutes.
MAX_SAMPLES: Final = 10_000


class Benchmark(_Model):
    suite: str
    kernel: str
    shape: tuple[int, ...]
    dtype: str
    config: dict[str, int | str] = {}  # block sizes, num_warps, num_stages...
    warmup_iters: int
    measured_iters: int
    warmup_budget_ms: float
    measure_budget_ms: float
    samples_ms: tuple[Milliseconds, ...] = Field(max_length=MAX_SAMPLES)  # raw, one per measured iteration
    median_ms: float
    p10_ms: float
    p90_ms: float
    p99_ms: float
    iqr_ms: float
    correctness_error: float | None = None  # max abs error against the torch reference
    facts: KernelFacts | None = None
    compile_cold_ms: Milliseconds | None = None  # first compile, empty cache
    compile_warm_ms: Milliseconds | None = None  # the same kernel again, warm cache
    comparable: bool  # False for interpreter timings: kept, never judged
    note: str | None = None

    @property
    def key(self) -> str:
        """Stable identity across runs: kernel, shape, dtype and config."""
        shape = "x".join(str(n) for n in self.shape)
        config = ",".join(f"{k}={v}" for k, v in sorted(self.config.items()))
        return f"{self.kernel}[{shape}:{self.dtype}" + (f":{config}]" if config else "]")


class Report(_Model):
    schema_: Annotated[Literal["sluice.tier-report/1"], Field(alias="schema")] = SCHEMA
    run: RunInfo
    environment: Environment
    suites: tuple[SuiteResult, ...] = ()
    tests: tuple[TestResult, ...] = ()
    benchmarks: tuple[Benchmark, ...] = ()

    @model_validator(mode="after")
    def _suites_agree_with_tests(self) -> Report:
        """A report that contradicts itself is refused, never read as a pass: each suite once, each test
        under one of them, and no failed test under a suite that passed."""
        suites: dict[str, SuiteResult] = {}
        for suite in self.suites:
            if suite.name in suites:
                raise ValueError(f"two suites are named {suite.name!r}")
            suites[suite.name] = suite
        for test in self.tests:
            if test.suite not in suites:
                raise ValueError(
                    f"test {test.name!r} names suite {test.suite!r}, which is none of the report's"
                )
            passed = suites[test.suite].outcome is Outcome.PASSED
            if passed and test.outcome in (Outcome.FAILED, Outcome.ERROR):
                raise ValueError(f"suite {test.suite!r} passed, but its test {test.name!r} is {test.outcome}")
        return self

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2) + "\n"

    def write(self, path: Path) -> None:
        path.write_text(self.to_json())

    @classmethod
    def read(cls, path: Path) -> Report:
        return cls.model_validate_json(path.read_text())


def json_schema() -> str:
    """The report's JSON Schema (docs/report.schema.json holds it; a test keeps them equal)."""
    schema = Report.model_json_schema(by_alias=True, mode="serialization")
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"
