"""The built-in Triton suites: smoke (L1), numerics (L2) and bench (L3), each kernel checked against torch."""

from __future__ import annotations

import contextlib
import math
import tempfile
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from bot.core.config import BenchCase, BenchConfig, BenchKernel, BuiltinSuite, DType, SluiceConfig, Tolerance
from runners import backend, kernels
from runners.report import Benchmark, KernelFacts, Outcome, TestResult

MAX_MESSAGE = 2000
TORCH_DTYPES = {DType.FLOAT32: torch.float32, DType.FLOAT16: torch.float16, DType.BFLOAT16: torch.bfloat16}

# Tolerances of the kernels other than matmul (whose come from `numerics.tolerances`): fp32 allows for the
# GPU's approximate exp and sqrt, fp16 and bf16 for rounding the output.
_TOLERANCES: dict[str, dict[DType, Tolerance]] = {
    "vector_add": {
        DType.FLOAT32: Tolerance(atol=1e-6, rtol=1e-6),
        DType.FLOAT16: Tolerance(atol=1e-3, rtol=1e-3),
    },
    "softmax": {
        DType.FLOAT32: Tolerance(atol=1e-6, rtol=1e-4),
        DType.FLOAT16: Tolerance(atol=1e-3, rtol=1e-2),
    },
    "layer_norm": {
        DType.FLOAT32: Tolerance(atol=1e-4, rtol=1e-4),
        DType.FLOAT16: Tolerance(atol=1e-2, rtol=1e-2),
    },
    "sum": {DType.FLOAT32: Tolerance(atol=1e-2, rtol=1e-4), DType.FLOAT16: Tolerance(atol=1e-2, rtol=1e-4)},
}
_BF16_TOLERANCE = Tolerance(atol=2e-2, rtol=2e-2)


# --- what a built-in suite is -----------------------------------------------------------------------------


@dataclass(frozen=True)
class StepResult:
    test: TestResult
    benchmark: Benchmark | None = None


@dataclass(frozen=True)
class Step:
    """One test of a built-in suite, run when the runner gets to it (so progress can be shown)."""

    name: str
    run: Callable[[], StepResult]


@dataclass(frozen=True)
class SuitePlan:
    steps: tuple[Step, ...]
    notes: tuple[str, ...] = ()  # what a reader of the report must know, e.g. a reduced interpreter sweep


BuiltinSuiteFn = Callable[[str, SluiceConfig], SuitePlan]  # (the suite's name in the tier, config) -> plan


def case_name(kernel: str, shape: tuple[int, ...], dtype: str, config: Mapping[str, int] = {}) -> str:
    """`kernel[MxNxK:dtype:KEY=value,...]`, the same form as `Benchmark.key`."""
    dims = "x".join(str(n) for n in shape)
    options = ",".join(f"{k}={v}" for k, v in sorted(config.items()))
    return f"{kernel}[{dims}:{dtype}" + (f":{options}]" if options else "]")


# --- checking a kernel against torch ----------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """One kernel launch checked against torch: `run` returns what the kernel computed and the reference."""

    kernel: str
    shape: tuple[int, ...]
    dtype: DType
    tolerance: Tolerance
    run: Callable[[], tuple[torch.Tensor, torch.Tensor]]
    config: Mapping[str, int] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return case_name(self.kernel, self.shape, self.dtype.value, self.config)


def run_check(suite: str, check: Check) -> TestResult:
    """Run `check`; a failure names the kernel, shape and dtype, how many elements were off, by how much."""
    started = time.perf_counter()
    try:
        got, expected = check.run()
        problem = mismatch(got, expected, check.tolerance)
    except Exception as err:  # a kernel that does not compile or launch is this test's error, not the run's
        return _errored(suite, check.name, err, started)
    return TestResult(
        suite=suite,
        name=check.name,
        outcome=Outcome.FAILED if problem else Outcome.PASSED,
        duration_s=time.perf_counter() - started,
        message=f"{check.name}: {problem}" if problem else None,
    )


def mismatch(got: torch.Tensor, expected: torch.Tensor, tolerance: Tolerance) -> str | None:
    """Why `got` is not `expected` within `tolerance`, in words; None when it is."""
    if tuple(got.shape) != tuple(expected.shape):
        return f"shape {tuple(got.shape)}, expected {tuple(expected.shape)}"
    got64 = got.detach().to("cpu", torch.float64)
    want64 = expected.detach().to("cpu", torch.float64)
    error = (got64 - want64).abs()
    bad = ~(error <= tolerance.atol + tolerance.rtol * want64.abs())  # a NaN error is bad
    if not bool(bad.any()):
        return None
    worst = torch.where(torch.isnan(error), math.inf, error)
    at = tuple(int(i) for i in torch.unravel_index(torch.argmax(worst), tuple(error.shape)))
    text = (
        f"{int(bad.sum())} of {bad.numel()} elements outside atol={tolerance.atol:g}, "
        f"rtol={tolerance.rtol:g}; max abs error {float(error[at]):.4g} at {list(at)} "
        f"(got {float(got64[at]):.6g}, expected {float(want64[at]):.6g})"
    )
    unwritten = int((torch.isnan(got64) & ~torch.isnan(want64)).sum())
    return text + (f"; {unwritten} NaN where the reference is finite (never written?)" if unwritten else "")


def max_error(got: torch.Tensor, expected: torch.Tensor) -> float:
    error = (got.detach().to("cpu", torch.float64) - expected.detach().to("cpu", torch.float64)).abs()
    return float(error.max()) if error.numel() else 0.0


def _errored(suite: str, name: str, err: BaseException, started: float) -> TestResult:
    message = f"{name}: {type(err).__name__}: {err}"
    return TestResult(
        suite=suite,
        name=name,
        outcome=Outcome.ERROR,
        duration_s=time.perf_counter() - started,
        message=message[:MAX_MESSAGE],
    )


# --- inputs and references --------------------------------------------------------------------------------


def _randn(name: str, *shape: int, dtype: torch.dtype, scale: float = 1.0) -> torch.Tensor:
    """Reproducible inputs: the generator is seeded from the case's name, on the CPU, then moved."""
    generator = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    values = torch.randn(*shape, generator=generator, dtype=torch.float32) * scale
    return values.to(dtype).to(kernels.BACKEND.device)


@dataclass(frozen=True)
class Prepared:
    """A kernel ready to run on its inputs, and torch's answer for the same inputs."""

    op: kernels.Op
    reference: Callable[[], torch.Tensor]
    tolerance: Tolerance


def prepare(
    kernel: str,
    shape: tuple[int, ...],
    dtype: DType,
    *,
    tolerances: Mapping[DType, Tolerance],
    block: tuple[int, ...] | None = None,
    num_warps: int | None = None,
    num_stages: int | None = None,
) -> Prepared:
    """Inputs for `kernel` at `shape` and `dtype`, the launches on them, and the torch reference."""
    torch_dtype = TORCH_DTYPES[dtype]
    name = case_name(kernel, shape, dtype.value)
    if kernel == "matmul":
        m, n, k = shape
        scale = k**-0.25  # unit-variance outputs whatever K is, so one tolerance fits every shape
        a = _randn(name + "a", m, k, dtype=torch_dtype, scale=scale)
        b = _randn(name + "b", k, n, dtype=torch_dtype, scale=scale)
        triple = (block[0], block[1], block[2]) if block else (64, 64, 32)
        op = kernels.matmul(a, b, block=triple, num_warps=num_warps, num_stages=num_stages)
        return Prepared(op, lambda: a.double() @ b.double(), tolerances[dtype])
    tolerance = _TOLERANCES[kernel].get(dtype, _BF16_TOLERANCE)
    x = _randn(name + "x", *shape, dtype=torch_dtype)
    if kernel == "vector_add":
        y = _randn(name + "y", *shape, dtype=torch_dtype)
        return Prepared(kernels.add(x, y), lambda: x.double() + y.double(), tolerance)
    if kernel == "softmax":
        return Prepared(kernels.softmax(x), lambda: torch.softmax(x.double(), dim=-1), tolerance)
    if kernel == "layer_norm":
        weight = _randn(name + "w", shape[-1], dtype=torch_dtype)
        bias = _randn(name + "b", shape[-1], dtype=torch_dtype)
        op = kernels.layer_norm(x, weight, bias, eps=1e-5)
        return Prepared(op, lambda: _layer_norm_reference(x, weight, bias), tolerance)
    if kernel == "sum":
        return Prepared(kernels.total(x), lambda: x.double().sum().reshape(1), tolerance)
    raise ValueError(f"no kernel {kernel!r}")


def _layer_norm_reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    shape = (x.shape[-1],)
    return torch.nn.functional.layer_norm(x.double(), shape, weight.double(), bias.double(), eps=1e-5)


def _check_of(kernel: str, shape: tuple[int, ...], dtype: DType, **options: Any) -> Check:
    prepared = prepare(kernel, shape, dtype, **options)
    config = prepared.op.config if kernel == "matmul" else {}
    return Check(
        kernel, shape, dtype, prepared.tolerance, lambda: (prepared.op(), prepared.reference()), config
    )


def _lazy(suite: str, make: Callable[[], Check], name: str) -> Step:
    """A step that builds its inputs only when it runs, so a big sweep never holds them all at once."""

    def run() -> StepResult:
        started = time.perf_counter()
        try:
            check = make()
        except Exception as err:
            return StepResult(_errored(suite, name, err, started))
        return StepResult(run_check(suite, check))

    return Step(name, run)


# --- smoke (L1) -------------------------------------------------------------------------------------------

# Small shapes that are not multiples of the blocks, so every mask is exercised; seconds in the interpreter.
SMOKE_CASES: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("vector_add", (10000,)),
    ("softmax", (37, 100)),
    ("layer_norm", (37, 100)),
    ("sum", (10000,)),
    ("matmul", (100, 70, 50)),
)
SMOKE_DTYPES = (DType.FLOAT32, DType.FLOAT16)
SMOKE_MATMUL_BLOCK = (32, 32, 32)


def smoke(suite: str, config: SluiceConfig) -> SuitePlan:
    """Each kernel once per dtype at a small shape, against torch."""
    notes = _workarounds(SMOKE_DTYPES)
    tolerances = _numerics_tolerances(config)
    steps = []
    for kernel, shape in SMOKE_CASES:
        block = SMOKE_MATMUL_BLOCK if kernel == "matmul" else None
        for dtype in SMOKE_DTYPES:
            name = case_name(kernel, shape, dtype.value, _matmul_config(block) if block else {})

            def make(
                kernel: str = kernel, shape: Any = shape, dtype: DType = dtype, block: Any = block
            ) -> Check:
                return _check_of(kernel, shape, dtype, tolerances=tolerances, block=block)

            steps.append(_lazy(suite, make, name))
    return SuitePlan(tuple(steps), notes)


def _workarounds(matmul_dtypes: tuple[DType, ...]) -> tuple[str, ...]:
    """The interpreter's workarounds, when matmuls of these dtypes would need one (bf16 only, so far)."""
    return backend.interpreter_workarounds() if DType.BFLOAT16 in matmul_dtypes else ()


def _numerics_tolerances(config: SluiceConfig) -> dict[DType, Tolerance]:
    return {dtype: config.numerics.tolerances.for_dtype(dtype) for dtype in DType}


def _matmul_config(block: tuple[int, ...], group_m: int = 8) -> dict[str, int]:
    return {"BLOCK_M": block[0], "BLOCK_N": block[1], "BLOCK_K": block[2], "GROUP_M": group_m}


# --- numerics (L2) ----------------------------------------------------------------------------------------


def numerics(suite: str, config: SluiceConfig) -> SuitePlan:
    """matmul over every shape x dtype x block of `numerics`, with per-dtype tolerances."""
    sweep = config.numerics
    notes = list(_workarounds(sweep.dtypes))
    shapes = sweep.shapes
    if kernels.BACKEND.interpreter and sweep.interpreter_shapes != sweep.shapes:
        shapes = sweep.interpreter_shapes
        notes.append(
            f"interpreter: ran numerics.interpreter_shapes ({len(shapes)} shapes) instead of "
            f"numerics.shapes ({len(sweep.shapes)} shapes); a GPU runs the full sweep"
        )
    tolerances = _numerics_tolerances(config)
    steps = []
    for shape in shapes:
        for dtype in sweep.dtypes:
            for block in sweep.blocks:
                name = case_name("matmul", shape, dtype.value, _matmul_config(block))

                def make(shape: tuple[int, ...] = shape, dtype: DType = dtype, block: Any = block) -> Check:
                    return _check_of("matmul", shape, dtype, tolerances=tolerances, block=block)

                steps.append(_lazy(suite, make, name))
    return SuitePlan(tuple(steps), tuple(notes))


# --- bench (L3) -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    samples_ms: tuple[float, ...]
    warmup_iters: int
    warmup_budget_ms: float  # 0 when the iterations were counted rather than budgeted
    measure_budget_ms: float
    note: str | None = None


def time_on_gpu(fn: Callable[[], object], *, warmup_ms: float, rep_ms: float) -> Timing:
    """triton.testing.do_bench: the L2 cache is flushed before each measured run; every sample is kept."""
    import triton.testing

    calls = 0

    def counted() -> None:
        nonlocal calls
        calls += 1
        fn()

    samples = [
        float(s) for s in triton.testing.do_bench(counted, warmup=warmup_ms, rep=rep_ms, return_mode="all")
    ]
    # do_bench decides its iteration counts from the budgets; every call it did not measure warmed up.
    return Timing(tuple(samples), max(0, calls - len(samples)), float(warmup_ms), float(rep_ms))


def time_on_cpu(fn: Callable[[], object], *, warmup_iters: int, iters: int) -> Timing:
    """The same callable timed with perf_counter for fixed iteration counts (the interpreter's timings)."""
    for _ in range(warmup_iters):
        fn()
    samples = []
    for _ in range(iters):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    note = (
        f"interpreter: {warmup_iters} warmup + {iters} measured iterations by count, timed with "
        "time.perf_counter; not comparable with GPU timings"
    )
    return Timing(tuple(samples), warmup_iters, 0.0, 0.0, note)


@dataclass(frozen=True)
class Summary:
    median_ms: float
    p10_ms: float
    p90_ms: float
    p99_ms: float
    iqr_ms: float


def summarise(samples: tuple[float, ...]) -> Summary:
    p10, p25, p50, p75, p90, p99 = (float(v) for v in np.percentile(samples, [10, 25, 50, 75, 90, 99]))
    return Summary(median_ms=p50, p10_ms=p10, p90_ms=p90, p99_ms=p99, iqr_ms=p75 - p25)


@dataclass(frozen=True)
class Compilation:
    cold_ms: float | None = None
    warm_ms: float | None = None
    facts: KernelFacts | None = None
    note: str | None = None


def compile_launch(launch: kernels.Launch) -> Compilation:
    """Compile a fresh copy of `launch`'s kernel twice: into an empty cache (cold), then from it (warm).

    Also reads registers, spills and shared memory from the compiled kernel where the backend exposes
    them. Never raises: what cannot be measured stays None, and the note says why.
    """
    if kernels.BACKEND.interpreter:
        return Compilation(note="interpreter: nothing is compiled")
    try:
        import triton

        source = launch.kernel.fn
        with tempfile.TemporaryDirectory(prefix="sluice-triton-cache-") as cache, triton.knobs.cache.scope():
            triton.knobs.cache.dir = cache
            cold_ms, compiled = _timed_warmup(triton.jit(source), launch)
            warm_ms, _ = _timed_warmup(triton.jit(source), launch)
    except Exception as err:
        return Compilation(note=f"compile times not measured: {type(err).__name__}: {err}"[:MAX_MESSAGE])
    return Compilation(cold_ms, warm_ms, _facts(compiled))


def _timed_warmup(kernel: Any, launch: kernels.Launch) -> tuple[float, Any]:
    torch.cuda.synchronize()
    started = time.perf_counter()
    compiled = kernel.warmup(*launch.args, grid=launch.grid, **launch.options)
    return (time.perf_counter() - started) * 1000, compiled


def _facts(compiled: Any) -> KernelFacts | None:
    with contextlib.suppress(Exception):
        compiled._init_handles()  # loads the binary; n_regs and n_spills are read then
    facts = KernelFacts(
        registers=_int_or_none(getattr(compiled, "n_regs", None)),
        spills=_int_or_none(getattr(compiled, "n_spills", None)),
        shared_bytes=_int_or_none(getattr(getattr(compiled, "metadata", None), "shared", None)),
    )
    return facts if facts != KernelFacts() else None


def _int_or_none(value: object) -> int | None:
    return int(value) if isinstance(value, int | np.integer) else None


def bench(suite: str, config: SluiceConfig) -> SuitePlan:
    """Each case of `bench`: correctness against torch, compile times, kernel facts and the timing samples."""
    settings = config.bench
    interpreter = kernels.BACKEND.interpreter
    cases = settings.interpreter_cases if interpreter else settings.cases
    notes = list(_workarounds(tuple(c.dtype for c in cases if c.kernel == BenchKernel.MATMUL)))
    if interpreter:
        notes.append(
            f"interpreter: ran bench.interpreter_cases ({len(cases)}) instead of bench.cases "
            f"({len(settings.cases)}); timings are kept but not comparable"
        )
    tolerances = _numerics_tolerances(config)
    steps = [_bench_step(suite, case, settings, tolerances) for case in cases]
    return SuitePlan(tuple(steps), tuple(notes))


def _bench_step(
    suite: str, case: BenchCase, settings: BenchConfig, tolerances: Mapping[DType, Tolerance]
) -> Step:
    shape = tuple(case.shape)
    preview = case_name(case.kernel.value, shape, case.dtype.value, _bench_config(case))

    def run() -> StepResult:
        started = time.perf_counter()
        try:
            return _measure(suite, case, settings, tolerances)
        except Exception as err:
            return StepResult(_errored(suite, preview, err, started))

    return Step(preview, run)


def _bench_config(case: BenchCase) -> dict[str, int]:
    if case.kernel != BenchKernel.MATMUL:
        return {}
    options = _matmul_config(case.block or (64, 64, 32))
    options |= {k: v for k, v in (("num_warps", case.num_warps), ("num_stages", case.num_stages)) if v}
    return options


def _measure(
    suite: str, case: BenchCase, settings: BenchConfig, tolerances: Mapping[DType, Tolerance]
) -> StepResult:
    started = time.perf_counter()
    shape = tuple(case.shape)
    prepared = prepare(
        case.kernel.value,
        shape,
        case.dtype,
        tolerances=tolerances,
        block=case.block,
        num_warps=case.num_warps,
        num_stages=case.num_stages,
    )
    op = prepared.op
    compilation = compile_launch(op.launches[0])
    got, expected = op().clone(), prepared.reference()
    problem = mismatch(got, expected, prepared.tolerance)
    if kernels.BACKEND.interpreter:
        timing = time_on_cpu(
            op, warmup_iters=settings.interpreter_warmup_iters, iters=settings.interpreter_iters
        )
    else:
        timing = time_on_gpu(op, warmup_ms=settings.warmup_ms, rep_ms=settings.rep_ms)
    name = case_name(case.kernel.value, shape, case.dtype.value, op.config)
    summary = summarise(timing.samples_ms)
    benchmark = Benchmark(
        suite=suite,
        kernel=case.kernel.value,
        shape=shape,
        dtype=case.dtype.value,
        config=dict(op.config),
        warmup_iters=timing.warmup_iters,
        measured_iters=len(timing.samples_ms),
        warmup_budget_ms=timing.warmup_budget_ms,
        measure_budget_ms=timing.measure_budget_ms,
        samples_ms=timing.samples_ms,
        **vars(summary),
        correctness_error=max_error(got, expected),
        facts=compilation.facts,
        compile_cold_ms=compilation.cold_ms,
        compile_warm_ms=compilation.warm_ms,
        comparable=not kernels.BACKEND.interpreter,
        note="; ".join(n for n in (timing.note, compilation.note) if n) or None,
    )
    test = TestResult(
        suite=suite,
        name=name,
        outcome=Outcome.FAILED if problem else Outcome.PASSED,
        duration_s=time.perf_counter() - started,
        message=f"{name}: {problem}" if problem else None,
    )
    return StepResult(test, benchmark)


BUILTINS: Mapping[BuiltinSuite, BuiltinSuiteFn] = {
    BuiltinSuite.SMOKE: smoke,
    BuiltinSuite.NUMERICS: numerics,
    BuiltinSuite.BENCH: bench,
}
