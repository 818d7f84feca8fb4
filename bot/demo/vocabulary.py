"""Word tables the sandbox writes Triton-like code, commit messages and names from."""

from __future__ import annotations


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


CAMEL_VERBS = _words(
    "Accelerate Optimize Remove Reorder Combine Hoist Sink Coalesce Pipeline Prefetch Schedule Lower Convert "
    "Allocate Fuse Canonicalize Propagate Partition Specialize Decompose Materialize Legalize Rewrite Split "
    "Verify Simplify Promote Annotate Insert Elide"
)
CAMEL_NOUNS = _words(
    "Matmul DotOperands LayoutConversions Instructions TensorSelect SharedMemory Barriers AsyncCopy "
    "TMAStores "
    "TMEMAlloc WarpGroups LoadStore Reductions Scans Histograms Atomics Broadcasts Descriptors Fences Loops "
    "Masks Pointers Swizzling Accumulators ConvertLayout Epilogue Prologue ScaledDot Gather "
    "Transposes Splats "
    "Constants Casts Buffers MMAv5 WGMMA MFMA WMMA LDS BufferOps Stages Partitions"
)
SNAKE = _words(
    "async copy layout reduce scan dot mma wgmma mfma tma descriptor barrier pipeline prefetch "
    "coalesce buffer "
    "shared tensor block pointer atomic histogram gather scatter cast fp8 bf16 int4 mxfp warp cta "
    "cluster loop "
    "schedule epilogue prologue swizzle remat hoist sink fence alloc load store split join "
    "transpose broadcast "
    "splat math random cumsum sort topk where clamp dequant matmul attention softmax layernorm persistent "
    "stream kpack"
)
FN_VERBS = _words(
    "get compute lower convert emit build create infer verify rewrite materialize hoist sink fold propagate "
    "collect find update apply lookup insert replace allocate schedule expand split pack swizzle"
)
PRED_VERBS = ("is", "has", "can", "should")
FN_NOUNS = _words(
    "SharedEncoding WarpsPerCTA ThreadsPerWarp SizePerThread Order DotOperand MmaLayout BlockedLayout "
    "LinearLayout Accumulator AsyncCopy Barrier Descriptor TMAStore LoadOp StoreOp Reduction ScanOp Stage "
    "LoopCarried Yield ForOp ConvertLayout Offsets Mask Pointer Stride ElemTy BitWidth NumElements "
    "Vectorization Alignment Contiguity SwizzlingFactor Padding MemDesc Alloc Partition Cluster Fence WGMMA "
    "MFMA Scale Fp8Cast Histogram Atomic"
)
CPP_VARS = _words(
    "layout encoding shape order numWarps rank elemTy loc ctx mod forOp yieldOp user operand result srcTy "
    "dstTy vecSize bitwidth numElems stride offset mask alloc barrier warpsPerCTA sizePerThread "
    "threadsPerWarp newOp cvt loadOp storeOp dotOp accTy kWidth opIdx numStages tensorTy memDesc sharedEnc "
    "parent region block value attr dims perm tile lane warp pred"
)
CPP_ATTRS = _words(
    "BlockedEncodingAttr NvidiaMmaEncodingAttr AMDMfmaEncodingAttr DotOperandEncodingAttr SliceEncodingAttr "
    "SwizzledSharedEncodingAttr NVMMASharedEncodingAttr LinearEncodingAttr AMDWmmaEncodingAttr"
)
CPP_OPS = _words(
    "triton::LoadOp triton::StoreOp triton::DotOp ConvertLayoutOp LocalAllocOp LocalLoadOp "
    "AsyncCopyGlobalToLocalOp triton::SplatOp triton::BroadcastOp arith::ConstantOp triton::ReduceOp "
    "MemDescSubviewOp triton::nvidia_gpu::WarpGroupDotOp"
)
CPP_EXPRS = (
    "cast<RankedTensorType>({a}.getType())",
    "getOrder({a})",
    "{a}.getEncoding()",
    "{a}.getLoc()",
    "{a}->getParentOfType<ModuleOp>()",
    "TritonGPUDialect::getNumWarps({a})",
    "getShapePerCTA({a})",
    "{a}.getDefiningOp()",
    "product<int64_t>({a})",
    "std::min<unsigned>({a}, {n})",
    "std::max<int64_t>({a}, {b})",
    "dyn_cast<{attr}>({a})",
    "rewriter.create<{op}>(loc, {a}, {b})",
    "builder.create<{op}>({a}.getLoc(), {b})",
    "getTotalElemsPerThread({a})",
    "{a}.getShape()[{i}]",
    "llvm::to_vector({a}.getShape())",
    "isa<{attr}>({a})",
    "{a}.getElementType().getIntOrFloatBitWidth()",
    "getContigPerThread({a})",
    "{a}.size() * {n}",
)
CPP_SIMPLE = (
    "auto {v} = {expr};",
    "auto {v} = {expr};",
    "auto {v} = {expr};",
    "unsigned {v} = {n};",
    "int64_t {v} = {a}.getRank();",
    "SmallVector<unsigned> {v}({a}.begin(), {a}.end());",
    'LDBG("{word} " << {a});',
    "{a}.push_back({b});",
    'assert({a} && "{msg}");',
    "builder.setInsertionPointAfter({a});",
    "{a}.replaceAllUsesWith({b});",
    '{a}.setAttr("{attrname}", {b});',
)
CPP_CONDS = (
    "{a}.getRank() > {n}",
    "isa<{attr}>({a})",
    "{a} == {b}",
    "!{a}.empty()",
    "{a} % {n} == 0",
    "{a}.getNumElements() > {n}",
    "!isa<{attr}>({a})",
)
CPP_RET = (  # (return type, failure expression, success expression)
    ("bool", " false", " true"),
    ("bool", " false", " {a} != nullptr"),
    ("LogicalResult", " failure()", " success()"),
    ("unsigned", " 0", " {v}"),
    ("int64_t", " 0", " {v}"),
    ("Value", " Value()", " {v}"),
    ("Attribute", " Attribute()", " {v}"),
    ("SmallVector<unsigned>", " {{}}", " {v}"),
    ("void", "", ""),
    ("void", "", ""),
)
CPP_PARAMS = (
    ("Operation *", "op"),
    ("RankedTensorType ", "tensorTy"),
    ("Attribute ", "layout"),
    ("int ", "numWarps"),
    ("ArrayRef<int64_t> ", "shape"),
    ("Value ", "value"),
    ("OpBuilder &", "builder"),
    ("scf::ForOp ", "forOp"),
    ("unsigned ", "bitwidth"),
    ("ModuleOp ", "mod"),
    ("RewriterBase &", "rewriter"),
    ("Location ", "loc"),
)
CPP_INCLUDES = (
    "mlir/Analysis/SliceAnalysis.h",
    "mlir/Dialect/SCF/IR/SCF.h",
    "mlir/IR/BuiltinAttributes.h",
    "mlir/IR/Dominance.h",
    "mlir/IR/PatternMatch.h",
    "mlir/Support/LLVM.h",
    "mlir/Transforms/GreedyPatternRewriteDriver.h",
    "triton/Analysis/AxisInfo.h",
    "triton/Analysis/Utility.h",
    "triton/Dialect/Triton/IR/Dialect.h",
    "triton/Dialect/Triton/IR/Utility.h",
    "triton/Dialect/TritonGPU/IR/Dialect.h",
    "triton/Dialect/TritonGPU/IR/LinearLayoutConversions.h",
    "triton/Dialect/TritonGPU/Transforms/Passes.h",
    "triton/Dialect/TritonGPU/Transforms/Utility.h",
    "triton/Dialect/TritonNvidiaGPU/IR/Dialect.h",
    "triton/Conversion/TritonGPUToLLVM/Utility.h",
    "triton/Tools/LinearLayout.h",
    "llvm/ADT/MapVector.h",
    "llvm/ADT/SmallVector.h",
    "llvm/ADT/TypeSwitch.h",
    "llvm/Support/Debug.h",
    "llvm/Support/MathExtras.h",
)
PY_VARS = _words(
    "input axis shape dtype ret mask other offsets block_shape num_warps num_stages ptr value scalar_ty out "
    "src dst idx keep_dims cache options key args signature constants device stream grid bound"
)
PY_EXPRS = (
    "_unwrap_if_constexpr({a})",
    "{a}.type.scalar",
    "_semantic.{fn}({a}, {b})",
    "core.{fn}({a})",
    "len({a})",
    "{a} * {n}",
    "{a}.shape[{i}]",
    "[{a}] * {n}",
    "min({a}, {b})",
    "tuple({a})",
    '{a}.get("{word}", {n})',
    'getattr({a}, "{word}", None)',
    "{a} if {b} is not None else {n}",
)
PY_SIMPLE = (
    "{v} = {expr}",
    "{v} = {expr}",
    "{v} = {expr}",
    'assert {cond}, "{msg}"',
    "{a}.append({b})",
    "{v} = {helper}({a})",
)
PY_CONDS = (
    "{a} is None",
    "not {a}",
    "{a} > {n}",
    "isinstance({a}, constexpr)",
    "{a} == {b}",
    "len({a}) != {n}",
)
PY_IMPORTS = (
    "import functools",
    "import math",
    "import os",
    "import warnings",
    "from dataclasses import dataclass",
    "from typing import Optional",
    "from typing import Sequence",
    "from . import math as _math",
    "from .._utils import validate_block_shape",
)
NOUNS = (
    "layout",
    "encoding",
    "shared memory buffer",
    "warp",
    "tile",
    "operand",
    "accumulator",
    "barrier",
    "tensor descriptor",
    "pipeline stage",
    "loop",
    "reduction",
    "scan",
    "mask",
    "pointer",
    "stride",
    "vector width",
    "swizzle pattern",
    "register",
    "CTA",
    "cluster",
    "dot operand",
    "async copy",
    "TMA load",
    "MMA instruction",
    "layout conversion",
)
TOPICS = (
    "lds bank conflicts",
    "bf16 conversions",
    "fp8 scaling",
    "mask propagation",
    "layout conversions",
    "swizzling",
    "async copies",
    "TMA descriptors",
    "shared memory reuse",
    "warp specialization",
    "MMAv3 operands",
    "dot operand layouts",
    "reduction codegen",
    "scan lowering",
    "histogram lowering",
    "atomic RMW",
    "block pointers",
    "barrier placement",
    "pipelining stages",
    "loop-carried values",
    "scalar broadcasts",
    "vectorized loads",
    "buffer ops",
    "cluster dims",
    "int64 offsets",
    "tensor descriptors",
    "constant folding",
    "register pressure",
    "small tile sizes",
    "non-power-of-two shapes",
)
PROBLEMS = (
    "a crash",
    "an assertion failure",
    "a miscompile",
    "redundant barriers",
    "an off-by-one",
    "a use-after-free",
    "excessive register usage",
    "a hang",
    "wrong results",
    "a verifier error",
    "a compile-time regression",
)
ARCHES = ("gfx942", "gfx950", "sm90", "sm100", "sm80", "Hopper", "Blackwell", "MI300", "RDNA4")
SENTENCES = (
    "Returns the {n1} used by the {n2}.",
    "The {n1} must match the {n2} of the {n3}.",
    "This is required because the {n1} may alias the {n2}.",
    "We only handle the {n1} case here; other {n2}s fall back to the generic path.",
    "Keep the {n1} in sync with the {n2} computed by `{fn}`.",
    "TODO: support {n1}s once the {n2} lowering is stable.",
    "Avoid {problem} when the {n1} is not a multiple of the {n2}.",
    "On {arch} the {n1} is always placed next to the {n2}.",
    "The {n1} is recomputed lazily, so callers may cache the {n2}.",
)
MLIR_OPS = (
    "arith.constant dense<{n}> : tensor<{s}xi32, #blocked>",
    "arith.addi %{x}, %{y} : tensor<{s}xi32, #blocked>",
    "arith.muli %{x}, %{y} : tensor<{s}xi32, #blocked>",
    "tt.splat %arg0 : !tt.ptr<f16> -> tensor<{s}x!tt.ptr<f16>, #blocked>",
    "tt.addptr %{x}, %{y} : tensor<{s}x!tt.ptr<f16>, #blocked>, tensor<{s}xi32, #blocked>",
    "tt.load %{x} : tensor<{s}x!tt.ptr<f16>, #blocked>",
    "ttg.convert_layout %{x} : tensor<{s}xf16, #blocked> -> tensor<{s}xf16, #blocked1>",
    "tt.make_range {{end = {s} : i32, start = 0 : i32}} : tensor<{s}xi32, #blocked>",
    "ttg.local_alloc %{x} : (tensor<{s}xf16, #blocked>) -> !ttg.memdesc<{s}xf16, #shared, #smem>",
)
MLIR_CHECKS = (
    "ttg.convert_layout",
    "ttg.local_alloc",
    "ttg.async_copy_global_to_local",
    "tt.load",
    "tt.store",
    "ttg.local_load",
    "tt.dot",
    "ttng.warp_group_dot",
    "amdgpu.buffer_load",
    "ttg.async_wait",
    "arith.addi",
    "tt.broadcast",
    "tt.splat",
)
TEST_EXPRS = (
    ("x * 2", "x * 2"),
    ("tl.exp(x)", "torch.exp(x)"),
    ("tl.abs(x) + 1", "x.abs() + 1"),
    ("tl.where(x > 0, x, 0.0)", "torch.relu(x)"),
    ("tl.sqrt(tl.abs(x))", "x.abs().sqrt()"),
    ("tl.sigmoid(x)", "torch.sigmoid(x)"),
    ("x * x", "x * x"),
    ("tl.maximum(x, 0.5)", "torch.clamp(x, min=0.5)"),
    ("-x", "-x"),
    ("tl.math.log1p(tl.abs(x))", "torch.log1p(x.abs())"),
)
FIRST_NAMES = _words(
    "Mara Lin Kenji Priya Tomasz Aisha Diego Ingrid Wei Olu Sanna Rafael Mei Anders Leila Jonas Keiko "
    "Mateo Nadia Pavel Yuki Farid Elena Bruno Hana Ivo Sunita Colm Greta Arjun Lucia Dmitri Amara Henrik "
    "Rosa Takumi Zainab Emil Chiara Sven"
)
LAST_NAMES = _words(
    "Lindqvist Arakawa Raman Nowak Bello Ferreira Halvorsen Zhou Adeyemi Virtanen Costa Tanaka Berg Haddad "
    "Keller Mori Alvarez Petrova Sokolov Nakamura Rahimi Ionescu Santos Kim Horvat Iyer Byrne Weber Menon "
    "Ricci Volkov Okafor Dahl Ortega Sato Mensah Brandt Conti Larsen"
)
TLX_WORDS = _words(
    "local_alloc local_view local_load local_store async_load async_load_commit_group async_load_wait_group "
    "barrier_arrive barrier_wait barrier_expect_bytes async_descriptor_load async_descriptor_store "
    "async_dot async_dot_wait storage_alias buffered_tensor async_task warp_specialize tmem_copy"
)
