"""Generated three-way conflict cases shaped like a Triton fork's, for tests and benchmarks of conflicts.

Every case is a (base, ours, theirs) triple for one path, labelled with the class a careful
reviewer would give it; mechanical and clean cases also carry the exact file a careful human
would commit. Families vary names, passes, modules and positions so that no two cases are alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.core.conflicts import ConflictClass

MECHANICAL = ConflictClass.MECHANICAL
API = ConflictClass.API
SEMANTIC = ConflictClass.SEMANTIC
UNKNOWN = ConflictClass.UNKNOWN

KINDS = ("content", "binary", "modify-delete", "rename-delete")


@dataclass(frozen=True)
class ConflictCase:
    name: str
    path: str
    base: str  # "" means absent for the modify-delete and rename-delete kinds
    ours: str  # fork trunk's version
    theirs: str  # the upstream commit's version
    expected: ConflictClass | None  # None: `git merge-file` merges it cleanly
    expected_text: str | None = None  # the right merged file, for MECHANICAL and clean cases
    # API cases: other fork files {path: content} that use the changed symbol (the adapter's grep finds them)
    api_uses: dict[str, str] = field(default_factory=dict)
    # files upstream had before the fork split off, unchanged by either side unless `api_uses` changes one
    shared: dict[str, str] = field(default_factory=dict)
    kind: str = "content"  # content | binary | modify-delete | rename-delete
    note: str = ""  # why a tricky case has the label it has


def cases() -> tuple[ConflictCase, ...]:
    """Every case, in a fixed order; names are unique."""
    found = tuple(case for family in _FAMILIES for case in family())
    names = [case.name for case in found]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"duplicate case names: {duplicates}")
    return found


# --- text helpers -----------------------------------------------------------------------------------------

_Lines = list[str]
_Change = tuple[int, int, Sequence[str]]  # replace base lines [start, end) by these


def _text(lines: Iterable[str]) -> str:
    return "".join(line + "\n" for line in lines)


def _find(lines: Sequence[str], needle: str, start: int = 0) -> int:
    for index in range(start, len(lines)):
        if needle in lines[index]:
            return index
    raise ValueError(f"no line with {needle!r}")


def _edit(lines: Sequence[str], *changes: _Change) -> _Lines:
    """`lines` with every change applied to the original indices; changes at one index keep their order."""
    out: _Lines = []
    position = 0
    for start, end, new in sorted(changes, key=lambda change: change[0]):
        out += lines[position:start]
        out += new
        position = max(position, end)
    return out + list(lines[position:])


def _replace(lines: Sequence[str], needle: str, new: str | Sequence[str], start: int = 0) -> _Lines:
    at = _find(lines, needle, start)
    return _edit(lines, (at, at + 1, [new] if isinstance(new, str) else new))


def _inserted(
    base: Sequence[str], at: int, mine: Sequence[str], upstream: Sequence[str]
) -> tuple[_Lines, _Lines, _Lines]:
    """Ours, theirs, and both (the fork's lines first), each side inserting its lines at base index `at`."""
    return (
        _edit(base, (at, at, mine)),
        _edit(base, (at, at, upstream)),
        _edit(base, (at, at, [*mine, *upstream])),
    )


def _both_replace(base: Sequence[str], needle: str, mine: str, upstream: str) -> tuple[_Lines, _Lines]:
    """Ours and theirs, each replacing the line holding `needle` its own way."""
    return _replace(base, needle, mine), _replace(base, needle, upstream)


def _case(
    name: str,
    path: str,
    base: Sequence[str],
    ours: Sequence[str],
    theirs: Sequence[str],
    expected: ConflictClass | None,
    merged: Sequence[str] | None = None,
    *,
    api_uses: dict[str, str] | None = None,
    shared: dict[str, str] | None = None,
    note: str = "",
) -> ConflictCase:
    text = None if merged is None else _text(merged)
    uses = api_uses or {}
    return ConflictCase(
        name, path, _text(base), _text(ours), _text(theirs), expected, text, uses, shared or {}, note=note
    )


# --- C++ passes -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Pass:
    name: str
    pattern: str
    op: str
    helper: str
    attr: str
    threshold: int

    @property
    def path(self) -> str:
        return f"lib/Dialect/TritonGPU/Transforms/{self.name}.cpp"

    @property
    def flag(self) -> str:
        return "tritongpu-" + "".join(f"-{c.lower()}" if c.isupper() else c for c in self.name).lstrip("-")


_PASSES = (
    _Pass("Coalesce", "CoalesceLoads", "LoadOp", "isCoalescable", "ttg.coalesced", 128),
    _Pass(
        "RemoveLayoutConversions",
        "FoldConvertChain",
        "ConvertLayoutOp",
        "isRedundantConvert",
        "ttg.folded",
        64,
    ),
    _Pass("AccelerateMatmul", "BlockedToMMA", "DotOp", "canUseMMAv3", "ttg.mma_version", 4096),
    _Pass("OptimizeDotOperands", "SwizzleDotOperand", "LocalAllocOp", "isSwizzleable", "ttg.swizzled", 256),
    _Pass("ReorderInstructions", "SinkConvertLayout", "ConvertLayoutOp", "canSink", "ttg.sunk", 32),
    _Pass("Prefetch", "PrefetchDotOperands", "DotOp", "isPrefetchable", "ttg.prefetched", 512),
    _Pass("OptimizeThreadLocality", "LocalizeReduce", "ReduceOp", "isThreadLocal", "ttg.thread_local", 1024),
    _Pass("FuseNestedLoops", "FlattenLoopNest", "scf::ForOp", "isFusable", "ttg.fused", 16),
)

_PASS_INCLUDES = (
    '#include "mlir/IR/PatternMatch.h"',
    '#include "mlir/Transforms/GreedyPatternRewriteDriver.h"',
    '#include "triton/Analysis/Utility.h"',
    '#include "triton/Dialect/TritonGPU/IR/Dialect.h"',
    '#include "triton/Dialect/TritonGPU/Transforms/Passes.h"',
    '#include "triton/Dialect/TritonGPU/Transforms/Utility.h"',
)


def _pass_source(p: _Pass) -> _Lines:
    upper = p.name.upper()
    return [
        *_PASS_INCLUDES,
        "",
        "namespace mlir::triton::gpu {",
        "",
        f"#define GEN_PASS_DEF_TRITONGPU{upper}",
        '#include "triton/Dialect/TritonGPU/Transforms/Passes.h.inc"',
        "",
        "namespace {",
        "",
        f"static bool {p.helper}(Operation *op) {{",
        "  if (!op->hasOneUse())",
        "    return false;",
        f"  return isa<{p.op}>(op);",
        "}",
        "",
        f"struct {p.pattern} : public OpRewritePattern<{p.op}> {{",
        "  using OpRewritePattern::OpRewritePattern;",
        "",
        f"  LogicalResult matchAndRewrite({p.op} op,",
        "                                PatternRewriter &rewriter) const override {",
        f"    if (!{p.helper}(op))",
        "      return failure();",
        "    auto type = cast<RankedTensorType>(op->getResult(0).getType());",
        "    int64_t numElems = product<int64_t>(type.getShape());",
        f"    if (numElems < {p.threshold})",
        "      return failure();",
        "    rewriter.modifyOpInPlace(op, [&]() {",
        f'      op->setAttr("{p.attr}", rewriter.getUnitAttr());',
        "    });",
        "    return success();",
        "  }",
        "};",
        "",
        "} // namespace",
        "",
        f"class {p.name}Pass : public impl::TritonGPU{p.name}Base<{p.name}Pass> {{",
        "public:",
        "  void runOnOperation() override {",
        "    MLIRContext *context = &getContext();",
        "    ModuleOp m = getOperation();",
        "    RewritePatternSet patterns(context);",
        f"    patterns.add<{p.pattern}>(context);",
        "    if (failed(applyPatternsGreedily(m, std::move(patterns))))",
        "      signalPassFailure();",
        "  }",
        "};",
        "",
        "} // namespace mlir::triton::gpu",
    ]


# --- C++ utilities (public helpers the fork calls) ----------------------------------------------------------


@dataclass(frozen=True)
class _Helper:
    ret: str
    name: str
    params: str
    body: tuple[str, ...]
    fork_first: str  # the fork's version of the first body line
    upstream_first: str  # upstream's version of the first body line
    call: str  # how fork code calls it

    def lines(self, *, name: str | None = None, params: str | None = None) -> _Lines:
        head = f"{self.ret} {name or self.name}({self.params if params is None else params}) {{"
        return [head, *(f"  {line}" for line in self.body), "}"]


_HELPERS = (
    _Helper(
        "SmallVector<unsigned>",
        "getOrder",
        "Attribute layout",
        (
            "auto distributed = dyn_cast<DistributedEncodingTrait>(layout);",
            "if (!distributed)",
            "  return {};",
            "return distributed.getDefaultOrder();",
        ),
        "auto distributed = dyn_cast_or_null<DistributedEncodingTrait>(layout);",
        "auto distributed = dyn_cast<DistributedEncodingTrait>(getCanonicalLayout(layout));",
        "gpu::getOrder(encoding)",
    ),
    _Helper(
        "unsigned",
        "getNumWarpsPerCTA",
        "Attribute layout",
        (
            "auto distributed = cast<DistributedEncodingTrait>(layout);",
            "return product<unsigned>(distributed.getWarpsPerCTA());",
        ),
        "auto distributed = cast<DistributedEncodingTrait>(tlx::unwrapLayout(layout));",
        "auto distributed = cast<DistributedEncodingTrait>(layout).getCanonical();",
        "gpu::getNumWarpsPerCTA(srcLayout)",
    ),
    _Helper(
        "bool",
        "isExpensiveLoadOrStore",
        "Operation *op",
        (
            "if (!isa<LoadOp, StoreOp>(op))",
            "  return false;",
            "return getNumElements(op) > 1024;",
        ),
        "if (!isa<LoadOp, StoreOp, tlx::AsyncLoadOp>(op))",
        "if (!isa<LoadOp, StoreOp, DescriptorLoadOp>(op))",
        "gpu::isExpensiveLoadOrStore(user)",
    ),
    _Helper(
        "SmallVector<int64_t>",
        "getShapePerCTATile",
        "Attribute layout",
        (
            "SmallVector<int64_t> shape;",
            "for (auto [size, warps] : llvm::zip(getSizePerThread(layout), getWarpsPerCTA(layout)))",
            "  shape.push_back(size * warps);",
            "return shape;",
        ),
        "SmallVector<int64_t> shape = tlx::getTileShapeHint(layout);",
        "SmallVector<int64_t> shape(/*reserve*/ 0);",
        "gpu::getShapePerCTATile(dstLayout)",
    ),
    _Helper(
        "Value",
        "getMemAccessPtr",
        "Operation *op",
        (
            "if (auto load = dyn_cast<LoadOp>(op))",
            "  return load.getPtr();",
            "return cast<StoreOp>(op).getPtr();",
        ),
        "if (auto load = dyn_cast<tlx::AsyncLoadOp>(op))",
        "if (auto load = dyn_cast<LoadOp>(op); load && !load.getIsVolatile())",
        "gpu::getMemAccessPtr(memOp)",
    ),
    _Helper(
        "bool",
        "isPureUnaryInlineAsm",
        "Operation *op",
        (
            "auto inlineAsmOp = dyn_cast<ElementwiseInlineAsmOp>(op);",
            "return inlineAsmOp && op->getNumOperands() == 1 && inlineAsmOp.getPure();",
        ),
        "auto inlineAsmOp = dyn_cast_if_present<ElementwiseInlineAsmOp>(op);",
        "auto inlineAsmOp = llvm::dyn_cast<ElementwiseInlineAsmOp>(op);",
        "gpu::isPureUnaryInlineAsm(def)",
    ),
    _Helper(
        "int",
        "getNumWarps",
        "ModuleOp mod",
        (
            'auto attr = mod->getAttrOfType<IntegerAttr>("ttg.num-warps");',
            "return attr ? attr.getInt() : 4;",
        ),
        "auto attr = mod->getAttrOfType<IntegerAttr>(tlx::kNumWarpsAttr);",
        'auto attr = mod->getDiscardableAttr<IntegerAttr>("ttg.num-warps");',
        "gpu::getNumWarps(module)",
    ),
    _Helper(
        "unsigned",
        "getElementBitWidth",
        "RankedTensorType type",
        (
            "auto elemTy = type.getElementType();",
            "if (auto ptrTy = dyn_cast<PointerType>(elemTy))",
            "  elemTy = ptrTy.getPointeeType();",
            "return elemTy.getIntOrFloatBitWidth();",
        ),
        "auto elemTy = getElementTypeOrSelf(type);",
        "Type elemTy = type.getElementType();",
        "gpu::getElementBitWidth(tensorTy)",
    ),
    _Helper(
        "bool",
        "isMmaToDotShortcut",
        "RankedTensorType srcTy, RankedTensorType dstTy",
        (
            "auto mma = dyn_cast<NvidiaMmaEncodingAttr>(srcTy.getEncoding());",
            "auto dot = dyn_cast<DotOperandEncodingAttr>(dstTy.getEncoding());",
            "return mma && dot && dot.getOpIdx() == 0 && mma.isAmpere();",
        ),
        "auto mma = dyn_cast_or_null<NvidiaMmaEncodingAttr>(srcTy.getEncoding());",
        "auto mma = dyn_cast<MmaEncodingTrait>(srcTy.getEncoding());",
        "gpu::isMmaToDotShortcut(srcTy, dstTy)",
    ),
    _Helper(
        "LogicalResult",
        "verifyLayout",
        "Operation *op",
        (
            "for (Type type : op->getResultTypes())",
            "  if (auto tensorTy = dyn_cast<RankedTensorType>(type); tensorTy && !tensorTy.getEncoding())",
            '    return op->emitError("result has no layout");',
            "return success();",
        ),
        "for (Type type : llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes()))",
        "for (Type type : op->getResultTypes().drop_front(0))",
        "gpu::verifyLayout(op)",
    ),
)
# Upstream renames the first six and changes the signature of the last four.
_RENAMES = (
    "getOrderForMemory",
    "lookupNumWarps",
    "isExpensiveMemoryOp",
    "getTileShapePerCTA",
    "getMemoryAccessPointer",
    "isPureElementwiseInlineAsm",
)
_NEW_PARAMS = (
    "ModuleOp mod, StringRef attrName",
    "Type type",
    "RankedTensorType srcTy, RankedTensorType dstTy, bool allowShared",
    "Operation *op, bool strict",
)
_UTILITY_PATH = "lib/Dialect/TritonGPU/Transforms/Utility.cpp"


def _utility_source(helpers: Sequence[_Helper]) -> _Lines:
    body: _Lines = []
    for helper in helpers:
        body += [*helper.lines(), ""]
    return [
        '#include "triton/Dialect/TritonGPU/Transforms/Utility.h"',
        "",
        '#include "mlir/IR/BuiltinAttributes.h"',
        '#include "triton/Dialect/TritonGPU/IR/Dialect.h"',
        "",
        "namespace mlir::triton::gpu {",
        "",
        *body,
        "} // namespace mlir::triton::gpu",
    ]


def _neighbours(index: int) -> tuple[_Helper, _Helper, _Helper]:
    """The helper at `index` between two others, so every case has its own file."""
    count = len(_HELPERS)
    return _HELPERS[(index + 3) % count], _HELPERS[index], _HELPERS[(index + 7) % count]


def _fork_use_file(name: str, call: str, index: int) -> dict[str, str]:
    path = f"third_party/tlx/lib/Transforms/Pass{index}.cpp"
    lines = [
        '#include "triton/Dialect/TritonGPU/Transforms/Utility.h"',
        "",
        "namespace mlir::triton::tlx {",
        "",
        f"void annotate{index}(ModuleOp module) {{",
        "  module.walk([&](Operation *op) {",
        f"    auto value = {call};",
        '    op->setAttr("tlx.hint", buildHint(op->getContext(), value));',
        "  });",
        "}",
        "",
        "} // namespace mlir::triton::tlx",
    ]
    if name not in call:
        raise ValueError(f"{call!r} does not call {name}")
    return {path: _text(lines)}


# --- Python modules ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Module:
    path: str
    exports: tuple[str, ...]
    reduce: str
    memory: str
    math: str


_MODULES = (
    _Module(
        "python/triton/language/core.py",
        ("program_id", "num_programs", "arange", "full"),
        "sum",
        "load",
        "exp",
    ),
    _Module(
        "python/triton/language/standard.py", ("cdiv", "zeros", "ravel", "swizzle2d"), "max", "store", "sqrt"
    ),
    _Module(
        "python/triton/language/math.py",
        ("abs", "cdiv", "exp2", "log2", "umulhi"),
        "min",
        "atomic_add",
        "log",
    ),
    _Module(
        "python/triton/experimental/gluon/language/_core.py",
        ("allocate_shared_memory", "warp_specialize", "thread_barrier"),
        "argmax",
        "atomic_max",
        "rsqrt",
    ),
    _Module(
        "python/triton/language/random.py",
        ("randint", "rand", "randn", "philox"),
        "xor_sum",
        "prefetch",
        "erf",
    ),
    _Module(
        "third_party/amd/language/hip/libdevice.py",
        ("fast_dividef", "ilogb", "ldexp"),
        "cumsum",
        "gather",
        "sigmoid",
    ),
)
_NEW_KWARGS = (
    'cache_modifier=""',
    'eviction_policy=""',
    "volatile=False",
    'sem=None, scope="gpu"',
    "boundary_check=()",
)


def _module_source(m: _Module) -> _Lines:
    return [
        "from __future__ import annotations",
        "",
        "import builtins",
        "import math",
        "from typing import List, Optional, Sequence",
        "",
        "from . import semantic",
        "from ._utils import TRITON_MAX_TENSOR_NUMEL, validate_block_shape",
        "from .core import builtin, constexpr, tensor",
        "",
        "__all__ = [",
        *(f'    "{name}",' for name in (*m.exports, m.reduce, m.memory, m.math)),
        "]",
        "",
        "",
        "def _unwrap_if_constexpr(o):",
        "    return o.value if isinstance(o, constexpr) else o",
        "",
        "",
        "@builtin",
        f"def {m.reduce}(input, axis=None, keep_dims=False, _semantic=None):",
        f'    """Returns the {m.reduce} of all elements in the :code:`input` tensor along :code:`axis`."""',
        "    axis = _unwrap_if_constexpr(axis)",
        "    if axis is not None:",
        "        axis = _wrap_axis(axis, len(input.shape))",
        "    keep_dims = _unwrap_if_constexpr(keep_dims)",
        f"    return _semantic.{m.reduce}(input, axis, keep_dims)",
        "",
        "",
        "@builtin",
        f"def {m.memory}(pointer, mask=None, other=None, _semantic=None):",
        f'    """Runs `{m.memory}` on the memory locations given by :code:`pointer`."""',
        "    mask = _unwrap_if_constexpr(mask)",
        "    other = _unwrap_if_constexpr(other)",
        "    if mask is not None:",
        "        mask = _semantic.to_tensor(mask)",
        f"    return _semantic.{m.memory}(pointer, mask, other)",
        "",
        "",
        "@builtin",
        f"def {m.math}(x, _semantic=None):",
        f'    """Computes the element-wise {m.math} of :code:`x`."""',
        "    x = _semantic.to_tensor(x)",
        f"    return _semantic.{m.math}(x)",
    ]


def _py_function(name: str, body: str) -> _Lines:
    return [
        "",
        "",
        "@builtin",
        f"def {name}(x, _semantic=None):",
        f'    """{body}"""',
        f"    return _semantic.{name}(x)",
    ]


# --- lit tests, CMake, TableGen -------------------------------------------------------------------------

_LIT_SHAPES = ("128x64", "64x64", "256x32", "32x128", "16x256", "128x128")
_LIT_OPS = ("arith.addf", "arith.mulf", "arith.subf", "arith.maximumf", "arith.minimumf", "arith.divf")


def _lit_case(name: str, index: int) -> _Lines:
    shape, op = _LIT_SHAPES[index % len(_LIT_SHAPES)], _LIT_OPS[index % len(_LIT_OPS)]
    tensor = f"tensor<{shape}xf32, #blocked>"
    return [
        "#blocked = #ttg.blocked<{sizePerThread = [1, 4], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1],"
        " order = [1, 0]}>",
        'module attributes {"ttg.num-warps" = 4 : i32, "ttg.threads-per-warp" = 32 : i32} {',
        f"  // CHECK-LABEL: @{name}",
        f"  tt.func @{name}(%arg0: {tensor}) -> {tensor} {{",
        f"    // CHECK: {op}",
        f"    %0 = {op} %arg0, %arg0 : {tensor}",
        f"    tt.return %0 : {tensor}",
        "  }",
        "}",
    ]


def _lit_file(p: _Pass, names: Sequence[str]) -> _Lines:
    lines = [f"// RUN: triton-opt %s -split-input-file -{p.flag} | FileCheck %s", ""]
    for index, name in enumerate(names):
        if index:
            lines += ["", "// -----", ""]
        lines += _lit_case(name, index)
    return lines


def _lit_path(p: _Pass) -> str:
    return f"test/TritonGPU/{p.flag.removeprefix('tritongpu-')}.mlir"


def _lit_names(p: _Pass) -> tuple[str, ...]:
    stem = p.pattern[0].lower() + p.pattern[1:]
    return (f"{stem}_basic", f"{stem}_negative", f"{stem}_in_loop")


def _cmake(library: str, sources: Sequence[str], link: Sequence[str] = ()) -> _Lines:
    lines = [f"add_triton_library({library}", *(f"  {source}" for source in sources)]
    if link:
        lines += [
            "",
            "  DEPENDS",
            f"  {library}IncGen",
            "",
            "  LINK_LIBS PUBLIC",
            *(f"  {lib}" for lib in link),
        ]
    return [*lines, ")"]


_TD_PATH = "include/triton/Dialect/TritonGPU/IR/TritonGPUOps.td"
_TD_OPS = (
    ("ConvertLayout", "convert_layout", "convert layout"),
    ("LocalAlloc", "local_alloc", "allocate tensor"),
    ("LocalLoad", "local_load", "load a buffer from local memory into a distributed tensor"),
    ("LocalStore", "local_store", "store a distributed tensor into a buffer in local memory"),
    ("AsyncWait", "async_wait", "wait until there are less than num outstanding async copies"),
    ("MemDescSubview", "memdesc_subview", "take a subview of the descriptor"),
)


def _td_op(name: str, mnemonic: str, summary: str, traits: str = "Pure") -> _Lines:
    return [
        f'def TTG_{name}Op : TTG_Op<"{mnemonic}", [{traits}]> {{',
        f'  let summary = "{summary}";',
        "",
        "  let arguments = (ins TT_Tensor:$src);",
        "  let results = (outs TT_Tensor:$result);",
        "",
        '  let assemblyFormat = "$src attr-dict `:` type($src) `->` type($result)";',
        "}",
    ]


def _td_file(ops: Sequence[tuple[str, str, str]]) -> _Lines:
    body: _Lines = []
    for op in ops:
        body += ["", *_td_op(*op)]
    return [
        "#ifndef TRITONGPU_OPS",
        "#define TRITONGPU_OPS",
        "",
        'include "mlir/IR/OpBase.td"',
        'include "triton/Dialect/Triton/IR/TritonTypes.td"',
        'include "triton/Dialect/TritonGPU/IR/TritonGPUAttrDefs.td"',
        'include "triton/Dialect/TritonGPU/IR/TritonGPUDialect.td"',
        "",
        "class TTG_Op<string mnemonic, list<Trait> traits = []> :",
        "    Op<TritonGPU_Dialect, mnemonic, traits>;",
        *body,
        "",
        "#endif // TRITONGPU_OPS",
    ]


def _td_ops(start: int, count: int = 3) -> list[tuple[str, str, str]]:
    return [_TD_OPS[(start + i) % len(_TD_OPS)] for i in range(count)]


# --- mechanical -------------------------------------------------------------------------------------------

_SOURCE_LISTS = (
    (
        "lib/Dialect/TritonGPU/Transforms/CMakeLists.txt",
        "TritonGPUTransforms",
        ("AccelerateMatmul.cpp", "Coalesce.cpp", "CombineTensorSelectAndIf.cpp", "F32DotTC.cpp"),
        ("OptimizeDotOperands.cpp", "Prefetch.cpp"),
    ),
    (
        "lib/Analysis/CMakeLists.txt",
        "TritonAnalysis",
        ("Alias.cpp", "Allocation.cpp", "AxisInfo.cpp"),
        ("Utility.cpp", "Membar.cpp"),
    ),
    (
        "third_party/nvidia/lib/TritonNVIDIAGPUToLLVM/CMakeLists.txt",
        "TritonNVIDIAGPUToLLVM",
        ("BarrierOpToLLVM.cpp", "ClusterOpsToLLVM.cpp", "ConvertLayoutOpToLLVM.cpp", "DotOpToLLVM.cpp"),
        ("TLXOpsToLLVM.cpp", "ElementwiseOpToLLVM.cpp"),
    ),
    (
        "third_party/amd/lib/TritonAMDGPUTransforms/CMakeLists.txt",
        "TritonAMDGPUTransforms",
        ("AccelerateAMDMatmul.cpp", "BlockPingpong.cpp", "CanonicalizePointers.cpp"),
        ("ConvertToBufferOps.cpp", "HoistLayoutConversions.cpp"),
    ),
    (
        "lib/Dialect/TritonNvidiaGPU/Transforms/CMakeLists.txt",
        "TritonNvidiaGPUTransforms",
        ("FenceInsertion.cpp", "MMALowering.cpp", "PlanCTA.cpp"),
        ("TMALowering.cpp", "WarpSpecialization.cpp"),
    ),
)


def _cmake_source_lists() -> list[ConflictCase]:
    out = []
    for path, library, sources, (mine, upstream) in _SOURCE_LISTS:
        base, ours, theirs = (_cmake(library, (*sources, *new)) for new in ((), (mine,), (upstream,)))
        merged = _cmake(library, (*sources, *sorted((mine, upstream))))  # the list was sorted and stays so
        out.append(_case(f"mechanical/cmake-sources/{library}", path, base, ours, theirs, MECHANICAL, merged))
    return out


def _cmake_link_libs() -> list[ConflictCase]:
    setups = (
        (
            "lib/Dialect/TritonGPU/Transforms/CMakeLists.txt",
            "TritonGPUTransforms",
            ("MLIRTransforms", "MLIRTransformUtils", "TritonAnalysis", "TritonIR", "TritonGPUIR"),
            ("TLXIR", "MLIRGPUDialect"),
        ),
        (
            "third_party/nvidia/lib/TritonNVIDIAGPUToLLVM/CMakeLists.txt",
            "TritonNVIDIAGPUToLLVM",
            ("TritonGPUToLLVM", "TritonProtonToLLVM", "MLIRNVVMDialect"),
            ("TLXToLLVM", "MLIRLLVMIRTransforms"),
        ),
    )
    out = []
    for path, library, libs, (mine, upstream) in setups:
        sources = ("Alpha.cpp", "Beta.cpp")
        base, ours, theirs, merged = (
            _cmake(library, sources, (*libs, *new)) for new in ((), (mine,), (upstream,), (mine, upstream))
        )
        out.append(
            _case(f"mechanical/cmake-link-libs/{library}", path, base, ours, theirs, MECHANICAL, merged)
        )
    out.append(_cmake_libs_added_on_both_sides())
    return out


def _cmake_libs_added_on_both_sides() -> ConflictCase:
    """Both sides link the same new libraries (as in an Intel merge): each once, in the fork's order."""
    libs = ("TritonAnalysis", "TritonIR")
    mine = ("TritonGPUTransforms", "TritonIntelAnalysis", "TritonNvidiaGPUTransforms")
    upstream = ("TritonGPUTransforms", "TritonNvidiaGPUTransforms")
    base, ours, theirs = (
        _cmake("TestAnalysis", ("Alpha.cpp",), (*libs, *new)) for new in ((), mine, upstream)
    )
    note = "upstream's libraries are all among the fork's: the union lists each once"
    name = "mechanical/cmake-link-libs/both-added-the-same"
    return _case(name, "unittest/Analysis/CMakeLists.txt", base, ours, theirs, MECHANICAL, ours, note=note)


def _python_all_lists() -> list[ConflictCase]:
    out = []
    for m, mine, upstream in (
        (_MODULES[0], "async_task", "gather"),
        (_MODULES[3], "tlx_barrier", "fence_async_shared"),
        (_MODULES[2], "umulhi_tlx", "exp10"),
    ):
        base = _module_source(m)
        end = _find(base, "]", _find(base, "__all__ = ["))
        ours, theirs, merged = _inserted(base, end, [f'    "{mine}",'], [f'    "{upstream}",'])
        out.append(_case(f"mechanical/python-all/{m.path}", m.path, base, ours, theirs, MECHANICAL, merged))
    return out


def _python_imports() -> list[ConflictCase]:
    out = []
    for m, anchor, mine, upstream in (
        (
            _MODULES[1],
            "from .core import",
            "from .extra.cuda import libdevice",
            "from .random import randint",
        ),
        (_MODULES[4], "import math", "import os", "import re"),
    ):
        base = _module_source(m)
        ours, theirs, merged = _inserted(base, _find(base, anchor) + 1, [mine], [upstream])
        name = f"mechanical/python-imports/{mine.split()[0]}/{m.path}"
        out.append(_case(name, m.path, base, ours, theirs, MECHANICAL, merged))
    path = "python/triton/compiler/compiler.py"
    base = [
        "from __future__ import annotations",
        "",
        "import hashlib",
        "import json",
        "",
        "from .._C.libtriton import get_cache_invalidating_env_vars, ir",
        "from ..backends import backends",
        "from ..backends.compiler import GPUTarget",
        "",
        "",
        "def make_backend(target: GPUTarget):",
        "    return backends[target.backend].compiler(target)",
    ]
    mine, upstream = "from ..runtime.cache import get_cache_manager", "from ..runtime.driver import driver"
    ours, theirs, merged = _inserted(base, 8, [mine], [upstream])
    out.append(_case("mechanical/python-imports/compiler", path, base, ours, theirs, MECHANICAL, merged))
    return out


def _cpp_includes() -> list[ConflictCase]:
    setups = (
        (
            "triton/Analysis/Utility.h",
            "triton/Conversion/TritonGPUToLLVM/Utility.h",
            "triton/Dialect/Triton/IR/Dialect.h",
        ),
        (
            "mlir/Transforms/GreedyPatternRewriteDriver.h",
            "mlir/Transforms/Passes.h",
            "mlir/Transforms/RegionUtils.h",
        ),
        (
            "triton/Dialect/TritonGPU/Transforms/Utility.h",
            "triton/Tools/LayoutUtils.h",
            "triton/Tools/Sys/GetEnv.hpp",
        ),
        ("triton/Analysis/Utility.h", "triton/Dialect/Triton/IR/Utility.h", "triton/Conversion/MLIRTypes.h"),
    )
    out = []
    for p, (anchor, mine, upstream) in zip(_PASSES, setups, strict=False):
        base = _pass_source(p)
        lines = (f'#include "{mine}"', f'#include "{upstream}"')
        ours, theirs, _ = _inserted(base, _find(base, f'"{anchor}"') + 1, lines[:1], lines[1:])
        merged = _edit(base, (_find(base, f'"{anchor}"') + 1, _find(base, f'"{anchor}"') + 1, sorted(lines)))
        out.append(_case(f"mechanical/cpp-includes/{p.name}", p.path, base, ours, theirs, MECHANICAL, merged))
    base = _td_file(_td_ops(0))
    mine, upstream = (
        f'include "triton/Dialect/TritonGPU/IR/{n}.td"' for n in ("TritonGPUTypeInterfaces", "TritonGPUTypes")
    )
    ours, theirs, merged = _inserted(base, _find(base, "TritonGPUDialect.td") + 1, [mine], [upstream])
    out.append(_case("mechanical/tablegen-includes", _TD_PATH, base, ours, theirs, MECHANICAL, merged))
    return out


def _lit_appends() -> list[ConflictCase]:
    out = []
    for index, p in enumerate(_PASSES[:5]):
        names = _lit_names(p)
        base = _lit_file(p, names)
        mine, upstream = (
            ["", "// -----", "", *_lit_case(f"{names[0]}_{tag}", index + k)]
            for k, tag in ((1, "tlx"), (2, "bf16"))
        )
        # The first three append at the end of the file, the others right after the first case.
        at, where = (len(base), "eof") if index < 3 else (_find(base, "// -----") - 1, "between")
        ours, theirs, merged = _inserted(base, at, mine, upstream)
        out.append(
            _case(
                f"mechanical/lit-append-{where}/{p.name}",
                _lit_path(p),
                base,
                ours,
                theirs,
                MECHANICAL,
                merged,
            )
        )
    return out


_TARGET_INFO_PATH = "third_party/nvidia/lib/TritonNVIDIAGPUToLLVM/TargetInfo.cpp"


def _capability_source() -> _Lines:
    table = [
        "static constexpr std::pair<StringLiteral, int> kMinCapability[] = {",
        '    {"tt.dot", 80},',
        '    {"ttng.warp_group_dot", 90},',
        '    {"ttng.tc_gen5_mma", 100},',
        "};",
    ]
    user = [
        "int TargetInfo::getMinCapability(StringRef opName) const {",
        "  for (auto [name, capability] : kMinCapability)",
        "    if (name == opName)",
        "      return capability;",
        "  return 0;",
        "}",
    ]
    base = ['#include "TargetInfo.h"', "", "namespace mlir::triton::NVIDIA {", "", *table, "", *user, ""]
    return [*base, "} // namespace mlir::triton::NVIDIA"]


def _cpp_tables() -> list[ConflictCase]:
    base = _capability_source()
    ours, theirs, merged = _inserted(
        base, _find(base, "};"), ['    {"tlx.async_dot", 90},'], ['    {"ttng.async_tma_copy", 90},']
    )
    path = _TARGET_INFO_PATH
    out = [_case("mechanical/cpp-table/min-capability", path, base, ours, theirs, MECHANICAL, merged)]
    table = [
        "inline const std::set<std::string> CACHE_INVALIDATING_ENV_VARS = {",
        '    "TRITON_DEFAULT_FP_FUSION",',
        '    "MLIR_ENABLE_DIAGNOSTICS",',
        '    "LLVM_IR_ENABLE_DUMP",',
        "};",
    ]
    base = ['#include "triton/Tools/Sys/GetEnv.hpp"', "", "namespace mlir::triton::tools {", "", *table, ""]
    base.append("} // namespace mlir::triton::tools")
    ours, theirs, merged = _inserted(
        base, _find(base, "};"), ['    "TLX_ENABLE_ASYNC_TASKS",'], ['    "TRITON_ENABLE_LLVM_DEBUG",']
    )
    out.append(
        _case(
            "mechanical/cpp-table/env-vars",
            "lib/Tools/Sys/GetEnv.cpp",
            base,
            ours,
            theirs,
            MECHANICAL,
            merged,
        )
    )
    return out


def _file_and_block_ends() -> list[ConflictCase]:
    out = []
    mine = ["", "bool isTlxOp(Operation *op) {", '  return op->getDialect()->getNamespace() == "tlx";', "}"]
    upstream = [
        "",
        "bool isWarpSpecialized(ModuleOp mod) {",
        '  return mod->hasAttr("ttg.warp-specialized");',
        "}",
    ]
    for index in (0, 4):
        helpers = _neighbours(index)
        base = _utility_source(helpers)
        at = _find(base, "} // namespace mlir::triton::gpu") - 1  # after the last helper
        ours, theirs, merged = _inserted(base, at, mine, upstream)
        name = f"mechanical/cpp-namespace-end/{helpers[1].name}"
        out.append(_case(name, _UTILITY_PATH, base, ours, theirs, MECHANICAL, merged))
    for m, mine_fn, upstream_fn in ((_MODULES[0], "tlx_sync", "fma"), (_MODULES[5], "tlx_fence", "div_rn")):
        base = _module_source(m)
        ours, theirs, merged = _inserted(
            base,
            len(base),
            _py_function(mine_fn, "TLX."),
            _py_function(upstream_fn, f"Computes {upstream_fn}."),
        )
        out.append(
            _case(f"mechanical/python-append-eof/{m.path}", m.path, base, ours, theirs, MECHANICAL, merged)
        )
    for start, mine_op, upstream_op in (
        (
            0,
            ("TLXAsyncCopy", "tlx_async_copy", "copy asynchronously"),
            ("Fp4ToFp", "fp4_to_fp", "upcast fp4"),
        ),
        (
            2,
            ("TLXBarrierWait", "tlx_barrier_wait", "wait on a barrier"),
            ("WarpReturn", "warp_return", "return"),
        ),
    ):
        base = _td_file(_td_ops(start))
        ours, theirs, merged = _inserted(
            base, _find(base, "#endif") - 1, ["", *_td_op(*mine_op)], ["", *_td_op(*upstream_op)]
        )
        out.append(
            _case(
                f"mechanical/tablegen-append/{mine_op[0]}", _TD_PATH, base, ours, theirs, MECHANICAL, merged
            )
        )
    base = ["cmake_minimum_required(VERSION 3.18)", "project(triton CXX C)", "", "add_subdirectory(lib)", ""]
    base += ["if(TRITON_BUILD_UT)", "  add_subdirectory(unittest)", "endif()"]
    ours, theirs, merged = _inserted(
        base,
        _find(base, "endif()"),
        ["  add_subdirectory(third_party/tlx/unittest)"],
        ["  add_subdirectory(third_party/proton/unittest)"],
    )
    out.append(_case("mechanical/cmake-block-end", "CMakeLists.txt", base, ours, theirs, MECHANICAL, merged))
    return out


def _whitespace() -> list[ConflictCase]:
    return [_fork_reformatted(), _same_fix_wrapped(), _trailing_whitespace(), _lit_check_spacing()]


def _fork_reformatted() -> ConflictCase:
    p = _PASSES[5]
    needle = "auto type = cast"
    base = _replace(
        _pass_source(p), needle, "    auto type = cast<RankedTensorType>( op->getResult(0).getType() );"
    )
    ours, theirs = _both_replace(
        base,
        needle,
        "    auto type = cast<RankedTensorType>(op->getResult(0).getType());",
        "    auto type = dyn_cast<RankedTensorType>( op->getResult(0).getType() );",
    )
    note = "the fork's clang-format run touched the line upstream changed: upstream's change wins"
    name = f"mechanical/whitespace/fork-reformatted/{p.name}"
    return _case(name, p.path, base, ours, theirs, MECHANICAL, theirs, note=note)


def _same_fix_wrapped() -> ConflictCase:
    p = _PASSES[6]
    base = _pass_source(p)
    needle = f"if (!{p.helper}(op))"
    ours = _replace(base, needle, [f"    if (!{p.helper}(op) ||", "        op->getNumResults() != 1)"])
    theirs = _replace(base, needle, f"    if (!{p.helper}(op) || op->getNumResults() != 1)")
    note = "the fork had backported the same fix, wrapped differently: upstream's spelling wins"
    name = f"mechanical/whitespace/same-fix-wrapped/{p.name}"
    return _case(name, p.path, base, ours, theirs, MECHANICAL, theirs, note=note)


def _trailing_whitespace() -> ConflictCase:
    m = _MODULES[2]
    needle = "mask = _unwrap_if_constexpr(mask)"
    base = _replace(_module_source(m), needle, "    mask = _unwrap_if_constexpr(mask)   ")
    ours, theirs = _both_replace(
        base,
        needle,
        "    mask = _unwrap_if_constexpr(mask)",
        "    mask = _semantic.to_tensor(_unwrap_if_constexpr(mask))   ",
    )
    return _case(f"mechanical/whitespace/trailing/{m.path}", m.path, base, ours, theirs, MECHANICAL, theirs)


def _lit_check_spacing() -> ConflictCase:
    p = _PASSES[7]
    base = _replace(_lit_file(p, _lit_names(p)), "// CHECK: ", "    // CHECK:   arith.addf")
    ours, theirs = _both_replace(
        base, "// CHECK: ", "    // CHECK: arith.addf", "    // CHECK-NOT:   arith.addf"
    )
    name = f"mechanical/whitespace/lit-check/{p.name}"
    return _case(name, _lit_path(p), base, ours, theirs, MECHANICAL, theirs)


def _adjacent(
    name: str, path: str, base: _Lines, at: int, mine: str, upstream: str, *, note: str = ""
) -> ConflictCase:
    """The fork changes line `at`, upstream the line after it."""
    ours = _edit(base, (at, at + 1, [mine]))
    theirs = _edit(base, (at + 1, at + 2, [upstream]))
    merged = _edit(base, (at, at + 1, [mine]), (at + 1, at + 2, [upstream]))
    return _case(name, path, base, ours, theirs, MECHANICAL, merged, note=note)


def _adjacent_edits() -> list[ConflictCase]:
    out = []
    for p in _PASSES[:2]:
        base = _pass_source(p)
        at = _find(base, f"if (numElems < {p.threshold})")
        mine = f"    if (numElems < {p.threshold} && !tlx::isTlxOp(op))"
        upstream = '      return rewriter.notifyMatchFailure(op, "tensor too small");'
        out.append(_adjacent(f"mechanical/adjacent/{p.name}", p.path, base, at, mine, upstream))
    m = _MODULES[1]
    base = _module_source(m)
    at = _find(base, f'"""Returns the {m.reduce}')
    mine = f'    """Returns the {m.reduce} of :code:`input` along :code:`axis` (TLX-aware)."""'
    upstream = "    axis = _unwrap_if_constexpr(axis) if axis != () else None"
    out.append(_adjacent(f"mechanical/adjacent/{m.path}", m.path, base, at, mine, upstream))
    base = _td_file(_td_ops(3))
    at = _find(base, "let arguments")
    mine = "  let arguments = (ins TT_Tensor:$src, OptionalAttr<I32Attr>:$tlx_stage);"
    upstream = "  let results = (outs TT_Tensor:$result, Optional<TT_Tensor>:$token);"
    out.append(_adjacent("mechanical/adjacent/tablegen", _TD_PATH, base, at, mine, upstream))
    p = _PASSES[2]
    base = _lit_file(p, _lit_names(p))
    at = _find(base, "// CHECK: ")
    mine, upstream = (
        base[at].replace("CHECK:", "CHECK-NEXT:"),
        base[at + 1].replace(", %arg0", ", %arg0 fastmath<fast>"),
    )
    out.append(_adjacent(f"mechanical/adjacent/lit/{p.name}", _lit_path(p), base, at, mine, upstream))
    helpers = _neighbours(1)
    target = helpers[1]
    base = _utility_source(helpers)
    at = _find(base, f"{target.ret} {target.name}(")
    ours = _edit(base, (at + 1, at + 2, [f"  {target.fork_first}"]))
    theirs = _edit(base, (at, at + 1, target.lines(name=_RENAMES[1])[:1]))
    merged = _edit(ours, (at, at + 1, theirs[at : at + 1]))
    note = "api/cpp-renamed-to-lookupNumWarps's very text, but no fork code uses the function"
    name = f"mechanical/adjacent/rename-unused-by-fork/{target.name}"
    out.append(_case(name, _UTILITY_PATH, base, ours, theirs, MECHANICAL, merged, note=note))
    return out


def _mentions() -> list[ConflictCase]:
    """Upstream renames a helper next to a fork edit (the adjacent-edits shape) and the fork only mentions
    it: in a comment, a doc, a lit test, or upstream's own caller that the fork left as it was. None of them
    is a fork use, so the conflict stays mechanical; a caller the fork changed is one (an api case)."""
    helper = _HELPERS[1]
    base = _utility_source(_neighbours(1))
    at = _find(base, f"{helper.ret} {helper.name}(")
    ours = _edit(base, (at + 1, at + 2, [f"  {helper.fork_first}"]))
    theirs = _edit(base, (at, at + 1, helper.lines(name=_RENAMES[1])[:1]))
    merged = _edit(ours, (at, at + 1, theirs[at : at + 1]))

    def case(name: str, expected: ConflictClass, **more: Any) -> ConflictCase:
        resolved = merged if expected is MECHANICAL else None
        return _case(name, _UTILITY_PATH, base, ours, theirs, expected, resolved, **more)

    mentions = {
        "comment": {
            "third_party/tlx/lib/Notes.cpp": f"// {helper.name} decides it upstream.\nint tlx = 1;\n"
        },
        "block-comment": {"third_party/tlx/lib/Doc.h": f"/**\n * Like {helper.name}, for TLX.\n */\n"},
        "string": {"third_party/tlx/lib/Names.cpp": f'const char *name = "{helper.name}";\n'},
        "docs": {"docs/tlx.md": f"TLX calls `{helper.name}` for its warps.\n"},
        "lit": {"test/TLX/warps.mlir": f"// CHECK: {helper.name}\ntt.func @{helper.name}() {{\n}}\n"},
    }
    note = "a mention of the renamed helper is no fork use"
    name = "mechanical/adjacent/rename-mentioned-by-fork"
    out = [case(f"{name}/{how}", MECHANICAL, api_uses=uses, note=note) for how, uses in mentions.items()]
    (calling,) = _fork_use_file(helper.name, helper.call, 60).values()
    caller = {"lib/Conversion/TritonGPUToLLVM/Warps.cpp": calling}
    note = "upstream's own caller, which the fork did not change: the upstream commit updates it"
    out.append(case(f"{name}/upstream-caller", MECHANICAL, shared=caller, note=note))
    changed = {path: text.replace("auto value =", "auto value = 2 *") for path, text in caller.items()}
    name = f"api/cpp-rename-used-by-a-changed-upstream-caller/{helper.name}"
    out.append(case(name, API, shared=caller, api_uses=changed))
    return out


def _python_local_kernel() -> list[ConflictCase]:
    """A test's own `@triton.jit def kernel` is no API: upstream changes its signature beside a fork edit
    and the fork's other tests launch kernels of that name, and the conflict stays mechanical."""
    path = "python/test/unit/language/test_empty.py"
    base = [
        "import triton",
        "import triton.language as tl",
        "",
        "",
        "def test_empty_kernel(device):",
        "    SIZE = 128",
        "",
        "    @triton.jit",
        "    def kernel(X, SIZE: tl.constexpr):",
        "        pass",
        "",
        "    x = torch.empty(SIZE, device=device)",
        "    kernel[(1,)](x, SIZE=SIZE, num_warps=4)",
    ]
    at = _find(base, "def kernel(")
    ours = _edit(base, (at + 1, at + 2, ["        tl.debug_barrier()"]))
    theirs = _edit(base, (at, at + 1, ["    def kernel(X, SIZE: tl.constexpr, BLOCK: tl.constexpr = 16):"]))
    merged = _edit(ours, (at, at + 1, theirs[at : at + 1]))
    use = ["def test_xpu_empty(device):", "    kernel = compile_empty(device)", "    kernel[(1,)](None)"]
    uses = {"python/test/unit/intel/test_xpu_empty.py": _text(use)}
    return [
        _case(
            "mechanical/adjacent/python-local-kernel",
            path,
            base,
            ours,
            theirs,
            MECHANICAL,
            merged,
            api_uses=uses,
            note="the fork's `kernel` words are its own locals",
        )
    ]


# --- api --------------------------------------------------------------------------------------------------


def _cpp_api() -> list[ConflictCase]:
    """Upstream renames a helper or changes its signature, the fork edited its first line and calls it."""
    out = []
    for index, helper in enumerate(_HELPERS):
        base = _utility_source(_neighbours(index))
        at = _find(base, f"{helper.ret} {helper.name}(")
        ours = _edit(base, (at + 1, at + 2, [f"  {helper.fork_first}"]))
        if index < len(_RENAMES):
            head, change = helper.lines(name=_RENAMES[index])[0], f"renamed-to-{_RENAMES[index]}"
        else:
            head, change = helper.lines(params=_NEW_PARAMS[index - len(_RENAMES)])[0], "signature"
        theirs = _edit(base, (at, at + 1, [head]))
        uses = _fork_use_file(helper.name, helper.call, index)
        out.append(
            _case(f"api/cpp-{change}/{helper.name}", _UTILITY_PATH, base, ours, theirs, API, api_uses=uses)
        )
    return out


def _header_api() -> list[ConflictCase]:
    """Upstream renames a declaration; the fork declared its own variant right below it."""
    path = "include/triton/Dialect/TritonGPU/Transforms/Utility.h"
    guard = "TRITON_DIALECT_TRITONGPU_TRANSFORMS_UTILITY_H_"
    out = []
    for index in (0, 2):
        helper = _HELPERS[index]
        decls: _Lines = []
        for other in _neighbours(index):
            decls += [f"// {other.name}: see Utility.cpp.", f"{other.ret} {other.name}({other.params});", ""]
        base = [
            f"#ifndef {guard}",
            f"#define {guard}",
            "",
            '#include "triton/Dialect/TritonGPU/IR/Dialect.h"',
            "",
        ]
        base += [
            "namespace mlir::triton::gpu {",
            "",
            *decls,
            "} // namespace mlir::triton::gpu",
            "",
            "#endif",
        ]
        at = _find(base, f" {helper.name}(")
        ours = _edit(base, (at + 1, at + 1, [f"{helper.ret} {helper.name}ForTlx({helper.params});"]))
        theirs = _edit(base, (at, at + 1, [f"{helper.ret} {_RENAMES[index]}({helper.params});"]))
        uses = _fork_use_file(helper.name, helper.call, 40 + index)
        out.append(
            _case(f"api/cpp-header-rename/{helper.name}", path, base, ours, theirs, API, api_uses=uses)
        )
    return out


def _python_api() -> list[ConflictCase]:
    out = []
    for index, m in enumerate(_MODULES[:5]):
        base = _module_source(m)
        at = _find(base, f"def {m.memory}(")
        ours = _edit(
            base, (at + 1, at + 2, [f'    """Runs `{m.memory}` on :code:`pointer`; TLX buffers work too."""'])
        )
        head = f"def {m.memory}(pointer, mask=None, other=None, {_NEW_KWARGS[index]}, _semantic=None):"
        theirs = _edit(base, (at, at + 1, [head]))
        use = ["import triton.language as tl", "", "", f"def tlx_{m.memory}(ptr, offsets, mask):"]
        use.append(f"    return tl.{m.memory}(ptr + offsets, mask=mask)")
        uses = {f"third_party/tlx/language/tlx/ops_{index}.py": _text(use)}
        out.append(_case(f"api/python-signature/{m.path}", m.path, base, ours, theirs, API, api_uses=uses))
    note = "upstream renamed the helper and its callers in this file; the fork imports the old name"
    for index, m in enumerate(_MODULES[4:6]):
        base = _module_source(m)
        at = _find(base, "def _unwrap_if_constexpr(o):")
        ours = _edit(
            base, (at + 1, at + 2, ["    return o.value if isinstance(o, (constexpr, tlx_constexpr)) else o"])
        )
        theirs = [line.replace("_unwrap_if_constexpr", "_unwrap_constexpr") for line in base]
        use = ["from triton.language.core import _unwrap_if_constexpr", "", "", "def stage_count(n):"]
        use.append("    return _unwrap_if_constexpr(n) or 1")
        uses = {f"third_party/tlx/language/tlx/utils_{index}.py": _text(use)}
        out.append(
            _case(f"api/python-rename/{m.path}", m.path, base, ours, theirs, API, api_uses=uses, note=note)
        )
    return out


def _tablegen_api() -> list[ConflictCase]:
    fork_td = "third_party/tlx/dialect/include/IR/TLXOps.td"
    include = 'include "triton/Dialect/TritonGPU/IR/TritonGPUOps.td"'
    base = _td_file(_td_ops(1))
    at = _find(base, "class TTG_Op<")
    ours = _edit(
        base, (at + 1, at + 2, ["    Op<TritonGPU_Dialect, mnemonic, !listconcat(traits, [TLXCompatible])>;"])
    )
    head = 'class TTG_Op<string mnemonic, list<Trait> traits = [], string cppNamespace = "::mlir::triton"> :'
    theirs = _edit(base, (at, at + 1, [head]))
    use = [include, "", 'def TLX_AsyncCopyOp : TTG_Op<"async_copy", [MemoryEffects<[MemWrite]>]> {']
    use += ['  let summary = "copy a tile asynchronously";', "}"]
    out = [
        _case(
            "api/tablegen-class-signature/TTG_Op",
            _TD_PATH,
            base,
            ours,
            theirs,
            API,
            api_uses={fork_td: _text(use)},
        )
    ]
    for start, name, renamed in ((2, "LocalLoad", "LocalRead"), (4, "AsyncWait", "AsyncCommitWait")):
        base = _td_file(_td_ops(start))
        at = _find(base, f"def TTG_{name}Op")
        ours = _edit(base, (at + 1, at + 2, [base[at + 1].replace('";', ' (also used by TLX)";')]))
        theirs = _edit(base, (at, at + 1, [base[at].replace(f"TTG_{name}Op", f"TTG_{renamed}Op")]))
        uses = {fork_td: _text([include, "", f"def : Pat<(TTG_{name}Op $src), (TLX_{name}Op $src)>;"])}
        out.append(
            _case(f"api/tablegen-rename/TTG_{name}Op", _TD_PATH, base, ours, theirs, API, api_uses=uses)
        )
    return out


# --- semantic ---------------------------------------------------------------------------------------------


def _cpp_semantic() -> list[ConflictCase]:
    out = []
    for p in _PASSES[:5]:
        base = _pass_source(p)
        needle = f"if (numElems < {p.threshold})"
        mine, upstream = (
            f"    if (numElems < {p.threshold * 2})",
            f"    if (numElems < {p.threshold} || !type.getEncoding())",
        )
        out.append(
            _case(
                f"semantic/cpp-same-line/{p.name}",
                p.path,
                base,
                *_both_replace(base, needle, mine, upstream),
                SEMANTIC,
            )
        )
    note = "both appended to the end of the same function body: not an append-union"
    for p in _PASSES[5:8]:
        base = _pass_source(p)
        at = _find(base, "signalPassFailure();") + 1
        ours, theirs, _ = _inserted(
            base,
            at,
            ["    tlx::fixupAsyncTaskLayouts(m);"],
            ['    m->walk([](Operation *op) { op->removeAttr("ttg.tmp"); });'],
        )
        out.append(
            _case(
                f"semantic/cpp-both-append-to-body/{p.name}", p.path, base, ours, theirs, SEMANTIC, note=note
            )
        )
    for index in (6, 8):
        helper = _HELPERS[index]
        base = _utility_source(_neighbours(index))
        ours, theirs = _both_replace(
            base, helper.body[0], f"  {helper.fork_first}", f"  {helper.upstream_first}"
        )
        out.append(
            _case(f"semantic/cpp-helper-body/{helper.name}", _UTILITY_PATH, base, ours, theirs, SEMANTIC)
        )
    return out


def _python_semantic() -> list[ConflictCase]:
    out = []
    needle = "keep_dims = _unwrap_if_constexpr(keep_dims)"
    mine, upstream = (
        "    keep_dims = bool(_unwrap_if_constexpr(keep_dims))",
        "    keep_dims = _unwrap_if_constexpr(keep_dims) or axis is None",
    )
    for m in _MODULES[:4]:
        base = _module_source(m)
        out.append(
            _case(
                f"semantic/python-same-line/{m.path}",
                m.path,
                base,
                *_both_replace(base, needle, mine, upstream),
                SEMANTIC,
            )
        )
    for m in _MODULES[4:6]:
        base = _module_source(m)
        at = _find(base, f"    return _semantic.{m.memory}(")
        ours, theirs, _ = _inserted(
            base,
            at,
            ["    _check_tlx_pointer(pointer)"],
            ["    other = _semantic.to_tensor(other) if other is not None else None"],
        )
        out.append(
            _case(f"semantic/python-both-insert-in-body/{m.path}", m.path, base, ours, theirs, SEMANTIC)
        )
    m = _MODULES[0]
    base = _module_source(m)
    head = ["", "", "def gather(src, index, axis):"]
    ours, theirs, _ = _inserted(
        base,
        len(base),
        [*head, "    return _semantic.tlx_gather(src, index, axis)"],
        [*head, "    return _semantic.gather(src, index, axis)"],
    )
    note = "both appended at the end of the file, but both define `gather`: not an append-union"
    out.append(_case("semantic/python-same-name-appended", m.path, base, ours, theirs, SEMANTIC, note=note))
    path = "python/triton/language/_utils.py"
    base = [
        "from typing import List",
        "",
        "TRITON_MAX_TENSOR_NUMEL = 1048576",
        "",
        "",
        "def is_power_of_two(x):",
        "    return (x & (x - 1)) == 0",
    ]
    ours, theirs = _both_replace(
        base,
        "TRITON_MAX_TENSOR_NUMEL",
        "TRITON_MAX_TENSOR_NUMEL = 2097152  # TLX: larger tiles",
        "TRITON_MAX_TENSOR_NUMEL = 1 << 21",
    )
    out.append(_case("semantic/python-module-constant", path, base, ours, theirs, SEMANTIC))
    return out


_AUTOTUNE_PATH = "python/triton/runtime/autotune_defaults.py"
_AUTOTUNE = [
    "from __future__ import annotations",
    "",
    "DEFAULT_CONFIG = {",
    '    "num_warps": 4,',
    '    "num_stages": 3,',
    "}",
    "",
    "",
    "def default_config():",
    "    return dict(DEFAULT_CONFIG)",
]


def _same_names_set() -> list[ConflictCase]:
    """Both sides appended where appending is safe, but both set one name or key, each to its own value:
    kept both, the later one silently overrides the fork's."""
    note = "both added the same key or name with another value: which value wins is a decision"
    end = _find(_AUTOTUNE, "}")
    out = []
    for key, mine, upstream in (
        ("block_size", '    "block_size": 64,', '    "block_size": 128,'),
        ("num_ctas-quoted-apart", '    "num_ctas": 2,', "    'num_ctas': 1,"),
    ):
        ours, theirs, _ = _inserted(_AUTOTUNE, end, [mine], [upstream])
        name = f"semantic/python-dict-same-key/{key}"
        out.append(_case(name, _AUTOTUNE_PATH, _AUTOTUNE, ours, theirs, SEMANTIC, note=note))
    for m, mine, upstream in (
        (_MODULES[2], "MAX_NUM_STAGES = 4", "MAX_NUM_STAGES = 6"),
        (_MODULES[3], "MAX_NUM_STAGES: int = 4", "MAX_NUM_STAGES: int = 6"),
    ):
        base = _module_source(m)
        ours, theirs, _ = _inserted(base, len(base), ["", "", mine], ["", "", upstream])
        name = f"semantic/python-same-assignment-eof/{m.path}"
        out.append(_case(name, m.path, base, ours, theirs, SEMANTIC, note=note))
    base = _capability_source()
    ours, theirs, _ = _inserted(
        base, _find(base, "};"), ['    {"ttng.async_tma_copy", 90},'], ['    {"ttng.async_tma_copy", 100},']
    )
    out.append(
        _case("semantic/cpp-table-same-key", _TARGET_INFO_PATH, base, ours, theirs, SEMANTIC, note=note)
    )
    base = ["cmake_minimum_required(VERSION 3.18)", "project(triton CXX C)", "", "add_subdirectory(lib)"]
    ours, theirs, _ = _inserted(
        base,
        len(base),
        ['option(TRITON_BUILD_PROTON "Build the Proton profiler" OFF)'],
        ['option(TRITON_BUILD_PROTON "Build the Proton profiler" ON)'],
    )
    out.append(
        _case("semantic/cmake-same-option-eof", "CMakeLists.txt", base, ours, theirs, SEMANTIC, note=note)
    )
    base = [
        "#ifndef TRITON_TOOLS_LIMITS_H",
        "#define TRITON_TOOLS_LIMITS_H",
        "",
        "#define MAX_NUM_WARPS 32",
        "",
    ]
    base.append("#endif // TRITON_TOOLS_LIMITS_H")
    ours, theirs, _ = _inserted(
        base, len(base) - 1, ["#define MAX_NUM_STAGES 4", ""], ["#define MAX_NUM_STAGES 6", ""]
    )
    path = "include/triton/Tools/Limits.h"
    out.append(_case("semantic/cpp-same-define", path, base, ours, theirs, SEMANTIC, note=note))
    return out


def _same_names_imported() -> list[ConflictCase]:
    """Both sides added an import that binds one name to two things (the later one shadows the fork's);
    and, the counter-case, one dict key with the same value on both sides, which is one item."""
    out = []
    for m, mine, upstream in (
        (_MODULES[0], "from .fork_kernels import matmul", "from .triton_ops import matmul"),
        (_MODULES[5], "import numpy as np", "import jax.numpy as np"),
    ):
        base = _module_source(m)
        ours, theirs, _ = _inserted(base, _find(base, "import math") + 1, [mine], [upstream])
        name = f"semantic/python-import-same-name/{m.path}"
        out.append(_case(name, m.path, base, ours, theirs, SEMANTIC, note="the later import would shadow"))
    # The same key with the same value on both sides is one item, and the other items are new keys: union.
    end = _find(_AUTOTUNE, "}")
    fork_items = ['    "num_ctas": 1,', '    "tlx_aware": True,']
    upstream_items = ['    "num_ctas": 1,', '    "maxnreg": None,']
    ours, theirs, _ = _inserted(_AUTOTUNE, end, fork_items, upstream_items)
    merged = _edit(_AUTOTUNE, (end, end, [*fork_items, upstream_items[1]]))
    name = "mechanical/python-dict/same-key-same-value"
    out.append(_case(name, _AUTOTUNE_PATH, _AUTOTUNE, ours, theirs, MECHANICAL, merged))
    # Rows of numbers and lines that add to a variable set no key: each side's row or flag is kept.
    base = ["static const int kShapes[][3] = {", "    {16, 16, 16},", "};"]
    rows = (["    {128, 128, 64},"], ["    {128, 256, 32},"])
    ours, theirs, _ = _inserted(base, 2, *rows)
    merged = _edit(base, (2, 2, [*rows[0], *rows[1]]))
    out.append(
        _case("mechanical/cpp-rows-of-numbers", "test/shapes.cpp", base, ours, theirs, MECHANICAL, merged)
    )
    base = ["project(triton CXX C)", "add_subdirectory(lib)"]
    flags = (
        ['set(CMAKE_CXX_FLAGS "${CMAKE_CXX_FLAGS} -Wno-fork")'],
        ['set(CMAKE_CXX_FLAGS "${CMAKE_CXX_FLAGS} -Wno-up")'],
    )
    ours, theirs, _ = _inserted(base, len(base), *flags)
    merged = _edit(base, (len(base), len(base), [*flags[0], *flags[1]]))
    out.append(
        _case("mechanical/cmake-flags-added-to", "CMakeLists.txt", base, ours, theirs, MECHANICAL, merged)
    )
    return out


def _spacing_in_strings() -> list[ConflictCase]:
    """One side changed only spacing, but inside a string literal spanning lines: that is the string's
    content (an expected output, inline assembly), so the whitespace rule must not drop it."""
    note = "the fork's spacing change lies inside a multi-line string: its content, not layout"
    path = "python/test/unit/tools/test_disasm.py"
    base = [
        "import pytest",
        "",
        'EXPECTED = """',
        "name  value",
        '"""',
        "",
        "",
        "def test_format():",
        "    pass",
    ]
    ours, theirs = _both_replace(base, "name  value", "name value", "name  value  unit")
    out = [_case("semantic/spacing-in-python-string", path, base, ours, theirs, SEMANTIC, note=note)]
    path = "third_party/nvidia/lib/TritonNVIDIAGPUToLLVM/BarrierOpToLLVM.cpp"
    base = [
        '#include "PatternTritonGPUOpToLLVM.h"',
        "",
        'static const char *kArrive = R"(',
        "mbarrier.arrive  %0, [%1];",
    ]
    base += [')";', "", "namespace mlir::triton::NVIDIA {} // namespace mlir::triton::NVIDIA"]
    ours, theirs = _both_replace(
        base, "mbarrier.arrive", "mbarrier.arrive %0,[%1];", "mbarrier.arrive  %0, [%1];  // sm_90"
    )
    out.append(_case("semantic/spacing-in-cpp-raw-string", path, base, ours, theirs, SEMANTIC, note=note))
    return out


def _other_semantic() -> list[ConflictCase]:
    out = []
    for p in _PASSES[3:6]:
        base = _lit_file(p, _lit_names(p))
        at = _find(base, "// CHECK: ")
        ours, theirs = _both_replace(
            base, "// CHECK: ", base[at].replace("CHECK:", "CHECK-NOT:"), base[at] + " {{.*}} : tensor"
        )
        out.append(_case(f"semantic/lit-same-check/{p.name}", _lit_path(p), base, ours, theirs, SEMANTIC))
    p = _PASSES[6]
    base = _lit_file(p, _lit_names(p))
    name = _lit_names(p)[0] + "_fold"
    sep = ["", "// -----", ""]
    ours, theirs, _ = _inserted(base, len(base), [*sep, *_lit_case(name, 1)], [*sep, *_lit_case(name, 2)])
    note = f"both appended a lit case at the end, but both name it @{name}"
    out.append(
        _case(
            f"semantic/lit-same-name-appended/{p.name}", _lit_path(p), base, ours, theirs, SEMANTIC, note=note
        )
    )
    for start, field_, (old_mine, mine), (old_upstream, upstream) in (
        (0, "summary", ('";', ' (TLX)";'), ('= "', '= "[TTG] ')),
        (3, "assemblyFormat", ("attr-dict", "(`async` $async^)? attr-dict"), ("`->`", "`to`")),
    ):
        base = _td_file(_td_ops(start))
        line = base[_find(base, f"let {field_}")]
        ours, theirs = _both_replace(
            base, line, line.replace(old_mine, mine), line.replace(old_upstream, upstream)
        )
        out.append(_case(f"semantic/tablegen-same-let/{field_}", _TD_PATH, base, ours, theirs, SEMANTIC))
    backends = 'set(TRITON_CODEGEN_BACKENDS "{}" CACHE STRING "Backends to build")'
    base = ["project(triton CXX C)", "", backends.format("nvidia;amd"), "", "add_subdirectory(lib)"]
    ours, theirs = _both_replace(
        base,
        "set(TRITON_CODEGEN_BACKENDS",
        backends.format("nvidia;amd;tlx"),
        backends.format("nvidia;amd;cpu"),
    )
    out.append(_case("semantic/cmake-same-statement", "CMakeLists.txt", base, ours, theirs, SEMANTIC))
    helpers = _neighbours(2)
    base = _utility_source(helpers)
    other, renamed = helpers[0], helpers[1]
    ours, theirs = _both_replace(base, other.body[0], f"  {other.fork_first}", f"  {other.upstream_first}")
    theirs = _replace(theirs, f"{renamed.ret} {renamed.name}(", renamed.lines(name=_RENAMES[2])[0])
    uses = _fork_use_file(renamed.name, renamed.call, 50)
    note = "upstream also renamed a function the fork uses, which merged cleanly; the conflict is elsewhere"
    out.append(
        _case(
            f"semantic/api-change-elsewhere/{other.name}",
            _UTILITY_PATH,
            base,
            ours,
            theirs,
            SEMANTIC,
            api_uses=uses,
            note=note,
        )
    )
    return out


# --- unknown ----------------------------------------------------------------------------------------------


_DEBUGGING_DOC = [
    "# Debugging Triton",
    "",
    "Set `MLIR_ENABLE_DUMP=1` to dump the IR before every pass.",
    "",
    "Set `TRITON_INTERPRET=1` to run kernels on the CPU.",
    "",
]
_DEBUGGING_DOC_PATH = "docs/programming-guide/debugging.md"
# (the knob's line, the fork's rewording, upstream's)
_DOC_REWORDINGS = (
    (
        "MLIR_ENABLE_DUMP",
        "Set `MLIR_ENABLE_DUMP=1` (or `TLX_DUMP=1`) to dump the IR before every pass.",
        "Set `MLIR_ENABLE_DUMP=kernel_name` to dump one kernel's IR.",
    ),
    (
        "TRITON_INTERPRET",
        "Set `TRITON_INTERPRET=1` to run kernels on the CPU (TLX ops are not supported).",
        "Set `TRITON_INTERPRET=1` to run kernels with the NumPy interpreter.",
    ),
)
_WORKFLOW = [
    "name: Integration Tests",
    "on:",
    "  pull_request:",
    "jobs:",
    "  integration-tests:",
    "    runs-on: [self-hosted, h100]",
    "    timeout-minutes: 60",
]
_CONVENTIONS_RST = [
    "Conventions",
    "===========",
    "",
    "Passes",
    "=======",
    "",
    "Every pass has a lit test.",
    "",
]


def _unknown_files() -> list[ConflictCase]:
    """Both sides changed the same lines of files that are not code Sluice reads."""
    return [*_unknown_pins(), *_unknown_docs(), *_unknown_markup()]


def _unknown_pins() -> list[ConflictCase]:
    out = []
    for index, (old, mine, upstream) in enumerate(
        (("2b5c0a4f", "9fd1c8e3", "c4ff2e0b"), ("86b69c31", "fd8a1c3e", "a0d1b2c3"))
    ):
        base, ours, theirs = ([sha + "0123456789abcdef0123456789abcdef"] for sha in (old, mine, upstream))
        note = "both moved the LLVM pin"
        out.append(
            _case(f"unknown/llvm-hash/{index}", "cmake/llvm-hash.txt", base, ours, theirs, UNKNOWN, note=note)
        )
    versions = ["{", '  "ptxas": "12.8.93",', '  "cuobjdump": "12.8.55",', '  "nvdisasm": "12.8.55"', "}"]
    ours, theirs = _both_replace(versions, "ptxas", '  "ptxas": "12.9.41",', '  "ptxas": "13.0.48",')
    path = "cmake/nvidia-toolchain-version.json"
    out.append(_case("unknown/toolchain-json", path, versions, ours, theirs, UNKNOWN))
    return out


def _unknown_docs() -> list[ConflictCase]:
    out = []
    doc = _DEBUGGING_DOC
    for knob, mine, upstream in _DOC_REWORDINGS:
        ours, theirs = _both_replace(doc, knob, mine, upstream)
        name = f"unknown/docs-same-paragraph/{knob}"
        out.append(_case(name, _DEBUGGING_DOC_PATH, doc, ours, theirs, UNKNOWN))
    return out


def _unknown_markup() -> list[ConflictCase]:
    yml = _WORKFLOW
    ours, theirs = _both_replace(
        yml, "runs-on", "    runs-on: [self-hosted, gb200]", "    runs-on: [self-hosted, h100, b200]"
    )
    workflow = _case(
        "unknown/workflow-yaml", ".github/workflows/integration-tests.yml", yml, ours, theirs, UNKNOWN
    )
    rst = _CONVENTIONS_RST
    ours, theirs = _both_replace(
        rst,
        "Every pass",
        "Every pass has a lit test and a TLX variant.",
        "Every pass has a lit test under test/.",
    )
    note = "the file's own `=======` underline reads as a conflict marker: the merge cannot be split safely"
    markers = _case(
        "unknown/marker-like-lines", "docs/conventions.rst", rst, ours, theirs, UNKNOWN, note=note
    )
    return [workflow, markers]


def _unknown_code() -> list[ConflictCase]:
    """Both sides inserted at one spot outside any body, or changed includes beyond additions."""
    return [
        *_unknown_cpp_same_spot(),
        *_unknown_python_same_spot(),
        *_unknown_includes_removed(),
        *_unknown_class_members(),
        *_unknown_appends_after_indented(),
        _unknown_tablegen_same_spot(),
    ]


def _unknown_cpp_same_spot() -> list[ConflictCase]:
    out = []
    note = "both added a function at the same place mid-file: order and intent need a human"
    mine = ["bool isTlxOp(Operation *op) {", '  return op->getDialect()->getNamespace() == "tlx";', "}", ""]
    upstream = [
        "bool isWarpSpecialized(ModuleOp mod) {",
        '  return mod->hasAttr("ttg.warp-specialized");',
        "}",
        "",
    ]
    for index in (1, 5, 9):
        helper = _HELPERS[index]
        base = _utility_source(_neighbours(index))
        ours, theirs, _ = _inserted(base, _find(base, f"{helper.ret} {helper.name}("), mine, upstream)
        out.append(
            _case(
                f"unknown/cpp-same-spot/{helper.name}", _UTILITY_PATH, base, ours, theirs, UNKNOWN, note=note
            )
        )
    return out


def _unknown_python_same_spot() -> list[ConflictCase]:
    out = []
    for m in _MODULES[1:3]:
        base = _module_source(m)
        at = _find(base, "@builtin", _find(base, f"def {m.reduce}("))  # between two functions
        fn = ["@builtin", "def {0}(x, _semantic=None):", "    return _semantic.{0}(x)", "", ""]
        ours, theirs, _ = _inserted(
            base,
            at,
            [line.format("tlx_local_view") for line in fn],
            [line.format("reshape_view") for line in fn],
        )
        out.append(_case(f"unknown/python-same-spot/{m.path}", m.path, base, ours, theirs, UNKNOWN))
    return out


def _unknown_includes_removed() -> list[ConflictCase]:
    out = []
    note = "upstream dropped or swapped an include the fork may still need while the fork added one beside it"
    for p, replacement in zip(_PASSES[4:6], (['#include "triton/Analysis/AxisInfo.h"'], []), strict=True):
        base = _pass_source(p)
        at = _find(base, '"triton/Analysis/Utility.h"')
        ours = _edit(base, (at + 1, at + 1, ['#include "triton/Conversion/TritonGPUToLLVM/Utility.h"']))
        theirs = _edit(base, (at, at + 1, replacement))
        out.append(_case(f"unknown/include-removed/{p.name}", p.path, base, ours, theirs, UNKNOWN, note=note))
    return out


def _unknown_class_members() -> list[ConflictCase]:
    out = []
    note = "both added members at the end of a class: neither a list nor a function body"
    for p in _PASSES[1:3]:
        base = _pass_source(p)
        at = _find(base, "};")  # the end of the pattern struct
        mine_member, upstream_member = (
            "  void initialize() { setHasBoundedRewriteRecursion(); }",
            f'  static StringRef getDebugName() {{ return "{p.pattern}"; }}',
        )
        ours, theirs, _ = _inserted(base, at, ["", mine_member], ["", upstream_member])
        out.append(
            _case(f"unknown/cpp-class-members/{p.name}", p.path, base, ours, theirs, UNKNOWN, note=note)
        )
    return out


def _unknown_appends_after_indented() -> list[ConflictCase]:
    note = (
        "upstream's indented lines continue the last block; after the fork's block they would join that one"
    )
    base = [
        "def _register_defaults(registry):",
        '    registry["num_warps"] = 4',
        '    registry["num_stages"] = 3',
    ]
    tlx = ["", "", "def _register_tlx(registry):", '    registry["num_tasks"] = 1']
    ours, theirs, _ = _inserted(base, len(base), tlx, ['    registry["num_ctas"] = 1'])
    path = "python/triton/runtime/defaults.py"
    python = _case("unknown/python-append-after-indented", path, base, ours, theirs, UNKNOWN, note=note)
    base = ["name: Integration Tests", "jobs:", "  integration-tests:", "    runs-on: [self-hosted, h100]"]
    ours, theirs, _ = _inserted(
        base, len(base), ["  tlx-tests:", "    runs-on: [self-hosted, h100]"], ["    timeout-minutes: 90"]
    )
    path = ".github/workflows/integration-tests.yml"
    yaml = _case("unknown/yaml-append-after-indented", path, base, ours, theirs, UNKNOWN, note=note)
    return [python, yaml]


def _unknown_tablegen_same_spot() -> ConflictCase:
    base = _td_file(_td_ops(4))
    at = _find(base, "def TTG_", _find(base, "def TTG_") + 1)
    ours, theirs, _ = _inserted(
        base,
        at,
        [*_td_op("TLXFence", "tlx_fence", "fence"), ""],
        [*_td_op("Barrier", "barrier", "barrier"), ""],
    )
    return _case("unknown/tablegen-same-spot", _TD_PATH, base, ours, theirs, UNKNOWN)


def _unknown_kinds() -> list[ConflictCase]:
    """Conflicts git reports without text to merge; base/ours/theirs "" means absent."""
    png, elf = "\x89PNG\r\n\x1a\n\0\0\0\rIHDR", "\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0"
    sources = [_text(_pass_source(p)) for p in _PASSES[:3]]
    edited = [text.replace("return success();", "return success(/*changed=*/true);") for text in sources]
    paths = [p.path for p in _PASSES]
    return [
        ConflictCase(
            "unknown/binary/logo",
            "docs/_static/triton-logo.png",
            png + "A",
            png + "B",
            png + "C",
            UNKNOWN,
            kind="binary",
        ),
        ConflictCase(
            "unknown/binary/libdevice",
            "third_party/nvidia/backend/lib/libdevice.10.bc",
            elf + "1",
            elf + "2",
            elf + "3",
            UNKNOWN,
            kind="binary",
        ),
        ConflictCase(
            "unknown/modify-delete/upstream-deleted",
            paths[0],
            sources[0],
            edited[0],
            "",
            UNKNOWN,
            kind="modify-delete",
            note="upstream deleted a pass the fork changed",
        ),
        ConflictCase(
            "unknown/modify-delete/fork-deleted",
            paths[1],
            sources[1],
            "",
            edited[1],
            UNKNOWN,
            kind="modify-delete",
            note="the fork deleted a file upstream changed",
        ),
        ConflictCase(
            "unknown/rename-delete",
            paths[2],
            sources[2],
            "",
            edited[2],
            UNKNOWN,
            kind="rename-delete",
            note="the fork moved the file under third_party/tlx; upstream changed it in place",
        ),
    ]


# --- clean ------------------------------------------------------------------------------------------------


def _clean_case(name: str, path: str, base: Sequence[str], mine: _Change, upstream: _Change) -> ConflictCase:
    ours, theirs, merged = _edit(base, mine), _edit(base, upstream), _edit(base, mine, upstream)
    return _case(name, path, base, ours, theirs, None, merged)


def _swap(lines: Sequence[str], at: int, new: str) -> _Change:
    return (at, at + 1, [new])


def _clean() -> list[ConflictCase]:
    return [
        *_clean_cpp_passes(),
        *_clean_python_functions(),
        *_clean_cmake_sources(),
        *_clean_lit(),
        *_clean_cpp_includes(),
        *_clean_tablegen(),
        *_clean_same_fix_on_both_sides(),
        _clean_python_all(),
        _clean_docs(),
        _clean_rename_far_from_fork_edit(),
        _clean_python_eof_and_imports(),
    ]


def _clean_cpp_passes() -> list[ConflictCase]:
    out = []
    for p in _PASSES[:4]:
        base = _pass_source(p)
        a, b = _find(base, f'op->setAttr("{p.attr}"'), _find(base, f"patterns.add<{p.pattern}>")
        mine, upstream = (
            _swap(base, a, base[a].replace(p.attr, p.attr + ".tlx")),
            _swap(base, b, f"    patterns.add<{p.pattern}>(context, /*benefit=*/2);"),
        )
        out.append(_clean_case(f"clean/cpp-pass/{p.name}", p.path, base, mine, upstream))
    return out


def _clean_python_functions() -> list[ConflictCase]:
    out = []
    for m in _MODULES[:3]:
        base = _module_source(m)
        a, b = _find(base, f'"""Returns the {m.reduce}'), _find(base, f"    return _semantic.{m.math}(x)")
        mine, upstream = (
            _swap(base, a, base[a].replace("Returns", "Computes")),
            _swap(base, b, f"    return _semantic.{m.math}(x, fast=False)"),
        )
        out.append(_clean_case(f"clean/python-functions/{m.path}", m.path, base, mine, upstream))
    return out


def _clean_cmake_sources() -> list[ConflictCase]:
    out = []
    for path, library, sources, (_, upstream_source) in _SOURCE_LISTS[1:3]:
        base = _cmake(library, sources)
        after_first, end = 2, len(base) - 1  # after the first source; before the closing parenthesis
        mine = (after_first, after_first, [f"  {sources[0].removesuffix('.cpp')}Utils.cpp"])
        out.append(
            _clean_case(
                f"clean/cmake-sources/{library}", path, base, mine, (end, end, [f"  {upstream_source}"])
            )
        )
    return out


def _clean_lit() -> list[ConflictCase]:
    out = []
    for index, p in enumerate(_PASSES[:3]):
        names = _lit_names(p)
        base = _lit_file(p, names)
        a, end = _find(base, "// CHECK: "), len(base)
        mine, upstream = (
            _swap(base, a, base[a].replace("CHECK:", "CHECK-NEXT:")),
            (end, end, ["", "// -----", "", *_lit_case(names[0] + "_new", index + 2)]),
        )
        out.append(_clean_case(f"clean/lit/{p.name}", _lit_path(p), base, mine, upstream))
    return out


def _clean_cpp_includes() -> list[ConflictCase]:
    out = []
    for p in _PASSES[4:6]:
        mine, upstream = (
            (1, 1, ['#include "mlir/Pass/Pass.h"']),
            (6, 6, ['#include "triton/Tools/Sys/GetEnv.hpp"']),
        )
        out.append(_clean_case(f"clean/cpp-includes/{p.name}", p.path, _pass_source(p), mine, upstream))
    return out


def _clean_tablegen() -> list[ConflictCase]:
    out = []
    for start in (0, 3):
        base = _td_file(_td_ops(start))
        a = _find(base, "let summary")
        b = _find(
            base, "let assemblyFormat", _find(base, "def TTG_", _find(base, "def TTG_", a) + 1)
        )  # the third op
        mine, upstream = (
            _swap(base, a, base[a].replace('";', ' (TLX)";')),
            _swap(base, b, base[b].replace("attr-dict", "attr-dict `,`")),
        )
        out.append(_clean_case(f"clean/tablegen/{_TD_OPS[start][0]}", _TD_PATH, base, mine, upstream))
    return out


def _clean_same_fix_on_both_sides() -> list[ConflictCase]:
    out = []
    note = "the fork had already picked this upstream fix"
    for p in _PASSES[6:8]:
        base = _pass_source(p)
        fixed = _replace(base, "int64_t numElems", "    int64_t numElems = type.getNumElements();")
        out.append(
            _case(
                f"clean/same-fix-on-both-sides/{p.name}", p.path, base, fixed, fixed, None, fixed, note=note
            )
        )
    return out


def _clean_python_all() -> ConflictCase:
    m = _MODULES[3]
    base = _module_source(m)
    a = _find(base, "__all__ = [") + 2
    b = _find(base, "]", a)
    mine, upstream = (a, a, ['    "tlx_async_task",']), (b, b, ['    "fp8e4nv",'])
    return _clean_case(f"clean/python-all/{m.path}", m.path, base, mine, upstream)


def _clean_docs() -> ConflictCase:
    doc = _DEBUGGING_DOC
    mine, upstream = (
        _swap(doc, 2, "Set `MLIR_ENABLE_DUMP=1` to dump the IR (TLX ops included)."),
        _swap(doc, 4, "Set `TRITON_INTERPRET=1` to use the interpreter."),
    )
    return _clean_case("clean/docs", _DEBUGGING_DOC_PATH, doc, mine, upstream)


def _clean_rename_far_from_fork_edit() -> ConflictCase:
    helpers = _neighbours(3)
    base = _utility_source(helpers)
    a, b = _find(base, helpers[0].body[0]), _find(base, f"{helpers[2].ret} {helpers[2].name}(")
    mine, upstream = (
        _swap(base, a, f"  {helpers[0].fork_first}"),
        _swap(base, b, helpers[2].lines(name=helpers[2].name + "Impl")[0]),
    )
    name = f"clean/rename-far-from-fork-edit/{helpers[2].name}"
    return _clean_case(name, _UTILITY_PATH, base, mine, upstream)


def _clean_python_eof_and_imports() -> ConflictCase:
    m = _MODULES[5]
    base = _module_source(m)
    mine, upstream = (
        (len(base), len(base), _py_function("tlx_sync", "TLX sync.")),
        _swap(base, 3, "import math  # noqa: F401"),
    )
    return _clean_case(f"clean/python-eof-and-imports/{m.path}", m.path, base, mine, upstream)


# --- misplaced anchors ------------------------------------------------------------------------------------
# Shapes where a rule that places upstream's lines by the text around them, rather than by diff3's own
# positions, put a block somewhere other than where upstream put it. Each is left to a human.


def _details(title: str, text: str) -> _Lines:
    return ["<details>", f"<summary>{title}</summary>", "", text, "", "</details>", ""]


def _gluon_test(name: str, store: str) -> _Lines:
    return [
        f"def {name}(device):",
        "",
        "    @gluon.jit",
        "    def kernel(x_ptr, y_ptr):",
        "        x = gl.load(x_ptr)",
        f"        gl.store(y_ptr, {store})",
        "",
        "    x = torch.ones(4, device=device)",
        "    y = torch.empty_like(x)",
        "    kernel[(1,)](x, y)",
        "    torch.testing.assert_close(y, x)",
    ]


_VERIFY_SOURCE = [
    '#include "triton/Dialect/TritonGPU/IR/Dialect.h"',
    "",
    "namespace mlir::triton::gpu {",
    "",
    "LogicalResult AsyncCopyGlobalToLocalOp::verify() {",
    "  auto srcTy = getSrc().getType();",
    "  if (!isa<triton::PointerType>(getElementTypeOrSelf(srcTy)))",
    '    return emitOpError("source must be a tensor of pointers");',
    "  return success();",
    "}",
    "",
    "LogicalResult LocalAllocOp::verify() {",
    "  if (!getSrc())",
    "    return success();",
    "  auto srcTy = getSrc().getType();",
    "  return verifyAllocType(*this, srcTy, getType());",
    "}",
    "",
    "} // namespace mlir::triton::gpu",
]


_README_INTRO = ["# Triton", "", "Triton is a language and compiler for custom deep-learning primitives.", ""]
_GLUON_IMPORTS = [
    "import torch",
    "from triton.experimental import gluon",
    "from triton.experimental.gluon import language as gl",
]
_MAKE_CUBIN = [
    "def make_cubin(src, ptxas_cmd, fsrc, flog):",
    "    try:",
    "        subprocess.run(ptxas_cmd, check=True, close_fds=False, stderr=flog)",
    "        if os.path.exists(fsrc.name):",
    "            os.remove(fsrc.name)",
    "    except subprocess.CalledProcessError as e:",
    "        raise PTXASError(e.returncode) from e",
]
_ROOT_CMAKE_OPTIONS = [
    "cmake_minimum_required(VERSION 3.20)",
    "project(triton CXX C)",
    "",
    "# Options",
    'option(TRITON_BUILD_TUTORIALS "Build C++ Triton tutorials" ON)',
    'option(TRITON_BUILD_PYTHON_MODULE "Build Python Triton bindings" OFF)',
    'option(TRITON_BUILD_UT "Build C++ Triton Unit Tests" ON)',
]


def _misplaced_anchors() -> list[ConflictCase]:
    return [
        _readme_repeated_section_head(),
        _gluon_nested_jit(),
        _cpp_verify_replaced_anchor(),
        _comment_above_edited_anchor(),
        _insertion_beside_deleted_line(),
    ]


def _readme_repeated_section_head() -> ConflictCase:
    base = [
        *_README_INTRO,
        *_details("Install", "Run `pip install -e .`."),
        *_details("Test", "Run `make test`."),
    ]
    at = _find(base, "<summary>Test</summary>") - 1
    theirs = _edit(base, (at, at, _details("Debug a kernel", "Set `TRITON_INTERPRET=1`.")))
    ours = _edit(base, (at, at + 1, ["<details open>"]))
    note = (
        "upstream's new section starts with the `<details>` line the fork opened: read by the text around it,"
        " the fork's `open` lands on upstream's section instead of the one it was for"
    )
    name = "unknown/misplaced-anchor/readme-repeated-section-head"
    return _case(name, "README.md", base, ours, theirs, UNKNOWN, note=note)


def _gluon_nested_jit() -> ConflictCase:
    tests = [*_gluon_test("test_copy", "x"), "", "", *_gluon_test("test_scale", "x * 2")]
    base = [*_GLUON_IMPORTS, "", "", *tests]
    at = _find(base, "@gluon.jit", _find(base, "def test_scale"))
    theirs = _edit(base, (at, at, ["    @gluon.jit", "    def twice(x):", "        return x * 2", ""]))
    ours = _edit(base, (at, at + 1, ['    @gluon.jit(do_not_specialize=["y_ptr"])']))
    note = (
        "upstream's nested `@gluon.jit` helper starts with the decorator line the fork replaced (a line that"
        " also opens the kernel of every other test): placed by that text, the fork's decorator moves onto"
        " upstream's helper"
    )
    path = "python/test/gluon/test_copies.py"
    return _case("semantic/misplaced-anchor/gluon-nested-jit", path, base, ours, theirs, SEMANTIC, note=note)


def _cpp_verify_replaced_anchor() -> ConflictCase:
    base = _VERIFY_SOURCE
    at = _find(base, "auto srcTy = getSrc().getType();")
    check = [
        "  if (getMask() && cast<RankedTensorType>(getMask().getType()).getShape() !=",
        "                     cast<RankedTensorType>(srcTy).getShape())",
        '    return emitOpError("mask shape must match the source shape");',
    ]
    theirs = _edit(base, (at + 1, at + 1, check))
    tlx = [
        "  Type srcTy = getSrc().getType();",
        "  if (tlx::isTlxAsyncCopy(*this))",
        "    return tlx::verifyAsyncCopy(*this, srcTy);",
    ]
    ours = _edit(base, (at, at + 1, tlx))
    note = (
        "upstream's check follows a line the fork replaced by three (the same line opens another verifier):"
        " after the fork's early return, TLX copies would skip upstream's check"
    )
    name, path = "semantic/misplaced-anchor/cpp-verify-replaced-anchor", "lib/Dialect/TritonGPU/IR/Ops.cpp"
    return _case(name, path, base, ours, theirs, SEMANTIC, note=note)


def _comment_above_edited_anchor() -> ConflictCase:
    base = _MAKE_CUBIN
    at = _find(base, "if os.path.exists(fsrc.name)")
    dump = [
        "        if knobs.nvidia.dump_ptxas_log:",
        "            with open(flog.name) as log_file:",
        "                print(log_file.read())",
        "",
    ]
    mine = [
        "        # Skip deleting on Windows: the file may still be open in another process.",
        '        if os.path.exists(fsrc.name) and os.name != "nt":',
    ]
    theirs = _edit(base, (at, at, dump))
    ours = _edit(base, (at, at + 1, mine))
    merged = _edit(base, (at, at, dump), (at, at + 1, mine))
    note = (
        "the fork edited the line upstream inserted before, and put a comment above it: the comment"
        " belongs to that line, so upstream's lines go above both (as Intel's engineers merged it)"
    )
    name, path = "mechanical/adjacent/comment-above-edited-anchor", "third_party/nvidia/backend/compiler.py"
    return _case(name, path, base, ours, theirs, MECHANICAL, merged, note=note)


def _insertion_beside_deleted_line() -> ConflictCase:
    base = _ROOT_CMAKE_OPTIONS
    at = _find(base, "TRITON_BUILD_TUTORIALS")
    proton = [
        "if(WIN32)",
        "  set(DEFAULT_BUILD_PROTON OFF)",
        "else()",
        "  set(DEFAULT_BUILD_PROTON ON)",
        "endif()",
        'option(TRITON_BUILD_PROTON "Build the Triton Proton profiler" ${DEFAULT_BUILD_PROTON})',
    ]
    ours, theirs = _edit(base, (at, at, proton)), _edit(base, (at, at + 1, []))
    merged = _edit(base, (at, at, proton), (at, at + 1, []))
    note = "upstream deleted the line the fork inserted before: one gap is left, so the fork's lines go there"
    name = "mechanical/adjacent/insertion-beside-deleted-line"
    return _case(name, "CMakeLists.txt", base, ours, theirs, MECHANICAL, merged, note=note)


_FAMILIES: tuple[Callable[[], list[ConflictCase]], ...] = (
    _cmake_source_lists,
    _cmake_link_libs,
    _python_all_lists,
    _python_imports,
    _cpp_includes,
    _lit_appends,
    _cpp_tables,
    _file_and_block_ends,
    _whitespace,
    _adjacent_edits,
    _mentions,
    _python_local_kernel,
    _cpp_api,
    _header_api,
    _python_api,
    _tablegen_api,
    _cpp_semantic,
    _python_semantic,
    _same_names_set,
    _same_names_imported,
    _spacing_in_strings,
    _other_semantic,
    _unknown_files,
    _unknown_code,
    _unknown_kinds,
    _misplaced_anchors,
    _clean,
)
