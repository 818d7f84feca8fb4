"""The sandbox tree's layout: its areas, fixed paths, the fork's Sluice config, and file makers."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bot.demo.text import SourceFile
from bot.demo.vocabulary import CAMEL_NOUNS, CAMEL_VERBS, SNAKE
from bot.demo.writer import Writer


@dataclass(frozen=True)
class Area:
    key: str  # edit area: lit, pytest, docs, lang, transforms, ...
    directory: str
    kind: str  # cpp, cc, h/td, py, pytest, mlir, md
    weight: float
    seeds: tuple[str, ...]
    scope: str = ""
    library: str = ""  # CMake library for C++ directories
    fixed: bool = False  # exactly the seeds, however large the tree


def _names(text: str) -> tuple[str, ...]:
    return tuple(text.split())


AREAS = (
    Area(
        "include",
        "include/triton/Dialect/Triton/IR",
        "h/td",
        0.015,
        _names("Dialect.h Traits.h Types.h Utility.h TritonOps.td TritonTypes.td TritonAttrDefs.td"),
        "mlir::triton",
    ),
    Area(
        "interface",
        "include/triton/Dialect/TritonGPU/IR",
        "h/td",
        0.015,
        _names(
            "Dialect.h Attributes.h LinearLayoutConversions.h TritonGPUInterfaces.h TritonGPUOps.td "
            "TritonGPUAttrDefs.td TritonGPUTypes.td"
        ),
        "mlir::triton::gpu",
    ),
    Area(
        "include",
        "include/triton/Dialect/TritonNvidiaGPU/IR",
        "h/td",
        0.008,
        _names("Dialect.h TritonNvidiaGPUOps.td TritonNvidiaGPUAttrDefs.td"),
        "mlir::triton::nvidia_gpu",
    ),
    Area(
        "dialect_ir",
        "lib/Dialect/Triton/IR",
        "cpp",
        0.012,
        _names("Dialect.cpp Ops.cpp Traits.cpp Types.cpp Utility.cpp OpInterfaces.cpp"),
        "mlir::triton",
        "TritonIR",
    ),
    Area(
        "transforms",
        "lib/Dialect/Triton/Transforms",
        "cpp",
        0.02,
        _names(
            "Combine.cpp ReorderBroadcast.cpp RewriteTensorPointer.cpp LoopUnroll.cpp "
            "LoopInvariantCodeMotion.cpp ArithTypeConversion.cpp"
        ),
        "mlir::triton",
        "TritonTransforms",
    ),
    Area(
        "dialect_ir",
        "lib/Dialect/TritonGPU/IR",
        "cpp",
        0.015,
        _names("Dialect.cpp Ops.cpp LinearLayoutConversions.cpp Types.cpp"),
        "mlir::triton::gpu",
        "TritonGPUIR",
    ),
    Area(
        "ttg_transforms",
        "lib/Dialect/TritonGPU/Transforms",
        "cpp",
        0.05,
        _names(
            "AccelerateMatmul.cpp Coalesce.cpp CombineTensorSelectAndIf.cpp F32DotTC.cpp FuseNestedLoops.cpp "
            "OptimizeAccumulatorInit.cpp OptimizeDotOperands.cpp OptimizeThreadLocality.cpp Prefetch.cpp "
            "ReduceDataDuplication.cpp RemoveLayoutConversions.cpp ReorderInstructions.cpp Utility.cpp "
            "LoopScheduling.cpp PipelineExpander.cpp SoftwarePipeliner.cpp MatmulLoopPipeline.cpp "
            "HoistTMEMAlloc.cpp AutomaticWarpSpecialization.cpp"
        ),
        "mlir::triton::gpu",
        "TritonGPUTransforms",
    ),
    Area(
        "dialect_ir",
        "lib/Dialect/TritonNvidiaGPU/IR",
        "cpp",
        0.008,
        _names("Dialect.cpp Ops.cpp Types.cpp"),
        "mlir::triton::nvidia_gpu",
        "TritonNvidiaGPUIR",
    ),
    Area(
        "transforms",
        "lib/Dialect/TritonNvidiaGPU/Transforms",
        "cpp",
        0.02,
        _names(
            "FenceInsertion.cpp PlanCTA.cpp TMALowering.cpp KeepAccInTMem.cpp PromoteLHSToTMem.cpp "
            "OptimizeDescriptorEncoding.cpp"
        ),
        "mlir::triton::nvidia_gpu",
        "TritonNvidiaGPUTransforms",
    ),
    Area(
        "analysis",
        "lib/Analysis",
        "cpp",
        0.015,
        _names("Alias.cpp Allocation.cpp AxisInfo.cpp Membar.cpp Utility.cpp"),
        "mlir",
        "TritonAnalysis",
    ),
    Area(
        "conversion",
        "lib/Conversion/TritonGPUToLLVM",
        "cpp",
        0.05,
        _names(
            "AllocateSharedMemory.cpp AssertOpToLLVM.cpp ControlFlowOpToLLVM.cpp ConvertLayoutOpToLLVM.cpp "
            "ElementwiseOpToLLVM.cpp FuncOpToLLVM.cpp GatherOpToLLVM.cpp HistogramOpToLLVM.cpp "
            "MakeRangeOpToLLVM.cpp MemoryOpToLLVM.cpp PrintOpToLLVM.cpp ReduceOpToLLVM.cpp ScanOpToLLVM.cpp "
            "SPMDOpToLLVM.cpp TypeConverter.cpp Utility.cpp ViewOpToLLVM.cpp"
        ),
        "mlir::triton::gpu",
        "TritonGPUToLLVM",
    ),
    Area(
        "conversion",
        "lib/Conversion/TritonToTritonGPU",
        "cpp",
        0.01,
        _names("TritonGPUConversion.cpp TritonToTritonGPUPass.cpp"),
        "mlir::triton",
        "TritonToTritonGPU",
    ),
    Area(
        "backend_py", "third_party/nvidia/backend", "py", 0.0, _names("__init__.py compiler.py"), fixed=True
    ),
    Area("driver", "third_party/nvidia/backend", "py", 0.0, _names("driver.py"), fixed=True),
    Area(
        "nvidia_lib",
        "third_party/nvidia/lib/TritonNVIDIAGPUToLLVM",
        "cpp",
        0.05,
        _names(
            "BarrierOpToLLVM.cpp ClusterOpsToLLVM.cpp ConvertLayoutOpToLLVM.cpp DotOpToLLVM.cpp "
            "ElementwiseOpToLLVM.cpp LoadStoreOpToLLVM.cpp MemoryOpToLLVM.cpp TensorMemoryToLLVM.cpp "
            "TMAToLLVM.cpp TritonGPUToLLVM.cpp Utility.cpp WGMMA.cpp MMAv2.cpp MMAv5.cpp"
        ),
        "mlir::triton::NVIDIA",
        "TritonNVIDIAGPUToLLVM",
    ),
    Area(
        "nvidia_lib",
        "third_party/nvidia/lib/NVGPUToLLVM",
        "cpp",
        0.006,
        _names("NVGPUToLLVMPass.cpp"),
        "mlir::triton::NVIDIA",
        "NVGPUToLLVM",
    ),
    Area("backend_py", "third_party/amd/backend", "py", 0.0, _names("__init__.py compiler.py"), fixed=True),
    Area("driver", "third_party/amd/backend", "py", 0.0, _names("driver.py"), fixed=True),
    Area(
        "amd_lib",
        "third_party/amd/lib/TritonAMDGPUToLLVM",
        "cpp",
        0.05,
        _names(
            "BufferOpsEmitter.cpp BuiltinFuncToLLVM.cpp ConvertLayoutOpToLLVM.cpp DotOpToLLVM.cpp "
            "ElementwiseOpToLLVM.cpp LoadStoreOpToLLVM.cpp MemoryOpToLLVM.cpp SchedInstructions.cpp "
            "TargetInfo.cpp UpcastMXFPToLLVM.cpp Utility.cpp MFMA.cpp WMMA.cpp"
        ),
        "mlir::triton::AMD",
        "TritonAMDGPUToLLVM",
    ),
    Area(
        "amd_lib",
        "third_party/amd/lib/TritonAMDGPUTransforms",
        "cpp",
        0.04,
        _names(
            "AccelerateAMDMatmul.cpp BlockPingpong.cpp CanonicalizePointers.cpp ConvertToBufferOps.cpp "
            "OptimizeEpilogue.cpp ReorderInstructions.cpp StreamPipeline.cpp CoalesceAsyncCopy.cpp "
            "InThreadTranspose.cpp FoldTrueCmpIOp.cpp"
        ),
        "mlir::triton::AMD",
        "TritonAMDGPUTransforms",
    ),
    Area(
        "pysrc",
        "python/src",
        "cc",
        0.012,
        _names("ir.cc passes.cc interpreter.cc llvm.cc main.cc specialize.cc"),
    ),
    Area(
        "lang",
        "python/triton/language",
        "py",
        0.035,
        _names("core.py semantic.py math.py random.py standard.py _utils.py"),
    ),
    Area(
        "runtime",
        "python/triton/runtime",
        "py",
        0.02,
        _names("autotuner.py build.py cache.py errors.py interpreter.py jit.py _allocation.py"),
    ),
    Area(
        "compiler_py",
        "python/triton/compiler",
        "py",
        0.012,
        _names("code_generator.py compiler.py errors.py make_launcher.py"),
    ),
    Area(
        "pytest",
        "python/test/unit/language",
        "pytest",
        0.12,
        _names(
            "test_core.py test_conversions.py test_matmul.py test_random.py test_standard.py "
            "test_block_pointer.py test_annotations.py test_line_info.py test_pipeliner.py "
            "test_compile_errors.py test_libdevice.py test_tensor_descriptor.py"
        ),
    ),
    Area(
        "lit",
        "test/TritonGPU",
        "mlir",
        0.13,
        _names(
            "coalesce.mlir combine.mlir loop-pipeline.mlir reorder-instructions.mlir accelerate-matmul.mlir "
            "optimize-locality.mlir prefetch.mlir canonicalize.mlir invalid.mlir ops.mlir"
        ),
    ),
    Area(
        "lit",
        "test/Conversion",
        "mlir",
        0.10,
        _names(
            "tritongpu_to_llvm.mlir tritongpu_to_llvm_hopper.mlir allocate_shared_memory.mlir "
            "triton_to_tritongpu.mlir reduce_to_llvm.mlir scan_to_llvm.mlir"
        ),
    ),
    Area(
        "lit",
        "test/Triton",
        "mlir",
        0.06,
        _names(
            "combine.mlir canonicalize.mlir invalid.mlir ops.mlir rewrite-tensor-pointer.mlir "
            "loop-unroll.mlir reorder-broadcast.mlir"
        ),
    ),
    Area(
        "docs",
        "docs",
        "md",
        0.04,
        _names("index.md installation.md debugging.md python-api.md layouts.md contributing.md"),
    ),
)

LLVM_HASH_PATH = "cmake/llvm-hash.txt"
TOOLCHAIN_PATH = "cmake/nvidia-toolchain-version.json"
ROOT_CMAKE = "CMakeLists.txt"
SLUICE_CONFIG = ".github/sluice.yml"
EXTENSION_TESTS = 8  # test cases in third_party/tlx/test (the parametrised ones counted one by one)
# L1: the fork's TLX tests and the built-in smoke kernels; L2: the numerics sweep; L3 the default (bench).
SLUICE_YML = f"""\
fork:
  repo: sandbox/triton-fork
extensions:
  - name: tlx
    paths: ["third_party/tlx/**"]
    interfaces: ["include/triton/Dialect/TritonGPU/IR/**"]
    suites: ["third_party/tlx/test"]
tiers:
  l1:
    suites:
      - name: tlx
        command: [python3, -m, pytest, -q, -p, no:cacheprovider, third_party/tlx/test, "--junitxml={{junit}}"]
        expected_tests: {EXTENSION_TESTS}
        timeout_seconds: 600
      - name: smoke
        builtin: smoke
  l2:
    suites:
      - name: numerics
        builtin: numerics
"""

_TD_PREFIX = {"Triton": "TT", "TritonGPU": "TTG", "TritonNvidiaGPU": "TTNG"}
_LIT_FLAGS = (
    "tritongpu-coalesce",
    "tritongpu-remove-layout-conversions",
    "convert-triton-gpu-to-llvm",
    "tritongpu-pipeline",
    "canonicalize",
    "triton-combine",
    "tritonamdgpu-stream-pipeline",
)


def synthetic_name(area: Area, writer: Writer, toggle: int) -> str:
    w = writer
    if area.kind == "cpp":
        if area.key in ("conversion", "nvidia_lib", "amd_lib") and toggle % 2:
            return f"{w.pick(CAMEL_NOUNS)}{w.pick(('OpToLLVM', 'Lowering', 'Patterns'))}.cpp"
        return f"{w.pick(CAMEL_VERBS)}{w.pick(CAMEL_NOUNS)}.cpp"
    if area.kind == "h/td":
        return f"{w.pick(CAMEL_NOUNS)}{w.pick(('Utils.h', 'Interfaces.h', 'Ops.td', 'Attrs.td'))}"
    if area.kind == "cc":
        return f"{w.pick(SNAKE)}_{w.pick(SNAKE)}.cc"
    if area.kind == "pytest":
        return f"test_{w.pick(SNAKE)}_{w.pick(SNAKE)}.py"
    if area.kind == "mlir":
        return f"{w.pick(SNAKE)}{w.pick(('-', '_'))}{w.pick(SNAKE)}.mlir"
    if area.kind == "md":
        return f"{w.pick(SNAKE)}-{w.pick(SNAKE)}.md"
    return f"{w.pick(SNAKE)}_{w.pick(SNAKE)}.py"


def area_counts(files: int) -> list[int]:
    fixed = sum(len(a.seeds) for a in AREAS if a.fixed)
    libs = len({a.directory for a in AREAS if a.library})
    budget = files - fixed - libs - 3  # root CMakeLists, llvm hash, toolchain json
    total_weight = sum(a.weight for a in AREAS)
    counts = [len(a.seeds) if a.fixed else max(1, int(a.weight / total_weight * budget)) for a in AREAS]
    flexible = sorted((i for i, a in enumerate(AREAS) if not a.fixed), key=lambda i: -AREAS[i].weight)
    k = 0
    while sum(counts) != files - libs - 3:
        i = flexible[k % len(flexible)]
        if sum(counts) < files - libs - 3:
            counts[i] += 1
        elif counts[i] > 1:
            counts[i] -= 1
        k += 1
    return counts


def make_file(area: Area, path: str, writer: Writer) -> SourceFile:
    name = Path(path).name
    stem = Path(path).stem
    if area.kind == "cpp":
        return writer.cpp_file(
            stem,
            area.scope,
            nested=writer.rng.random() < 0.5,
            patterns=area.key in ("conversion", "nvidia_lib", "amd_lib"),
        )
    if area.kind == "cc":
        return writer.cpp_file(stem, "", nested=False, patterns=False)
    if area.kind == "h/td":
        if name.endswith(".td"):
            dialect = path.split("/")[3]
            return writer.td_file(path, _TD_PREFIX[dialect])
        return writer.h_file(path, area.scope)
    if area.kind == "pytest":
        return writer.pytest_file()
    if area.kind == "mlir":
        return writer.mlir_file(writer.pick(_LIT_FLAGS))
    if area.kind == "md":
        return writer.md_file(stem)
    return writer.py_module(language=area.key == "lang")
