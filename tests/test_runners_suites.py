"""The built-in Triton suites, run for real (in the interpreter on a machine without a GPU)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import pytest
import torch

from bot.core.config import (
    BenchConfig,
    BuiltinSuite,
    DType,
    NumericsConfig,
    SluiceConfig,
    Tolerance,
    parse_config,
)
from bot.core.tiers import Level
from runners import kernels, suites
from runners.report import Outcome
from runners.run import RunRequest, exit_code, run_tier
from tests.support.broken_kernels import add_reading_the_next, add_skipping_the_last
from tests.support.runner_reports import round_trip

# --- deliberately broken kernels (tests/broken_kernels.py): the suites must catch them ------------------


def _broken_add_step(suite: str, kernel: object) -> suites.Step:
    """What smoke's vector_add[10000:float32] step does, with `kernel` in place of the real one."""

    def make() -> suites.Check:
        x = suites._randn("x", 10000, dtype=torch.float32)
        y = suites._randn("y", 10000, dtype=torch.float32)
        op = kernels.add(x, y, kernel=kernel)
        tolerance = Tolerance(atol=1e-6, rtol=1e-6)
        return suites.Check("vector_add", (10000,), DType.FLOAT32, tolerance, lambda: (op(), x + y))

    return suites._lazy(suite, make, "vector_add[10000:float32]")


def _smoke_with_broken_add(kernel: object) -> Callable[[str, SluiceConfig], suites.SuitePlan]:
    def plan(name: str, config: SluiceConfig) -> suites.SuitePlan:
        real = suites.smoke(name, config)
        steps = [
            _broken_add_step(name, kernel) if s.name == "vector_add[10000:float32]" else s for s in real.steps
        ]
        return suites.SuitePlan(tuple(steps), real.notes)

    return plan


# --- smoke and numerics pass with the installed Triton ----------------------------------------------------


def test_the_smoke_suite_passes_against_torch() -> None:
    started = time.perf_counter()

    report = run_tier(RunRequest(tier=Level.L1, config=SluiceConfig()))

    (suite,) = report.suites
    assert (suite.name, suite.outcome, suite.executed, suite.problems) == ("smoke", Outcome.PASSED, 10, ())
    kernels_run = {t.name.split("[")[0] for t in report.tests}
    assert kernels_run == {"vector_add", "softmax", "layer_norm", "sum", "matmul"}
    assert all(t.outcome == Outcome.PASSED for t in report.tests)
    assert report.environment.interpreter == kernels.BACKEND.interpreter
    assert exit_code(report) == 0
    assert time.perf_counter() - started < 30
    round_trip(report)


def test_the_default_numerics_sweep_passes_in_every_dtype() -> None:
    report = run_tier(RunRequest(tier=Level.L2, config=SluiceConfig()))

    (suite,) = report.suites
    sweep = NumericsConfig()
    shapes = sweep.interpreter_shapes if kernels.BACKEND.interpreter else sweep.shapes
    assert suite.outcome == Outcome.PASSED, suite.problems
    assert suite.executed == len(shapes) * len(sweep.dtypes) * len(sweep.blocks)
    assert {t.name.split(":")[1] for t in report.tests} == {"float32", "float16", "bfloat16"}
    assert any("100x70x50" in t.name for t in report.tests)  # not a multiple of any block
    if kernels.BACKEND.interpreter:
        assert any("numerics.interpreter_shapes" in note for note in suite.notes)
    round_trip(report)


# --- a broken kernel is caught, and the failure says where and by how much --------------------------------


def test_an_off_by_one_mask_fails_with_kernel_shape_dtype_and_error() -> None:
    result = _broken_add_step("smoke", add_skipping_the_last).run()

    assert result.test.outcome == Outcome.FAILED
    assert result.test.message is not None
    assert result.test.message.startswith("vector_add[10000:float32]: 1 of 10000 elements outside atol=1e-06")
    assert "max abs error nan at [9999] (got nan, expected " in result.test.message
    assert result.test.message.endswith("; 1 NaN where the reference is finite (never written?)")


def test_a_shifted_load_fails_with_how_far_off_it_is() -> None:
    result = _broken_add_step("smoke", add_reading_the_next).run()

    assert result.test.outcome == Outcome.FAILED
    assert result.test.message is not None
    assert result.test.message.startswith("vector_add[10000:float32]: 10000 of 10000 elements outside")
    error = float(result.test.message.split("max abs error ")[1].split(" ")[0])
    assert 1 < error < 10  # two unit normals apart
    assert "NaN" not in result.test.message


def test_a_broken_kernel_fails_the_smoke_suite_and_the_tier() -> None:
    builtins = {**suites.BUILTINS, BuiltinSuite.SMOKE: _smoke_with_broken_add(add_skipping_the_last)}

    report = run_tier(RunRequest(tier=Level.L1, config=SluiceConfig()), builtins=builtins)

    (suite,) = report.suites
    assert suite.outcome == Outcome.FAILED
    assert (suite.executed, suite.passed, suite.failed) == (10, 9, 1)
    assert suite.problems == ("1 test failed: vector_add[10000:float32]",)
    assert exit_code(report) == 1
    round_trip(report)


def test_a_kernel_that_cannot_run_is_an_error_naming_it() -> None:
    def make() -> suites.Check:
        x = torch.ones(10, device=kernels.BACKEND.device)
        op = kernels.matmul(x.reshape(2, 5), x.reshape(5, 2)[:1], block=(16, 16, 16))
        return suites.Check("matmul", (2, 5, 2), DType.FLOAT32, Tolerance(atol=0, rtol=0), lambda: (op(), x))

    result = suites._lazy("smoke", make, "matmul[2x5x2:float32]").run()

    assert result.test.outcome == Outcome.ERROR
    assert result.test.message == "matmul[2x5x2:float32]: ValueError: cannot multiply 2x5 by 1x2"


@pytest.mark.parametrize(
    ("got", "expected", "problem"),
    [
        ([1.0, 2.0], [1.0, 2.0], None),
        ([1.0, 2.05], [1.0, 2.0], None),  # 0.05 <= 0.01 + 0.02 * 2
        ([1.0, 2.2], [1.0, 2.0], "1 of 2 elements outside atol=0.01, rtol=0.02; max abs error 0.2 at [1]"),
        (
            [math.inf, 2.0],
            [1.0, 2.0],
            "1 of 2 elements outside atol=0.01, rtol=0.02; max abs error inf at [0]",
        ),
        ([1.0], [1.0, 2.0], "shape (1,), expected (2,)"),
    ],
)
def test_mismatch_uses_the_isclose_rule(got: list[float], expected: list[float], problem: str | None) -> None:
    found = suites.mismatch(torch.tensor(got), torch.tensor(expected), Tolerance(atol=0.01, rtol=0.02))

    if problem is None:
        assert found is None
    else:
        assert found is not None and found.startswith(problem)


# --- bench ------------------------------------------------------------------------------------------------

SMALL_BENCH = """
bench:
  interpreter_iters: 3
  interpreter_warmup_iters: 1
  interpreter_cases:
    - {kernel: vector_add, shape: [1024], dtype: float32}
    - {kernel: matmul, shape: [48, 40, 24], dtype: bfloat16, block: [16, 16, 16]}
  cases:
    - {kernel: vector_add, shape: [1048576], dtype: float32}
    - {kernel: matmul, shape: [512, 512, 256], dtype: bfloat16, block: [64, 64, 32]}
"""


def test_bench_records_samples_statistics_and_correctness() -> None:
    config = parse_config(SMALL_BENCH)

    report = run_tier(RunRequest(tier=Level.L3, config=config, only=("bench",)))

    (suite,) = report.suites
    assert suite.outcome == Outcome.PASSED, suite.problems
    assert [b.kernel for b in report.benchmarks] == ["vector_add", "matmul"]
    assert [t.name for t in report.tests] == [b.key for b in report.benchmarks]
    add, matmul = report.benchmarks
    if kernels.BACKEND.interpreter:
        assert matmul.config == {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 8}
    for bench in report.benchmarks:
        assert bench.measured_iters == len(bench.samples_ms) > 0
        assert bench.p10_ms <= bench.median_ms <= bench.p90_ms <= bench.p99_ms
        assert bench.iqr_ms >= 0
        assert bench.correctness_error is not None and bench.correctness_error < 0.05
    if kernels.BACKEND.interpreter:
        assert (add.measured_iters, add.warmup_iters) == (3, 1)
        assert not add.comparable and add.note is not None and "interpreter" in add.note
        assert add.compile_cold_ms is None and add.facts is None
        assert any("bfloat16" in note for note in suite.notes)  # the interpreter's bf16 workaround is said
    round_trip(report)


def test_bench_settings_come_from_the_config() -> None:
    settings = BenchConfig()

    assert settings.warmup_ms == 25 and settings.rep_ms == 100
    assert {c.kernel.value for c in settings.cases} == {
        "vector_add",
        "softmax",
        "layer_norm",
        "sum",
        "matmul",
    }
    assert {c.kernel.value for c in settings.interpreter_cases} == {c.kernel.value for c in settings.cases}


def test_cpu_timing_runs_the_configured_iterations() -> None:
    calls: list[int] = []

    timing = suites.time_on_cpu(lambda: calls.append(1), warmup_iters=2, iters=7)

    assert len(calls) == 9
    assert len(timing.samples_ms) == 7 and timing.warmup_iters == 2
    assert timing.note is not None and "not comparable" in timing.note


def test_summary_statistics_are_the_percentiles_of_the_samples() -> None:
    summary = suites.summarise(tuple(float(n) for n in range(1, 101)))

    assert (summary.median_ms, summary.p10_ms) == (50.5, 10.9)
    assert (summary.p90_ms, summary.p99_ms) == (pytest.approx(90.1), pytest.approx(99.01))
    assert summary.iqr_ms == pytest.approx(75.25 - 25.75)


def test_the_interpreter_bf16_workaround_computes_bf16_matmuls_right() -> None:
    if not kernels.BACKEND.interpreter:
        pytest.skip("the workaround only exists in the interpreter")
    a = torch.randn(32, 48).to(torch.bfloat16)
    b = torch.randn(48, 16).to(torch.bfloat16)
    suites._workarounds((DType.BFLOAT16,))

    out = kernels.matmul(a, b, block=(16, 16, 16))()

    assert suites.mismatch(out, a.double() @ b.double(), Tolerance(atol=0.05, rtol=0.02)) is None
