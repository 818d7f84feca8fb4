"""Sandbox generator: a deterministic Triton-like upstream and a TLX fork as bare repos, with ground truth."""

from __future__ import annotations

import functools
import json
import os
import random
import re
import shutil
import string
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import IO, TypeVar

from bot.core.models import RecognitionMethod

__all__ = [
    "BENCH",
    "DEMO",
    "HIGH_RISK_PATTERNS",
    "Manifest",
    "Sandbox",
    "SandboxSize",
    "build_sandbox",
    "is_high_risk",
]


# ---------------------------------------------------------------------------------------------- public API


@dataclass(frozen=True)
class SandboxSize:
    files: int
    base_commits: int
    fork_commits: int
    ingested: int
    pending: int
    seed: int = 0


DEMO = SandboxSize(files=400, base_commits=200, fork_commits=60, ingested=150, pending=120)
# ≈12,000 upstream commits in all, like Triton
BENCH = SandboxSize(files=5000, base_commits=10_000, fork_commits=2000, ingested=600, pending=500)

# Smallest sizes that still hold every ground-truth structure the manifest promises.
MIN_SIZE = SandboxSize(files=120, base_commits=5, fork_commits=12, ingested=20, pending=40)

TRAILER = RecognitionMethod.TRAILER.value
CHERRY_PICK_X = RecognitionMethod.CHERRY_PICK_X.value
PATCH_ID = RecognitionMethod.PATCH_ID.value
SUBJECT_PATTERN = RecognitionMethod.SUBJECT_PATTERN.value
EMERGENCY = "emergency"  # the fork-side marker of an emergency pick (not a recognition method)

HIGH_RISK_PATTERNS = (
    "cmake/llvm-hash.txt",
    "cmake/*toolchain*",
    "lib/Dialect/*/Transforms/**",
    "lib/Analysis/**",
    "lib/Conversion/**",
    "third_party/nvidia/lib/**",
    "third_party/amd/lib/**",
    "python/src/**",
    "python/triton/runtime/**",
    "third_party/*/backend/driver.*",
)


def _glob_regex(pattern: str) -> str:
    out = re.escape(pattern).replace(r"\*\*", "\0").replace(r"\*", "[^/]*")
    return out.replace("\0", ".*")


_HIGH_RISK_RE = re.compile("|".join(f"(?:{_glob_regex(p)})" for p in HIGH_RISK_PATTERNS) + r"\Z")


def is_high_risk(path: str) -> bool:
    """True for paths in a high-risk component (LLVM pin, toolchain, core passes, codegen, runtime ABI)."""
    return _HIGH_RISK_RE.match(path) is not None


@dataclass(frozen=True)
class Manifest:
    """Ground truth about a sandbox: what the fork has, what it lacks, and how the pending commits relate."""

    upstream_head: str
    fork_head: str
    fork_point: str
    ingestion_tip: str
    ingested: dict[str, str]  # upstream sha -> recognition method (picks after the fork point, no emergency)
    emergency: list[str]
    backlog: list[str]
    pending: list[str]
    patch_stack: list[str]
    fork_picks: dict[str, str]  # upstream sha -> fork commit that carries it (ingested and emergency)
    line_dependencies: list[tuple[str, str]]  # (later, earlier)
    reverts: dict[str, str]
    relands: dict[str, str]
    llvm_bumps: list[str]
    large: list[str]
    patch_stack_symbol_overlaps: list[str]
    overlap_symbols: dict[str, str]
    conflicting: list[str]
    interface_changes: list[str]
    independent: list[str]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)


@dataclass(frozen=True)
class Sandbox:
    root: Path
    upstream: Path
    fork: Path
    manifest: Manifest
    fork_ref: str = "main"
    upstream_ref: str = "upstream/main"


class SandboxError(ValueError):
    """The requested sandbox cannot be built (size too small, target exists, git failed)."""


# ---------------------------------------------------------------------------------------------- text model

Key = tuple[str, str]  # (path, block name or one of the pseudo names below)
_T = TypeVar("_T")
HEADER, BOF, EOF, WHOLE = "<header>", "<bof>", "<eof>", "<file>"


@dataclass(frozen=True, slots=True)
class Block:
    """One top-level unit of a file: a function, class, lit case, doc section, op definition."""

    name: str
    lines: tuple[str, ...]


_SEPARATORS: dict[str, tuple[str, ...]] = {
    "py": ("", ""),
    "pytest": ("", ""),
    "mlir": ("", "// -----", ""),
    "text": (),
    "json": (),
    "yaml": (),
}


@dataclass(frozen=True, slots=True)
class SourceFile:
    kind: str  # cpp, h, td, py, pytest, mlir, md, cmake, text, json, yaml
    header: tuple[str, ...]
    blocks: tuple[Block, ...]
    footer: tuple[str, ...] = ()
    scope: str = ""  # C++ namespace that qualifies the blocks' names

    def render(self) -> bytes:
        sep = _SEPARATORS.get(self.kind, ("",))
        out = list(self.header)
        for i, block in enumerate(self.blocks):
            if i:
                out.extend(sep)
            out.extend(block.lines)
        out.extend(self.footer)
        return ("\n".join(out) + "\n").encode()

    def find(self, name: str) -> int:
        for i, block in enumerate(self.blocks):
            if block.name == name:
                return i
        raise _Bug(f"no block {name!r}")

    def qualname(self, name: str) -> str:
        return f"{self.scope}::{name}" if self.scope else name

    def with_block(self, index: int, block: Block) -> SourceFile:
        return replace(self, blocks=(*self.blocks[:index], block, *self.blocks[index + 1 :]))


class _Bug(RuntimeError):
    """An edit did not apply: the generator broke one of its own invariants."""


@dataclass(frozen=True, slots=True)
class ReplaceBlock:
    path: str
    old: Block
    new: Block


@dataclass(frozen=True, slots=True)
class InsertBlock:
    path: str
    anchor: str | None  # insert after this block; None: before the first one
    new: Block


@dataclass(frozen=True, slots=True)
class RemoveBlock:
    path: str
    anchor: str | None
    old: Block


@dataclass(frozen=True, slots=True)
class SetHeader:
    path: str
    old: tuple[str, ...]
    new: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AddFile:
    path: str
    file: SourceFile


Op = ReplaceBlock | InsertBlock | RemoveBlock | SetHeader | AddFile


def _apply(tree: dict[str, SourceFile], op: Op) -> None:
    if isinstance(op, AddFile):
        if op.path in tree:
            raise _Bug(f"{op.path} exists")
        tree[op.path] = op.file
        return
    f = tree[op.path]
    if isinstance(op, ReplaceBlock):
        i = f.find(op.old.name)
        if f.blocks[i] != op.old:
            raise _Bug(f"{op.path}:{op.old.name} changed underneath")
        tree[op.path] = f.with_block(i, op.new)
    elif isinstance(op, InsertBlock):
        i = 0 if op.anchor is None else f.find(op.anchor) + 1
        tree[op.path] = replace(f, blocks=(*f.blocks[:i], op.new, *f.blocks[i:]))
    elif isinstance(op, RemoveBlock):
        i = f.find(op.old.name)
        if f.blocks[i] != op.old:
            raise _Bug(f"{op.path}:{op.old.name} changed underneath")
        tree[op.path] = replace(f, blocks=(*f.blocks[:i], *f.blocks[i + 1 :]))
    else:
        if f.header != op.old:
            raise _Bug(f"{op.path} header changed underneath")
        tree[op.path] = replace(f, header=op.new)


def _inverse(op: Op) -> Op:
    if isinstance(op, ReplaceBlock):
        return ReplaceBlock(op.path, op.new, op.old)
    if isinstance(op, InsertBlock):
        return RemoveBlock(op.path, op.anchor, op.new)
    if isinstance(op, RemoveBlock):
        return InsertBlock(op.path, op.anchor, op.old)
    if isinstance(op, SetHeader):
        return SetHeader(op.path, op.new, op.old)
    raise _Bug("file additions are never reverted")


def _op_keys(op: Op, before: SourceFile | None) -> set[Key]:
    """The regions an op touches or borders, for dependency bookkeeping."""
    p = op.path
    if isinstance(op, AddFile):
        return {(p, WHOLE)}
    if isinstance(op, SetHeader):
        return {(p, HEADER)}
    if isinstance(op, ReplaceBlock):
        return {(p, op.old.name), (p, op.new.name)}
    assert before is not None
    names = [b.name for b in before.blocks]
    at = 0 if op.anchor is None else names.index(op.anchor) + 1
    if isinstance(op, RemoveBlock):
        at = names.index(op.old.name) + 1
    following = names[at] if at < len(names) else EOF
    changed = op.new.name if isinstance(op, InsertBlock) else op.old.name
    return {(p, op.anchor or BOF), (p, changed), (p, following)}


# ---------------------------------------------------------------------------------------------- vocabulary


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_CAMEL_VERBS = _words(
    "Accelerate Optimize Remove Reorder Combine Hoist Sink Coalesce Pipeline Prefetch Schedule Lower Convert "
    "Allocate Fuse Canonicalize Propagate Partition Specialize Decompose Materialize Legalize Rewrite Split "
    "Verify Simplify Promote Annotate Insert Elide"
)
_CAMEL_NOUNS = _words(
    "Matmul DotOperands LayoutConversions Instructions TensorSelect SharedMemory Barriers AsyncCopy "
    "TMAStores "
    "TMEMAlloc WarpGroups LoadStore Reductions Scans Histograms Atomics Broadcasts Descriptors Fences Loops "
    "Masks Pointers Swizzling Accumulators ConvertLayout Epilogue Prologue ScaledDot Gather "
    "Transposes Splats "
    "Constants Casts Buffers MMAv5 WGMMA MFMA WMMA LDS BufferOps Stages Partitions"
)
_SNAKE = _words(
    "async copy layout reduce scan dot mma wgmma mfma tma descriptor barrier pipeline prefetch "
    "coalesce buffer "
    "shared tensor block pointer atomic histogram gather scatter cast fp8 bf16 int4 mxfp warp cta "
    "cluster loop "
    "schedule epilogue prologue swizzle remat hoist sink fence alloc load store split join "
    "transpose broadcast "
    "splat math random cumsum sort topk where clamp dequant matmul attention softmax layernorm persistent "
    "stream kpack"
)
_FN_VERBS = _words(
    "get compute lower convert emit build create infer verify rewrite materialize hoist sink fold propagate "
    "collect find update apply lookup insert replace allocate schedule expand split pack swizzle"
)
_PRED_VERBS = ("is", "has", "can", "should")
_FN_NOUNS = _words(
    "SharedEncoding WarpsPerCTA ThreadsPerWarp SizePerThread Order DotOperand MmaLayout BlockedLayout "
    "LinearLayout Accumulator AsyncCopy Barrier Descriptor TMAStore LoadOp StoreOp Reduction ScanOp Stage "
    "LoopCarried Yield ForOp ConvertLayout Offsets Mask Pointer Stride ElemTy BitWidth NumElements "
    "Vectorization Alignment Contiguity SwizzlingFactor Padding MemDesc Alloc Partition Cluster Fence WGMMA "
    "MFMA Scale Fp8Cast Histogram Atomic"
)
_CPP_VARS = _words(
    "layout encoding shape order numWarps rank elemTy loc ctx mod forOp yieldOp user operand result srcTy "
    "dstTy vecSize bitwidth numElems stride offset mask alloc barrier warpsPerCTA sizePerThread "
    "threadsPerWarp newOp cvt loadOp storeOp dotOp accTy kWidth opIdx numStages tensorTy memDesc sharedEnc "
    "parent region block value attr dims perm tile lane warp pred"
)
_CPP_ATTRS = _words(
    "BlockedEncodingAttr NvidiaMmaEncodingAttr AMDMfmaEncodingAttr DotOperandEncodingAttr SliceEncodingAttr "
    "SwizzledSharedEncodingAttr NVMMASharedEncodingAttr LinearEncodingAttr AMDWmmaEncodingAttr"
)
_CPP_OPS = _words(
    "triton::LoadOp triton::StoreOp triton::DotOp ConvertLayoutOp LocalAllocOp LocalLoadOp "
    "AsyncCopyGlobalToLocalOp triton::SplatOp triton::BroadcastOp arith::ConstantOp triton::ReduceOp "
    "MemDescSubviewOp triton::nvidia_gpu::WarpGroupDotOp"
)
_CPP_EXPRS = (
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
_CPP_SIMPLE = (
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
_CPP_CONDS = (
    "{a}.getRank() > {n}",
    "isa<{attr}>({a})",
    "{a} == {b}",
    "!{a}.empty()",
    "{a} % {n} == 0",
    "{a}.getNumElements() > {n}",
    "!isa<{attr}>({a})",
)
_CPP_RET = (  # (return type, failure expression, success expression)
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
_CPP_PARAMS = (
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
_CPP_INCLUDES = (
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
_PY_VARS = _words(
    "input axis shape dtype ret mask other offsets block_shape num_warps num_stages ptr value scalar_ty out "
    "src dst idx keep_dims cache options key args signature constants device stream grid bound"
)
_PY_EXPRS = (
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
_PY_SIMPLE = (
    "{v} = {expr}",
    "{v} = {expr}",
    "{v} = {expr}",
    'assert {cond}, "{msg}"',
    "{a}.append({b})",
    "{v} = {helper}({a})",
)
_PY_CONDS = (
    "{a} is None",
    "not {a}",
    "{a} > {n}",
    "isinstance({a}, constexpr)",
    "{a} == {b}",
    "len({a}) != {n}",
)
_PY_IMPORTS = (
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
_NOUNS = (
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
_TOPICS = (
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
_PROBLEMS = (
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
_ARCHES = ("gfx942", "gfx950", "sm90", "sm100", "sm80", "Hopper", "Blackwell", "MI300", "RDNA4")
_SENTENCES = (
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
_MLIR_OPS = (
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
_MLIR_CHECKS = (
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
_TEST_EXPRS = (
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
_FIRST = _words(
    "Mara Lin Kenji Priya Tomasz Aisha Diego Ingrid Wei Olu Sanna Rafael Mei Anders Leila Jonas Keiko "
    "Mateo Nadia Pavel Yuki Farid Elena Bruno Hana Ivo Sunita Colm Greta Arjun Lucia Dmitri Amara Henrik "
    "Rosa Takumi Zainab Emil Chiara Sven"
)
_LAST = _words(
    "Lindqvist Arakawa Raman Nowak Bello Ferreira Halvorsen Zhou Adeyemi Virtanen Costa Tanaka Berg Haddad "
    "Keller Mori Alvarez Petrova Sokolov Nakamura Rahimi Ionescu Santos Kim Horvat Iyer Byrne Weber Menon "
    "Ricci Volkov Okafor Dahl Ortega Sato Mensah Brandt Conti Larsen"
)
_TLX_WORDS = _words(
    "local_alloc local_view local_load local_store async_load async_load_commit_group async_load_wait_group "
    "barrier_arrive barrier_wait barrier_expect_bytes async_descriptor_load async_descriptor_store "
    "async_dot async_dot_wait storage_alias buffered_tensor async_task warp_specialize tmem_copy"
)


_FIELD_WORDS: dict[str, Sequence[str]] = {
    "n": ("1", "2", "4", "8", "16", "32", "64", "128"),
    "i": ("0", "1", "2", "3"),
    "attr": _CPP_ATTRS,
    "op": _CPP_OPS,
    "n1": _NOUNS,
    "n2": _NOUNS,
    "n3": _NOUNS,
    "problem": _PROBLEMS,
    "arch": _ARCHES,
}
_TLX_KINDS = {
    "new_cpp": 8,
    "new_py": 3,
    "new_lit": 5,
    "mod_cpp": 30,
    "add_cpp": 12,
    "mod_py": 12,
    "add_py": 6,
    "add_lit": 14,
    "doc": 3,
}

# ---------------------------------------------------------------------------------------------- content


def _camel_words(stem: str) -> str:
    return " ".join(w.lower() for w in re.findall(r"[A-Z0-9]+(?![a-z])|[A-Z]?[a-z0-9]+", stem)) or stem


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


_FIELDS: dict[str, tuple[str, ...]] = {}


def _fields(template: str) -> tuple[str, ...]:
    got = _FIELDS.get(template)
    if got is None:
        got = tuple(f for _, f, _, _ in string.Formatter().parse(template) if f)
        _FIELDS[template] = got
    return got


class _Writer:
    """Writes realistic Triton-like source: C++, Python, lit tests, TableGen, docs, build files."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.serial = 0

    # -- small pieces

    def pick(self, seq: Sequence[_T]) -> _T:
        return seq[int(self.rng.random() * len(seq))]

    def sentence(self) -> str:
        return self.fill(self.pick(_SENTENCES), [], [])

    def fill(
        self,
        template: str,
        names: Sequence[str],
        helpers: Sequence[str],
        *,
        pool: Sequence[str] = _CPP_VARS,
        **given: str,
    ) -> str:
        """Fill a template, generating only the fields it uses."""
        values = dict(given)
        for f in _fields(template):
            if f not in values:
                values[f] = self.field(f, names, helpers, pool)
        return template.format(**values)

    def field(self, name: str, names: Sequence[str], helpers: Sequence[str], pool: Sequence[str]) -> str:
        words = _FIELD_WORDS.get(name)
        if words is not None:
            return self.pick(words)
        if name in ("a", "b"):
            return self.pick(names) if names and self.rng.random() < 0.85 else self.pick(pool)
        if name == "v":
            return self.pick(pool)
        if name in ("expr", "cond"):
            return self.fill(self.pick(_CPP_EXPRS if name == "expr" else _CPP_CONDS), names, helpers)
        if name in ("word", "attrname"):
            return self.pick(_SNAKE) + "." + self.pick(_SNAKE)
        if name == "helper":
            return self.pick(helpers) if helpers else "getOrder"
        if name == "fn":
            return self.pick(_FN_VERBS) + self.pick(_FN_NOUNS)
        return f"expected a valid {self.pick(_NOUNS)}"  # msg, comment

    def unique(self, taken: Iterable[str], make: Callable[[], str]) -> str:
        taken = set(taken)
        for _ in range(30):
            name = make()
            if name not in taken:
                return name
        self.serial += 1
        return f"{make()}{self.serial}"

    def fn_name(self) -> str:
        return self.pick(_FN_VERBS) + self.pick(_FN_NOUNS)

    # -- C++

    def cpp_simple(self, names: Sequence[str], helpers: Sequence[str]) -> str:
        if helpers and self.rng.random() < 0.15:
            return self.fill("auto {v} = {helper}({a});", names, helpers)
        if self.rng.random() < 0.08:
            return "// " + self.sentence()
        return self.fill(self.pick(_CPP_SIMPLE), names, helpers)

    def cpp_stmt(self, names: Sequence[str], helpers: Sequence[str], fail: str | None) -> list[str]:
        """One statement as lines relative to the body indent."""
        r = self.rng.random()
        if fail is not None and r < 0.12:
            a = self.pick(names) if names else "op"
            return [f"if (!{a})", f"  return{fail};"]
        if r < 0.24:
            inner = [self.cpp_simple(names, helpers) for _ in range(self.rng.randint(1, 3))]
            return [self.fill("if ({cond}) {{", names, helpers), *("  " + s for s in inner), "}"]
        if r < 0.32:
            a = self.pick(names) if names else "op"
            head = self.pick(
                (
                    f"for (Operation *user : {a}->getUsers()) {{",
                    f"for (auto [i, dim] : llvm::enumerate({a}.getShape())) {{",
                    f"for (unsigned d = 0; d < {a}.size(); ++d) {{",
                )
            )
            inner = [
                self.cpp_simple([*names, "user", "dim", "d"], helpers) for _ in range(self.rng.randint(1, 2))
            ]
            return [head, *("  " + s for s in inner), "}"]
        return [self.cpp_simple(names, helpers)]

    def cpp_function(self, taken: Iterable[str], helpers: Sequence[str]) -> Block:
        rtype, fail, ok = _CPP_RET[int(self.rng.random() * len(_CPP_RET))]
        verb_pool = _PRED_VERBS if rtype == "bool" else _FN_VERBS
        name = self.unique(taken, lambda: self.pick(verb_pool) + self.pick(_FN_NOUNS))
        params = self.rng.sample(_CPP_PARAMS, self.rng.randint(1, 3))
        names = [p[1] for p in params]
        static = "static " if self.rng.random() < 0.35 else ""
        out: list[str] = []
        if self.rng.random() < 0.4:
            out.append("// " + self.sentence())
        out.append(f"{static}{rtype} {name}({', '.join(t + n for t, n in params)}) {{")
        target = self.rng.randint(4, 26)
        body: list[str] = []
        while len(body) < target:
            stmt = self.cpp_stmt(names, helpers, fail)
            body.extend(stmt)
            m = re.match(r"(?:auto|unsigned|int64_t|SmallVector<unsigned>) (\w+)", stmt[0])
            if m:
                names.append(m.group(1))
        out.extend("  " + s for s in body)
        if rtype != "void":
            out.append("  return" + self.fill(ok, names, helpers, v=self.pick(names)) + ";")
        out.append("}")
        return Block(name, tuple(out))

    def cpp_pattern(self, taken: Iterable[str], helpers: Sequence[str]) -> Block:
        op = self.pick(_CPP_OPS)
        base = op.split("::")[-1].removesuffix("Op")
        name = self.unique(
            taken, lambda: f"{base}{self.pick(('', 'Async', 'Buffer', 'Shared', 'Scaled'))}Conversion"
        )
        names = ["op", "adaptor", "rewriter", "loc"]
        body: list[str] = ["auto loc = op.getLoc();"]
        for _ in range(self.rng.randint(3, 9)):
            body.extend(self.cpp_stmt(names, helpers, " failure()"))
        return Block(
            name,
            (
                f"struct {name}",
                f"    : public ConvertOpToLLVMPattern<{op}> {{",
                "  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;",
                "",
                "  LogicalResult",
                f"  matchAndRewrite({op} op, OpAdaptor adaptor,",
                "                  ConversionPatternRewriter &rewriter) const override {",
                *("    " + s for s in body),
                "    return success();",
                "  }",
                "};",
            ),
        )

    def cpp_includes(self, extra: Sequence[str] = ()) -> list[str]:
        chosen = sorted({*self.rng.sample(_CPP_INCLUDES, self.rng.randint(3, 7)), *extra})
        return [f'#include "{inc}"' for inc in chosen]

    def cpp_file(self, stem: str, scope: str, *, nested: bool, patterns: bool, size: int = 0) -> SourceFile:
        header = self.cpp_includes()
        if scope:
            header += ["", f'#define DEBUG_TYPE "{"-".join(_camel_words(stem).split())}"']
            header += ['#define LDBG(X) LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "]: " << X << "\\n")', ""]
        else:
            header += ["", "namespace py = pybind11;", ""]
        parts = scope.split("::") if scope else []
        if nested or len(parts) < 2:
            opening = [f"namespace {p} {{" for p in parts]
            closing = [f"}} // namespace {p}" for p in reversed(parts)]
        else:
            opening, closing = [f"namespace {scope} {{"], [f"}} // namespace {scope}"]
        blocks: list[Block] = []
        helpers: list[str] = []
        count = self.rng.randint(3, 8)
        total = 0
        while (len(blocks) < count) if not size else (total < size):
            taken = [b.name for b in blocks]
            if patterns and self.rng.random() < 0.35:
                block = self.cpp_pattern(taken, helpers)
            else:
                block = self.cpp_function(taken, helpers)
                helpers.append(block.name)
            blocks.append(block)
            total += len(block.lines) + 1
        return SourceFile(
            "cpp",
            (*header, *opening, "") if opening else tuple(header),
            tuple(blocks),
            ("", *closing) if closing else (),
            scope,
        )

    def cpp_variant(self, line: str, names: Sequence[str]) -> str:
        ind = _indent_of(line)
        if line.strip().startswith("//"):
            return ind + "// " + self.sentence()
        return ind + self.cpp_simple(names, ())

    # -- headers and TableGen

    def h_decl(self, taken: Iterable[str]) -> Block:
        if self.rng.random() < 0.25:
            name = self.unique(
                taken, lambda: self.pick(_CAMEL_NOUNS) + self.pick(("Info", "Analysis", "Builder"))
            )
            methods = [self.h_method() for _ in range(self.rng.randint(2, 5))]
            return Block(
                name,
                (
                    "/// " + self.sentence(),
                    f"class {name} {{",
                    "public:",
                    f"  explicit {name}(Operation *op);",
                    "",
                    *methods,
                    "",
                    "private:",
                    f"  Operation *{self.pick(_CPP_VARS)}Op = nullptr;",
                    "};",
                ),
            )
        name = self.unique(taken, self.fn_name)
        rtype = _CPP_RET[int(self.rng.random() * 8)][0]
        params = ", ".join(t + n for t, n in self.rng.sample(_CPP_PARAMS, self.rng.randint(1, 3)))
        docs = ["/// " + self.sentence() for _ in range(self.rng.randint(1, 2))]
        return Block(name, (*docs, f"{rtype} {name}({params});"))

    def h_method(self) -> str:
        rtype = _CPP_RET[int(self.rng.random() * 8)][0]
        param = self.pick(_CPP_PARAMS)
        return f"  {rtype} {self.fn_name()}({param[0]}{param[1]}) const;"

    def h_file(self, path: str, scope: str) -> SourceFile:
        guard = re.sub(r"[^A-Z0-9]", "_", path.removeprefix("include/").upper()) + "_"
        blocks: list[Block] = []
        for _ in range(self.rng.randint(3, 7)):
            blocks.append(self.h_decl([b.name for b in blocks]))
        header = (
            f"#ifndef {guard}",
            f"#define {guard}",
            "",
            *self.cpp_includes(),
            "",
            f"namespace {scope} {{",
            "",
        )
        return SourceFile(
            "h", header, tuple(blocks), ("", f"}} // namespace {scope}", "", f"#endif // {guard}"), scope
        )

    def td_op(self, prefix: str, taken: Iterable[str]) -> Block:
        stem = self.unique(
            (t.removeprefix(prefix + "_").removesuffix("Op") for t in taken),
            lambda: self.pick(_CAMEL_VERBS) + self.pick(_CAMEL_NOUNS),
        )
        mnemonic = "_".join(_camel_words(stem).split())
        traits = ", ".join(
            self.rng.sample(
                (
                    "Pure",
                    "SameOperandsAndResultShape",
                    "MemoryEffects<[MemRead]>",
                    "SameOperandsAndResultEncoding",
                    "DeclareOpInterfaceMethods<InferTypeOpInterface>",
                ),
                self.rng.randint(1, 2),
            )
        )
        return Block(
            f"{prefix}_{stem}Op",
            (
                f'def {prefix}_{stem}Op : {prefix}_Op<"{mnemonic}", [{traits}]> {{',
                f'  let summary = "{_camel_words(stem)}";',
                "",
                "  let description = [{",
                *("    " + self.sentence() for _ in range(self.rng.randint(1, 3))),
                "  }];",
                "",
                "  let arguments = (ins TT_Tensor:$src);",
                "  let results = (outs TT_Tensor:$result);",
                "",
                '  let assemblyFormat = "$src attr-dict `:` type($src) `->` type($result)";',
                "}",
            ),
        )

    def td_file(self, path: str, prefix: str) -> SourceFile:
        guard = re.sub(r"[^A-Z0-9]", "_", Path(path).stem.upper())
        dialect_td = {"TT": "Triton/IR/TritonDialect.td", "TTG": "TritonGPU/IR/TritonGPUDialect.td"}.get(
            prefix, "TritonNvidiaGPU/IR/TritonNvidiaGPUDialect.td"
        )
        header = (
            f"#ifndef {guard}",
            f"#define {guard}",
            "",
            f'include "triton/Dialect/{dialect_td}"',
            'include "mlir/Interfaces/SideEffectInterfaces.td"',
            "",
        )
        blocks: list[Block] = []
        for _ in range(self.rng.randint(3, 7)):
            blocks.append(self.td_op(prefix, [b.name for b in blocks]))
        return SourceFile("td", header, tuple(blocks), ("", f"#endif // {guard}"))

    # -- Python

    def py_simple(self, names: Sequence[str], helpers: Sequence[str], *, comment: bool = True) -> str:
        if comment and self.rng.random() < 0.07:
            return "# " + self.sentence()
        template = self.pick(_PY_SIMPLE)
        if "{helper}" in template and not helpers:
            template = "{v} = {expr}"
        fn = self.pick(_SNAKE) + "_" + self.pick(_SNAKE)
        expr = self.fill(self.pick(_PY_EXPRS), names, helpers, pool=_PY_VARS, fn=fn)
        cond = self.fill(self.pick(_PY_CONDS), names, helpers, pool=_PY_VARS)
        return self.fill(template, names, helpers, pool=_PY_VARS, expr=expr, cond=cond)

    def py_stmt(self, names: Sequence[str], helpers: Sequence[str]) -> list[str]:
        r = self.rng.random()
        if r < 0.15:
            cond = self.fill(self.pick(_PY_CONDS), names, helpers, pool=_PY_VARS)
            return [f"if {cond}:", "    " + self.py_simple(names, helpers, comment=False)]
        if r < 0.22:
            a = self.pick(names) if names else "shape"
            return [
                f"for i in range(len({a})):",
                "    " + self.py_simple([*names, "i"], helpers, comment=False),
            ]
        return [self.py_simple(names, helpers)]

    def py_function(
        self, taken: Iterable[str], helpers: Sequence[str], *, decorator: str = "", indent: str = ""
    ) -> Block:
        name = self.unique(taken, lambda: self.pick(_SNAKE) + "_" + self.pick(_SNAKE))
        params = self.rng.sample(_PY_VARS, self.rng.randint(1, 3))
        names = list(params)
        sig = ", ".join([*(["self"] if indent else []), *params, *(["_semantic=None"] if decorator else [])])
        out = [indent + decorator] if decorator else []
        out += [f"{indent}def {name}({sig}):", f'{indent}    """{self.sentence()}"""']
        for _ in range(self.rng.randint(2, 10)):
            stmt = self.py_stmt(names, helpers)
            out.extend(indent + "    " + s for s in stmt)
            m = re.match(r"(\w+) = ", stmt[0])
            if m:
                names.append(m.group(1))
        out.append(f"{indent}    return {self.pick(names)}")
        return Block(name, tuple(out))

    def py_class(self, taken: Iterable[str], helpers: Sequence[str]) -> Block:
        name = self.unique(
            taken, lambda: self.pick(_CAMEL_NOUNS) + self.pick(("Cache", "Spec", "Config", "Launcher"))
        )
        fields = self.rng.sample(_PY_VARS, 2)
        lines = [f"class {name}:", "", f"    def __init__(self, {', '.join(fields)}):"]
        lines += [f"        self.{f} = {f}" for f in fields]
        methods: list[str] = []
        for _ in range(self.rng.randint(1, 3)):
            m = self.py_function(methods, helpers, indent="    ")
            methods.append(m.name)
            lines += ["", *m.lines]
        return Block(name, tuple(lines))

    def py_module(self, *, language: bool, scope: str = "") -> SourceFile:
        header = ["from __future__ import annotations", ""]
        header += [*sorted(self.rng.sample(_PY_IMPORTS[:4], 2)), "from typing import List, Optional", ""]
        if language:
            header += [
                "from . import core",
                "from .core import builtin, constexpr, tensor, _unwrap_if_constexpr",
            ]
        else:
            header += ["from ..runtime.errors import OutOfResources", "from .._C.libtriton import ir"]
        blocks: list[Block] = []
        helpers: list[str] = []
        for _ in range(self.rng.randint(3, 8)):
            taken = [b.name for b in blocks]
            if not language and self.rng.random() < 0.3:
                blocks.append(self.py_class(taken, helpers))
                continue
            deco = "@builtin" if language and self.rng.random() < 0.6 else ""
            block = self.py_function(taken, helpers, decorator=deco)
            blocks.append(block)
            helpers.append(block.name)
        return SourceFile("py", (*header, "", ""), tuple(blocks), (), scope)

    def py_variant(self, line: str, names: Sequence[str]) -> str:
        ind = _indent_of(line)
        if line.strip().startswith("#"):
            return ind + "# " + self.sentence()
        return ind + self.py_simple(names, (), comment=False)

    def pytest_block(self, name: str) -> Block:
        param = self.pick(("N", "BLOCK", "SIZE", "M"))
        values = ", ".join(str(v) for v in sorted(self.rng.sample((32, 64, 128, 256, 512, 1024, 4096), 3)))
        tl_expr, torch_expr = self.pick(_TEST_EXPRS)
        dtype = self.pick(("float32", "float16", "bfloat16"))
        return Block(
            name,
            (
                f'@pytest.mark.parametrize("{param}", [{values}])',
                f"def {name}({param}, device):",
                "",
                "    @triton.jit",
                "    def kernel(X, Y, N, BLOCK: tl.constexpr):",
                "        pid = tl.program_id(0)",
                "        offs = pid * BLOCK + tl.arange(0, BLOCK)",
                "        mask = offs < N",
                "        x = tl.load(X + offs, mask=mask)",
                f"        y = {tl_expr}",
                "        tl.store(Y + offs, y, mask=mask)",
                "",
                f"    x = torch.randn({param}, device=device, dtype=torch.{dtype})",
                "    y = torch.empty_like(x)",
                f"    kernel[(triton.cdiv({param}, 128), )](x, y, {param}, BLOCK=128)",
                f"    torch.testing.assert_close(y, {torch_expr}, atol=1e-2, rtol=1e-2)",
            ),
        )

    def pytest_name(self, taken: Iterable[str]) -> str:
        return self.unique(taken, lambda: f"test_{self.pick(_SNAKE)}_{self.pick(_SNAKE)}")

    def pytest_file(self) -> SourceFile:
        header = (
            "import pytest",
            "import torch",
            "",
            "import triton",
            "import triton.language as tl",
            "from triton._internal_testing import is_cuda, is_hip",
            "",
            "",
        )
        blocks: list[Block] = []
        for _ in range(self.rng.randint(2, 6)):
            blocks.append(self.pytest_block(self.pytest_name(b.name for b in blocks)))
        return SourceFile("pytest", header, tuple(blocks))

    # -- lit tests

    def mlir_op(self, names: Sequence[str]) -> str:
        self.serial += 1
        x, y = (self.pick(names) if names else "arg1"), (self.pick(names) if names else "arg1")
        size = self.pick(("64", "128", "256", "1024"))
        op = self.pick(_MLIR_OPS).format(n=self.pick(("0", "1", "4", "16")), s=size, x=x, y=y)
        return f"%{self.pick(_SNAKE)}_{self.serial} = {op}"

    def mlir_check(self) -> str:
        kind = self.pick(("CHECK", "CHECK", "CHECK", "CHECK-NOT", "CHECK-NEXT"))
        return f"// {kind}: {self.pick(_MLIR_CHECKS)}"

    def mlir_case(self, name: str) -> Block:
        spt, tpw = self.pick(("1, 4", "1, 8", "2, 2", "4, 1")), self.pick(("8, 4", "4, 8", "16, 2", "1, 32"))
        warps = self.pick(("4", "8"))
        body: list[str] = []
        names: list[str] = []
        for _ in range(self.rng.randint(2, 7)):
            if self.rng.random() < 0.5:
                body.append(self.mlir_check())
            body.append(self.mlir_op(names))
            names.append(body[-1][1:].split(" ", 1)[0])
        return Block(
            name,
            (
                f"#blocked = #ttg.blocked<{{sizePerThread = [{spt}], threadsPerWarp = [{tpw}], "
                f"warpsPerCTA = [{warps}, 1], order = [1, 0]}}>",
                "#blocked1 = #ttg.blocked<{sizePerThread = [1, 1], threadsPerWarp = [32, 1], "
                f"warpsPerCTA = [1, {warps}], order = [0, 1]}}>",
                f'module attributes {{"ttg.num-warps" = {warps} : i32, '
                '"ttg.threads-per-warp" = 32 : i32} {',
                f"  // CHECK-LABEL: @{name}",
                f"  tt.func public @{name}(%arg0: !tt.ptr<f16> {{tt.divisibility = 16 : i32}}, "
                "%arg1: i32) {",
                *("    " + s for s in body),
                "    tt.return",
                "  }",
                "}",
            ),
        )

    def mlir_name(self, taken: Iterable[str]) -> str:
        return self.unique(taken, lambda: f"{self.pick(_SNAKE)}_{self.pick(_SNAKE)}")

    def mlir_file(self, pass_flag: str) -> SourceFile:
        header = (f"// RUN: triton-opt %s -split-input-file -{pass_flag} | FileCheck %s", "")
        blocks: list[Block] = []
        for _ in range(self.rng.randint(2, 6)):
            blocks.append(self.mlir_case(self.mlir_name(b.name for b in blocks)))
        return SourceFile("mlir", header, tuple(blocks))

    # -- docs and build files

    def md_section(self, taken: Iterable[str]) -> Block:
        title = self.unique(
            taken,
            lambda: (
                self.pick(("Debugging", "Using", "Tuning", "Understanding", "Lowering"))
                + " "
                + self.pick(_TOPICS)
            ),
        )
        lines = ["## " + title[0].upper() + title[1:], ""]
        lines += [self.sentence() for _ in range(self.rng.randint(2, 5))]
        if self.rng.random() < 0.3:
            lines += [
                "",
                "```bash",
                f"TRITON_{self.pick(_SNAKE).upper()}=1 python {self.pick(_SNAKE)}.py",
                "```",
            ]
        return Block(title, tuple(lines))

    def md_file(self, stem: str) -> SourceFile:
        header = (f"# {stem.replace('-', ' ').replace('_', ' ').title()}", "", self.sentence(), "")
        blocks: list[Block] = []
        for _ in range(self.rng.randint(3, 6)):
            blocks.append(self.md_section([b.name for b in blocks]))
        return SourceFile("md", header, tuple(blocks))

    def llvm_hash(self) -> str:
        return f"{self.rng.getrandbits(160):040x}"


def _cmake_library(name: str, sources: Sequence[str]) -> SourceFile:
    return SourceFile(
        "cmake",
        (f"add_triton_library({name}",),
        (Block("sources", tuple(f"  {s}" for s in sorted(sources))),),
        ("", "  DEPENDS", f"  {name}IncGen", "", "  LINK_LIBS PUBLIC", "  MLIRTransforms", "  TritonIR", ")"),
    )


def _root_cmake() -> SourceFile:
    return SourceFile(
        "cmake",
        ("cmake_minimum_required(VERSION 3.20)", "", "project(triton CXX C)", ""),
        (
            Block(
                "options",
                (
                    'option(TRITON_BUILD_PYTHON_MODULE "Build Python Triton bindings" OFF)',
                    'option(TRITON_BUILD_PROTON "Build the Triton Proton profiler" ON)',
                    'option(TRITON_BUILD_UT "Build C++ Triton Unit Tests" ON)',
                ),
            ),
            Block(
                "llvm", ("include(cmake/llvm.cmake)", "find_package(MLIR REQUIRED CONFIG PATHS ${MLIR_DIR})")
            ),
            Block(
                "subdirs",
                (
                    "add_subdirectory(include)",
                    "add_subdirectory(lib)",
                    "add_subdirectory(third_party/nvidia)",
                    "add_subdirectory(third_party/amd)",
                ),
            ),
        ),
    )


def _toolchain_json() -> SourceFile:
    return SourceFile(
        "json",
        (),
        (
            Block(
                "versions",
                (
                    "{",
                    '  "ptxas": "12.8.93",',
                    '  "cuobjdump": "12.8.55",',
                    '  "nvdisasm": "12.8.55",',
                    '  "cudacrt": "12.8.61",',
                    '  "cudart": "12.8.57",',
                    '  "cupti": "12.8.90"',
                    "}",
                ),
            ),
        ),
    )


# ---------------------------------------------------------------------------------------------- line editing


def _editable(kind: str, lines: Sequence[str]) -> list[int]:
    """Indices of lines a simple edit may replace or follow without breaking the block's syntax."""
    if kind == "md":
        return _editable_md(lines)
    if kind == "td":
        return _editable_td(lines)
    test = _LINE_TESTS.get(kind)
    if test is None:
        return []
    return [i for i in range(1, len(lines) - 1) if test(lines[i], lines[i - 1].rstrip())]


def _cpp_line_ok(line: str, prev: str) -> bool:
    st = line.strip()
    return (
        len(line) - len(line.lstrip()) >= 2
        and st.endswith(";")
        and not st.startswith(("return", "using", "public", "private", "("))
        and prev.endswith((";", "{", "}"))  # not the body of a brace-less if
    )


def _py_line_ok(line: str, prev: str) -> bool:
    st = line.strip()
    return (
        len(line) - len(line.lstrip()) >= 4
        and bool(st)
        and not st.endswith((":", ",", "(", "[", "\\"))
        and not st.startswith(("return", "@", "def ", "class ", '"""', "yield"))
        and not prev.endswith((",", "(", "[", "\\"))
    )


def _mlir_line_ok(line: str, prev: str) -> bool:
    st = line.strip()
    return line.startswith("    ") and (
        st.startswith("%") or (st.startswith("// CHECK") and "LABEL" not in st)
    )


def _h_line_ok(line: str, prev: str) -> bool:
    st = line.strip()
    return st.startswith("///") or (line.startswith("  ") and st.endswith(") const;"))


_LINE_TESTS: dict[str, Callable[[str, str], bool]] = {
    "cpp": _cpp_line_ok,
    "py": _py_line_ok,
    "pytest": _py_line_ok,
    "mlir": _mlir_line_ok,
    "h": _h_line_ok,
}


def _editable_md(lines: Sequence[str]) -> list[int]:
    out, fence = [], False
    for i in range(1, len(lines) - 1):
        st = lines[i].strip()
        fence = fence != st.startswith("```")
        if not fence and st and not st.startswith(("#", "```", "-", "|", "<")):
            out.append(i)
    return out


def _editable_td(lines: Sequence[str]) -> list[int]:
    out, in_desc = [], False
    for i in range(1, len(lines) - 1):
        st = lines[i].strip()
        if st.startswith("let description"):
            in_desc = True
        elif st.startswith("}];"):
            in_desc = False
        elif st.startswith("let summary") or (in_desc and lines[i].startswith("    ")):
            out.append(i)
    return out


_NAME_RE = re.compile(r"\b(?:auto|unsigned|int64_t|Value|SmallVector<unsigned>) (\w+)|^\s*(\w+) = ")


def _locals(lines: Sequence[str]) -> list[str]:
    out = []
    for line in lines:
        m = _NAME_RE.search(line)
        if m:
            out.append(m.group(1) or m.group(2))
    return out or ["op"]


class _Editor:
    """Line-level edits of a block that keep it syntactically valid."""

    def __init__(self, writer: _Writer) -> None:
        self.w = writer
        self.rng = writer.rng

    def variant(self, kind: str, line: str, names: Sequence[str]) -> str:
        for _ in range(20):
            new = self._variant(kind, line, names)
            if new != line:
                return new
        return line + " "  # unreachable in practice; still a change

    def _variant(self, kind: str, line: str, names: Sequence[str]) -> str:
        ind, st = _indent_of(line), line.strip()
        if kind == "cpp":
            return self.w.cpp_variant(line, names)
        if kind in ("py", "pytest"):
            return self.w.py_variant(line, names)
        if kind == "mlir":
            return ind + (self.w.mlir_check() if st.startswith("//") else self.w.mlir_op(names))
        if kind == "td" and st.startswith("let summary"):
            return (
                f'{ind}let summary = "{self.w.pick(_TOPICS)} {self.w.pick(("op", "operation", "helper"))}";'
            )
        if kind == "h":
            return ind + "/// " + self.w.sentence() if st.startswith("///") else self.w.h_method()
        return ind + self.w.sentence()

    def fresh(self, kind: str, line: str, names: Sequence[str]) -> list[str]:
        ind = _indent_of(line)
        if kind == "cpp":
            return [ind + s for s in self.w.cpp_stmt(names, (), None)]
        if kind in ("py", "pytest"):
            return [ind + s for s in self.w.py_stmt(names, ())]
        if kind == "mlir":
            return [ind + self.w.mlir_check(), ind + self.w.mlir_op(names)]
        return [self.variant(kind, line, names)]

    def modify(
        self, kind: str, block: Block, *, focus: Sequence[int] = (), deletes: bool = True, edits: int = 0
    ) -> tuple[Block, list[int]] | None:
        """Replace, insert after or delete a few editable lines; returns the block and its changed lines."""
        cands = _editable(kind, block.lines)
        if not cands:
            return None
        names = _locals(block.lines)
        wanted = [i for i in focus if i in cands]
        count = edits or self.rng.choice((1, 1, 1, 2, 2, 3))
        chosen = sorted(set(wanted[:1] + self.rng.sample(cands, min(count, len(cands)))), reverse=True)
        rows = [(line, False) for line in block.lines]
        for i in chosen:
            line = rows[i][0]
            action = self.rng.random()
            if i in wanted or action < 0.5 or (kind == "td" and "summary" in line):
                rows[i] = (self.variant(kind, line, names), True)
            elif action < 0.85 or not deletes or not self._deletable(kind, block.lines, i):
                rows[i + 1 : i + 1] = [(s, True) for s in self.fresh(kind, line, names)]
            else:
                del rows[i]
        lines = tuple(r[0] for r in rows)
        if lines == block.lines:
            return None
        return Block(block.name, lines), [i for i, r in enumerate(rows) if r[1]]

    @staticmethod
    def _deletable(kind: str, lines: Sequence[str], i: int) -> bool:
        if kind in ("py", "pytest"):
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            return _indent_of(nxt) == _indent_of(lines[i]) and not lines[i - 1].rstrip().endswith(":")
        return kind in ("cpp", "mlir", "md")


# ---------------------------------------------------------------------------------------------- tree layout


@dataclass(frozen=True)
class _Area:
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


_AREAS = (
    _Area(
        "include",
        "include/triton/Dialect/Triton/IR",
        "h/td",
        0.015,
        _names("Dialect.h Traits.h Types.h Utility.h TritonOps.td TritonTypes.td TritonAttrDefs.td"),
        "mlir::triton",
    ),
    _Area(
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
    _Area(
        "include",
        "include/triton/Dialect/TritonNvidiaGPU/IR",
        "h/td",
        0.008,
        _names("Dialect.h TritonNvidiaGPUOps.td TritonNvidiaGPUAttrDefs.td"),
        "mlir::triton::nvidia_gpu",
    ),
    _Area(
        "dialect_ir",
        "lib/Dialect/Triton/IR",
        "cpp",
        0.012,
        _names("Dialect.cpp Ops.cpp Traits.cpp Types.cpp Utility.cpp OpInterfaces.cpp"),
        "mlir::triton",
        "TritonIR",
    ),
    _Area(
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
    _Area(
        "dialect_ir",
        "lib/Dialect/TritonGPU/IR",
        "cpp",
        0.015,
        _names("Dialect.cpp Ops.cpp LinearLayoutConversions.cpp Types.cpp"),
        "mlir::triton::gpu",
        "TritonGPUIR",
    ),
    _Area(
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
    _Area(
        "dialect_ir",
        "lib/Dialect/TritonNvidiaGPU/IR",
        "cpp",
        0.008,
        _names("Dialect.cpp Ops.cpp Types.cpp"),
        "mlir::triton::nvidia_gpu",
        "TritonNvidiaGPUIR",
    ),
    _Area(
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
    _Area(
        "analysis",
        "lib/Analysis",
        "cpp",
        0.015,
        _names("Alias.cpp Allocation.cpp AxisInfo.cpp Membar.cpp Utility.cpp"),
        "mlir",
        "TritonAnalysis",
    ),
    _Area(
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
    _Area(
        "conversion",
        "lib/Conversion/TritonToTritonGPU",
        "cpp",
        0.01,
        _names("TritonGPUConversion.cpp TritonToTritonGPUPass.cpp"),
        "mlir::triton",
        "TritonToTritonGPU",
    ),
    _Area(
        "backend_py", "third_party/nvidia/backend", "py", 0.0, _names("__init__.py compiler.py"), fixed=True
    ),
    _Area("driver", "third_party/nvidia/backend", "py", 0.0, _names("driver.py"), fixed=True),
    _Area(
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
    _Area(
        "nvidia_lib",
        "third_party/nvidia/lib/NVGPUToLLVM",
        "cpp",
        0.006,
        _names("NVGPUToLLVMPass.cpp"),
        "mlir::triton::NVIDIA",
        "NVGPUToLLVM",
    ),
    _Area("backend_py", "third_party/amd/backend", "py", 0.0, _names("__init__.py compiler.py"), fixed=True),
    _Area("driver", "third_party/amd/backend", "py", 0.0, _names("driver.py"), fixed=True),
    _Area(
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
    _Area(
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
    _Area(
        "pysrc",
        "python/src",
        "cc",
        0.012,
        _names("ir.cc passes.cc interpreter.cc llvm.cc main.cc specialize.cc"),
    ),
    _Area(
        "lang",
        "python/triton/language",
        "py",
        0.035,
        _names("core.py semantic.py math.py random.py standard.py _utils.py"),
    ),
    _Area(
        "runtime",
        "python/triton/runtime",
        "py",
        0.02,
        _names("autotuner.py build.py cache.py errors.py interpreter.py jit.py _allocation.py"),
    ),
    _Area(
        "compiler_py",
        "python/triton/compiler",
        "py",
        0.012,
        _names("code_generator.py compiler.py errors.py make_launcher.py"),
    ),
    _Area(
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
    _Area(
        "lit",
        "test/TritonGPU",
        "mlir",
        0.13,
        _names(
            "coalesce.mlir combine.mlir loop-pipeline.mlir reorder-instructions.mlir accelerate-matmul.mlir "
            "optimize-locality.mlir prefetch.mlir canonicalize.mlir invalid.mlir ops.mlir"
        ),
    ),
    _Area(
        "lit",
        "test/Conversion",
        "mlir",
        0.10,
        _names(
            "tritongpu_to_llvm.mlir tritongpu_to_llvm_hopper.mlir allocate_shared_memory.mlir "
            "triton_to_tritongpu.mlir reduce_to_llvm.mlir scan_to_llvm.mlir"
        ),
    ),
    _Area(
        "lit",
        "test/Triton",
        "mlir",
        0.06,
        _names(
            "combine.mlir canonicalize.mlir invalid.mlir ops.mlir rewrite-tensor-pointer.mlir "
            "loop-unroll.mlir reorder-broadcast.mlir"
        ),
    ),
    _Area(
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
SLUICE_YML = """\
fork:
  repo: sandbox/triton-fork
extensions:
  - name: tlx
    paths: ["third_party/tlx/**"]
    interfaces: ["include/triton/Dialect/TritonGPU/IR/**"]
    suites: ["third_party/tlx/test"]
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


def _synthetic_name(area: _Area, writer: _Writer, toggle: int) -> str:
    w = writer
    if area.kind == "cpp":
        if area.key in ("conversion", "nvidia_lib", "amd_lib") and toggle % 2:
            return f"{w.pick(_CAMEL_NOUNS)}{w.pick(('OpToLLVM', 'Lowering', 'Patterns'))}.cpp"
        return f"{w.pick(_CAMEL_VERBS)}{w.pick(_CAMEL_NOUNS)}.cpp"
    if area.kind == "h/td":
        return f"{w.pick(_CAMEL_NOUNS)}{w.pick(('Utils.h', 'Interfaces.h', 'Ops.td', 'Attrs.td'))}"
    if area.kind == "cc":
        return f"{w.pick(_SNAKE)}_{w.pick(_SNAKE)}.cc"
    if area.kind == "pytest":
        return f"test_{w.pick(_SNAKE)}_{w.pick(_SNAKE)}.py"
    if area.kind == "mlir":
        return f"{w.pick(_SNAKE)}{w.pick(('-', '_'))}{w.pick(_SNAKE)}.mlir"
    if area.kind == "md":
        return f"{w.pick(_SNAKE)}-{w.pick(_SNAKE)}.md"
    return f"{w.pick(_SNAKE)}_{w.pick(_SNAKE)}.py"


def _area_counts(files: int) -> list[int]:
    fixed = sum(len(a.seeds) for a in _AREAS if a.fixed)
    libs = len({a.directory for a in _AREAS if a.library})
    budget = files - fixed - libs - 3  # root CMakeLists, llvm hash, toolchain json
    total_weight = sum(a.weight for a in _AREAS)
    counts = [len(a.seeds) if a.fixed else max(1, int(a.weight / total_weight * budget)) for a in _AREAS]
    flexible = sorted((i for i, a in enumerate(_AREAS) if not a.fixed), key=lambda i: -_AREAS[i].weight)
    k = 0
    while sum(counts) != files - libs - 3:
        i = flexible[k % len(flexible)]
        if sum(counts) < files - libs - 3:
            counts[i] += 1
        elif counts[i] > 1:
            counts[i] -= 1
        k += 1
    return counts


def _make_file(area: _Area, path: str, writer: _Writer) -> SourceFile:
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


# ---------------------------------------------------------------------- people and time


@dataclass(frozen=True)
class _Person:
    name: str
    email: str
    tz: str

    def ident(self, when: int) -> str:
        return f"{self.name} <{self.email}> {when} {self.tz}"


_GITHUB = _Person("GitHub", "noreply@github.com", "+0000")
_SLUICE_BOT = _Person("sluice[bot]", "sluice[bot]@users.noreply.github.com", "+0000")
_TZS = ("-0700", "-0800", "-0400", "+0000", "+0100", "+0200", "+0530", "+0800", "+0900")


def _people(rng: random.Random, count: int, *, offset: int) -> list[_Person]:
    out: list[_Person] = []
    for i in range(count):
        first, last = _FIRST[(i * 7 + offset) % len(_FIRST)], _LAST[(i * 11 + offset * 3) % len(_LAST)]
        handle = f"{first[0].lower()}{last.lower()}"
        out.append(
            _Person(
                f"{first} {last}",
                f"{rng.randint(1_000_000, 99_999_999)}+{handle}@users.noreply.github.com",
                rng.choice(_TZS),
            )
        )
    return out


_START = 1725260400  # 2024-09-02 07:00 UTC, a Monday


def _stream_times(count: int, rng: random.Random) -> list[int]:
    """Committer times of the upstream stream: 14-40 merges a weekday, a few at weekends, increasing."""
    out: list[int] = []
    day = 0
    while len(out) < count:
        weekend = day % 7 >= 5
        n = rng.randint(3, 9) if weekend else rng.randint(14, 40)
        start = _START + day * 86400
        out.extend(start + s for s in sorted(rng.sample(range(0, 17 * 3600), n)))
        day += 1
    return out[:count]


# ---------------------------------------------------------------------------------------------- upstream


@dataclass
class _Edit:
    ops: list[Op]
    subject: str  # without the PR suffix
    body: str = ""
    symbols: list[str] = field(default_factory=list)
    changed_lines: dict[str, list[int]] = field(default_factory=dict)  # "path::block" -> changed line indices


@dataclass
class _UpstreamCommit:
    index: int
    pr: int
    subject: str
    body: str
    author: _Person
    author_time: int
    time: int
    ops: list[Op]
    parents: dict[str, SourceFile | None]
    changed: dict[str, SourceFile]
    role: str  # base, ingested, hole, pending, emergency
    method: str = ""  # planned recognition method of an ingested commit
    tweak: Key | None = None  # block a subject-pattern pick adapts
    ref: int | None = None  # commit whose sha the body names (reverts, relands)

    @property
    def title(self) -> str:
        return self.subject.rsplit(" (#", 1)[0]


@dataclass
class _Claims:
    """Which regions each class of commit may touch, so the ground truth holds by construction."""

    reserved: set[Key] = field(default_factory=set)  # upstream blocks the patch stack edits
    fork_paths: set[str] = field(default_factory=set)  # files where the fork differs from upstream
    diverged: set[Key] = field(default_factory=set)  # blocks the fork lacks or adapted
    hole_paths: set[str] = field(default_factory=set)
    pending_keys: set[Key] = field(default_factory=set)
    pending_paths: set[str] = field(default_factory=set)
    claimed: set[str] = field(default_factory=set)  # files exclusive to one pending commit


@dataclass(frozen=True)
class _Scope:
    path_ok: Callable[[str], bool]
    key_ok: Callable[[Key], bool]


_ANY = _Scope(lambda p: p != ROOT_CMAKE, lambda k: True)

_GENERIC_AREAS = {
    "lit": 15,
    "pytest": 12,
    "docs": 4,
    "lang": 8,
    "backend_py": 4,
    "compiler_py": 3,
    "runtime": 4,
    "driver": 1,
    "transforms": 6,
    "ttg_transforms": 7,
    "dialect_ir": 4,
    "analysis": 3,
    "conversion": 8,
    "nvidia_lib": 7,
    "amd_lib": 9,
    "pysrc": 2,
    "include": 3,
}
_LOW_RISK_AREAS = {"lit": 28, "pytest": 24, "docs": 10, "lang": 14, "backend_py": 14, "compiler_py": 10}
_RISKY_AREAS = {
    "transforms": 10,
    "ttg_transforms": 14,
    "conversion": 20,
    "nvidia_lib": 14,
    "amd_lib": 16,
    "analysis": 8,
    "runtime": 8,
    "pysrc": 5,
    "driver": 3,
}
_CHAIN_AREAS = {
    "ttg_transforms": 12,
    "transforms": 6,
    "conversion": 10,
    "amd_lib": 10,
    "nvidia_lib": 6,
    "runtime": 4,
    "lang": 4,
}
_INTENTS = {
    "cpp": (("modify", 55), ("add_function", 20), ("add_include", 10), ("rename", 15)),
    "py": (("modify", 60), ("add_function", 25), ("add_include", 5), ("rename", 10)),
    "pytest": (("regen_test", 50), ("append", 50)),
    "mlir": (("modify", 45), ("append", 55)),
    "md": (("modify", 60), ("append", 40)),
    "td": (("modify", 60), ("append", 40)),
    "h": (("modify", 60), ("append", 40)),
}
_PREFIXES = (
    ("third_party/amd", "[AMD]"),
    ("third_party/nvidia", "[NVIDIA]"),
    ("python/triton/language", "[FRONTEND]"),
    ("python/triton/compiler", "[FRONTEND]"),
    ("python/triton/runtime", "[RUNTIME]"),
    ("python/src", "[BACKEND]"),
    ("python/test", "[TESTING]"),
    ("test/", "[TESTING]"),
    ("docs/", "[DOCS]"),
    ("include/triton/Dialect/TritonGPU", "[LAYOUTS]"),
    ("cmake/", "[BUILD]"),
)


# Commit subjects by (file kind, whether the commit adds a block), after the component prefix.
_SUBJECTS: dict[tuple[str, bool], tuple[str, ...]] = {
    ("md", True): ("Document {topic}", "Add a section on {section}"),
    ("md", False): ("Fix typo in {name}", "Clarify {topic} in {stem} docs"),
    ("mlir", True): ("Add lit test for {topic} in {comp}", "Add regression test for {problem} with {topic}"),
    ("mlir", False): ("Update CHECK lines in {name}", "Fix {comp} lit test for {topic}"),
    ("pytest", True): ("Add `{symbol}` for {topic}", "Add test for {problem} with {topic}"),
    ("pytest", False): (
        "Extend `{symbol}` to cover {topic}",
        "Reduce problem size in `{symbol}`",
        "Fix flaky `{symbol}` on {arch}",
    ),
    ("td", True): ("Add `{symbol}` to the {dialect} dialect",),
    ("td", False): ("Clarify the description of `{symbol}`", "Update `{symbol}` for {topic}"),
    ("h", True): ("Add `{symbol}` to the {dialect} dialect",),
    ("h", False): ("Clarify the description of `{symbol}`", "Update `{symbol}` for {topic}"),
    ("code", True): (
        "Add `{symbol}` helper for {topic}",
        "Support {topic} in {comp}",
        "Add {topic} support to {comp}",
    ),
    ("code", False): (
        "Fix {topic} in {comp}",
        "Fix {problem} in `{symbol}`",
        "Handle {topic} in {comp}",
        "Avoid {problem} with {topic} in {comp}",
        "Improve {topic} in `{symbol}`",
        "Relax check in `{symbol}` for {topic}",
        "Fix {topic} on {arch}",
    ),
}


def _prefix(path: str) -> str:
    for start, prefix in _PREFIXES:
        if path.startswith(start):
            return prefix
    return "[BACKEND]"


def _weighted(rng: random.Random, table: Sequence[tuple[str, int]] | dict[str, int]) -> str:
    items = list(table.items()) if isinstance(table, dict) else list(table)
    total = sum(w for _, w in items)
    r = rng.random() * total
    for name, weight in items:
        r -= weight
        if r < 0:
            return name
    return items[-1][0]


@dataclass
class _Reserved:
    """An upstream function the patch stack edits: insertions after fixed lines of its fork-point version."""

    path: str
    base: Block
    qualname: str
    kind: str
    points: list[int]  # base line indices the fork inserts after, in application order
    inserts: list[tuple[str, ...]]
    far: list[int]  # editable base lines at least 3 lines from every insertion point

    def version(self, applied: int) -> Block:
        lines = list(self.base.lines)
        for point, new in sorted(
            zip(self.points[:applied], self.inserts[:applied], strict=True), reverse=True
        ):
            lines[point + 1 : point + 1] = new
        return Block(self.base.name, tuple(lines))


class _Upstream:
    """Generates the upstream stream as structured edits, keeping the fork-side invariants in _Claims."""

    def __init__(self, size: SandboxSize, rng: random.Random, writer: _Writer) -> None:
        self.size = size
        self.rng = rng
        self.w = writer
        self.ed = _Editor(writer)
        self.tree: dict[str, SourceFile] = {}
        self.pools: dict[str, list[str]] = {}
        self.area_of: dict[str, _Area] = {}
        self.commits: list[_UpstreamCommit] = []
        self.claims = _Claims()
        self.authors = _people(rng, 40, offset=0)
        self.fork_tree: dict[str, SourceFile] = {}
        self.reserved: list[_Reserved] = []
        self.truth: dict[str, list[int]] = {
            k: []
            for k in ("llvm", "large", "overlap", "conflict", "interface", "independent", "hole", "emergency")
        }
        self.line_deps: list[tuple[int, int]] = []
        self.reverts: dict[int, int] = {}
        self.relands: dict[int, int] = {}
        self.overlap_symbols: dict[int, str] = {}
        self.n_holes = max(1, round(size.ingested * 0.03))
        total = size.base_commits + size.ingested + self.n_holes + size.pending + 2
        self.times = _stream_times(total, rng)
        self.next_pr = 4000

    # -- tree

    def initial_tree(self) -> None:
        counts = _area_counts(self.size.files)
        by_dir: dict[str, list[str]] = {}
        for area, count in zip(_AREAS, counts, strict=True):
            names = list(area.seeds[:count])
            taken = {f"{area.directory}/{n}" for n in names} | set(self.tree)
            k = 0
            while len(names) < count:
                k += 1
                name = _synthetic_name(area, self.w, k)
                if f"{area.directory}/{name}" not in taken:
                    taken.add(f"{area.directory}/{name}")
                    names.append(name)
            for name in names:
                path = f"{area.directory}/{name}"
                self.tree[path] = _make_file(area, path, self.w)
                self.pools.setdefault(area.key, []).append(path)
                self.area_of[path] = area
                if area.library:
                    by_dir.setdefault(area.directory, []).append(name)
        for area in _AREAS:
            if area.library:
                self.tree[f"{area.directory}/CMakeLists.txt"] = _cmake_library(
                    area.library, by_dir[area.directory]
                )
        self.tree[ROOT_CMAKE] = _root_cmake()
        self.tree[LLVM_HASH_PATH] = SourceFile("text", (), (Block("hash", (self.w.llvm_hash(),)),))
        self.tree[TOOLCHAIN_PATH] = _toolchain_json()

    # -- commit recording

    def commit(self, edit: _Edit, role: str, **extra: object) -> _UpstreamCommit:
        index = len(self.commits)
        parents: dict[str, SourceFile | None] = {}
        for op in edit.ops:
            parents.setdefault(op.path, self.tree.get(op.path))
            _apply(self.tree, op)
        changed = {p: self.tree[p] for p in parents}
        self.next_pr += self.rng.choice((1, 1, 2, 3, 5))
        author = self.rng.choice(self.authors)
        when = self.times[index]
        c = _UpstreamCommit(
            index=index,
            pr=self.next_pr,
            subject=f"{edit.subject} (#{self.next_pr})",
            body=edit.body,
            author=author,
            author_time=when - self.rng.randint(3600, 5 * 86400),
            time=when,
            ops=edit.ops,
            parents=parents,
            changed=changed,
            role=role,
        )
        for k, v in extra.items():
            setattr(c, k, v)
        self.commits.append(c)
        return c

    def keys_of(self, ops: Sequence[Op]) -> set[Key]:
        keys: set[Key] = set()
        for op in ops:
            keys |= _op_keys(op, self.tree.get(op.path))
        return keys

    def ok(self, scope: _Scope, ops: Sequence[Op]) -> bool:
        return all(scope.path_ok(op.path) for op in ops) and all(scope.key_ok(k) for k in self.keys_of(ops))

    # -- edits on one file

    def edit_file(self, path: str, scope: _Scope, intent: str = "") -> _Edit | None:
        f = self.tree[path]
        kind = f.kind
        intent = intent or _weighted(self.rng, _INTENTS.get(kind, (("modify", 1),)))
        if intent == "modify":
            return self.edit_modify(path, scope)
        if intent == "add_function":
            return self.edit_add_function(path, scope)
        if intent == "add_include":
            return self.edit_add_include(path, scope)
        if intent == "rename":
            return self.edit_rename(path, scope)
        if intent == "regen_test":
            return self.edit_regen_test(path, scope)
        return self.edit_append(path, scope)

    def _blocks(self, path: str, scope: _Scope) -> list[Block]:
        return [b for b in self.tree[path].blocks if scope.key_ok((path, b.name))]

    def edit_modify(self, path: str, scope: _Scope, *, deletes: bool = True) -> _Edit | None:
        f = self.tree[path]
        blocks = self._blocks(path, scope)
        self.rng.shuffle(blocks)
        for block in blocks[:4]:
            got = self.ed.modify(f.kind, block, deletes=deletes)
            if got is None:
                continue
            new, changed = got
            ops: list[Op] = [ReplaceBlock(path, block, new)]
            if self.ok(scope, ops):
                return _Edit(
                    ops,
                    self.subject("modify", path, block.name),
                    self.body(),
                    [f.qualname(block.name)],
                    {f"{path}::{block.name}": changed},
                )
        return None

    def new_block(self, f: SourceFile, taken: Sequence[str]) -> Block:
        if f.kind == "cpp":
            helpers = [b.name for b in f.blocks if not b.lines[0].startswith("struct")]
            return self.w.cpp_function(taken, helpers[:4])
        if f.kind == "py":
            return self.w.py_function(
                taken,
                [b.name for b in f.blocks][:4],
                decorator="@builtin" if "from .core import builtin" in f.header[-3] else "",
            )
        if f.kind == "pytest":
            return self.w.pytest_block(self.w.pytest_name(taken))
        if f.kind == "mlir":
            return self.w.mlir_case(self.w.mlir_name(taken))
        if f.kind == "md":
            return self.w.md_section(taken)
        if f.kind == "td":
            prefix = f.blocks[0].name.split("_", 1)[0] if f.blocks else "TTG"
            return self.w.td_op(prefix, taken)
        if f.kind == "h":
            return self.w.h_decl(taken)
        raise _Bug(f"no new blocks for {f.kind}")

    def edit_add_function(self, path: str, scope: _Scope) -> _Edit | None:
        f = self.tree[path]
        if not f.blocks:
            return None
        anchor = self.rng.choice(f.blocks).name
        new = self.new_block(f, [b.name for b in f.blocks])
        ops: list[Op] = [InsertBlock(path, anchor, new)]
        if not self.ok(scope, ops):
            return None
        return _Edit(ops, self.subject("add_function", path, new.name), self.body(), [f.qualname(new.name)])

    def edit_append(self, path: str, scope: _Scope) -> _Edit | None:
        f = self.tree[path]
        if f.kind not in ("pytest", "mlir", "md", "td", "h", "cpp", "py"):
            return None
        new = self.new_block(f, [b.name for b in f.blocks])
        ops: list[Op] = [InsertBlock(path, f.blocks[-1].name if f.blocks else None, new)]
        if not self.ok(scope, ops):
            return None
        return _Edit(ops, self.subject("append", path, new.name), self.body(), [f.qualname(new.name)])

    def edit_add_include(self, path: str, scope: _Scope) -> _Edit | None:
        f = self.tree[path]
        header = list(f.header)
        if f.kind == "cpp":
            have = [i for i, line in enumerate(header) if line.startswith('#include "')]
            options = [f'#include "{inc}"' for inc in _CPP_INCLUDES if f'#include "{inc}"' not in header]
            if not have or not options:
                return None
            line = self.rng.choice(options)
            group = sorted([header[i] for i in have] + [line])
            header[have[0] : have[-1] + 1] = group
        elif f.kind == "py":
            options = [imp for imp in _PY_IMPORTS if imp not in header]
            if not options:
                return None
            line = self.rng.choice(options)
            header.insert(2, line)
        else:
            return None
        ops: list[Op] = [SetHeader(path, f.header, tuple(header))]
        if not self.ok(scope, ops):
            return None
        what = line.split('"')[1] if '"' in line else line.split()[-1]
        return _Edit(ops, f"{_prefix(path)} Add missing `{what}` include to {Path(path).name}", self.body())

    def edit_rename(self, path: str, scope: _Scope) -> _Edit | None:
        f = self.tree[path]
        callers: dict[str, list[int]] = {}
        for i, b in enumerate(f.blocks):
            for j, other in enumerate(f.blocks):
                if i != j and any(f"{b.name}(" in line for line in other.lines):
                    callers.setdefault(b.name, []).append(j)
        if not callers:
            return None
        old = self.rng.choice(sorted(callers))
        new = self.rename(old, [b.name for b in f.blocks])
        pattern = re.compile(rf"\b{re.escape(old)}\(")
        ops: list[Op] = []
        for j in [f.find(old), *callers[old]]:
            block = f.blocks[j]
            lines = tuple(pattern.sub(f"{new}(", line) for line in block.lines)
            ops.append(ReplaceBlock(path, block, Block(new if block.name == old else block.name, lines)))
        if not self.ok(scope, ops):
            return None
        subject = f"{_prefix(path)} [NFC] Rename `{old}` to `{new}`"
        return _Edit(ops, subject, self.body(), [f.qualname(old), f.qualname(new)])

    def rename(self, old: str, taken: Sequence[str]) -> str:
        swaps = {
            "get": "compute",
            "compute": "infer",
            "is": "can",
            "find": "lookup",
            "create": "build",
            "lower": "emit",
            "has": "is",
        }
        m = re.match(r"([a-z]+)(.*)", old)
        head, tail = (m.group(1), m.group(2)) if m else (old, "")
        if "_" in old:
            candidates = [f"_{old}" if not old.startswith("_") else old.lstrip("_"), f"{old}_impl"]
        else:
            candidates = [swaps[head] + tail] if head in swaps else []
            candidates += [f"{old}ForLayout", f"{old}Impl"]
        for c in candidates:
            if c not in taken:
                return c
        return self.w.unique(taken, lambda: f"{old}V{self.rng.randint(2, 9)}")

    def edit_regen_test(self, path: str, scope: _Scope) -> _Edit | None:
        for block in self._blocks(path, scope)[:3]:
            new = self.w.pytest_block(block.name)
            ops: list[Op] = [ReplaceBlock(path, block, new)]
            if new != block and self.ok(scope, ops):
                return _Edit(ops, self.subject("regen_test", path, block.name), self.body(), [block.name])
        return None

    def edit_new_file(self, area_key: str, scope: _Scope) -> _Edit | None:
        areas = [a for a in _AREAS if a.key == area_key]
        area = self.rng.choice(areas)
        name = _synthetic_name(area, self.w, self.rng.randint(0, 1))
        path = f"{area.directory}/{name}"
        if path in self.tree or not scope.path_ok(path):
            return None
        ops: list[Op] = [AddFile(path, _make_file(area, path, self.w))]
        if area.library:
            cm = f"{area.directory}/CMakeLists.txt"
            old = self.tree[cm].blocks[0]
            sources = sorted([*old.lines, f"  {name}"])
            ops.append(ReplaceBlock(cm, old, Block("sources", tuple(sources))))
        if not self.ok(scope, ops):
            return None
        self.pools.setdefault(area.key, []).append(path)
        self.area_of[path] = area
        stem = Path(name).stem
        if area.kind in ("pytest", "mlir"):
            subject = f"[TESTING] Add {_camel_words(stem).replace('_', ' ')} tests"
        else:
            subject = f"{_prefix(path)} Add {stem} for {self.w.pick(_TOPICS)}"
        return _Edit(ops, subject, self.body())

    # -- multi-file and special edits

    def generic(
        self,
        areas: dict[str, int],
        scope: _Scope,
        *,
        pair: float = 0.3,
        block_op: bool = False,
        chainable: bool = False,
    ) -> _Edit:
        """A typical upstream commit in the given areas: one main edit, sometimes with a test."""
        for _ in range(80):
            area = _weighted(self.rng, areas)
            pool = self.pools.get(area)
            if not pool:
                continue
            path = pool[int(self.rng.random() * len(pool))]
            if not scope.path_ok(path):
                continue
            if chainable:
                edit = self.edit_modify(path, scope, deletes=False)
                if edit is None or not self.chainable(edit):
                    continue
            else:
                edit = self.edit_file(path, scope)
            if edit is None or (
                block_op and not any(isinstance(o, ReplaceBlock | InsertBlock) for o in edit.ops)
            ):
                continue
            if self.rng.random() < pair and not chainable:
                self.add_companion(edit, path, scope)
            return edit
        return self.fallback_new_test(scope)

    def chainable(self, edit: _Edit) -> bool:
        """True when the edit changed at least one line a later commit can edit again."""
        ((target, changed),) = edit.changed_lines.items()
        f = self.tree[target.split("::", 1)[0]]
        op = edit.ops[0]
        assert isinstance(op, ReplaceBlock)
        return any(i in _editable(f.kind, op.new.lines) for i in changed)

    def add_companion(self, edit: _Edit, main: str, scope: _Scope) -> None:
        area = "pytest" if main.endswith(".py") else "lit"
        if main.startswith(("python/test", "test/", "docs/")):
            return
        for _ in range(6):
            path = self.rng.choice(self.pools[area])
            if path == main or not scope.path_ok(path):
                continue
            extra = self.edit_append(path, scope)
            if extra is not None and not (self.keys_of(extra.ops) & self.keys_of(edit.ops)):
                edit.ops.extend(extra.ops)
                return

    def fallback_new_test(self, scope: _Scope) -> _Edit:
        for _ in range(200):
            edit = self.edit_new_file(self.rng.choice(("lit", "pytest")), scope)
            if edit is not None:
                return edit
        raise _Bug("no room for a new test file")

    def llvm_bump(self, scope: _Scope) -> _Edit:
        old = self.tree[LLVM_HASH_PATH].blocks[0]
        new_hash = self.w.llvm_hash()
        fix = self.generic({"conversion": 3, "nvidia_lib": 2, "amd_lib": 2}, scope, pair=0.0, chainable=True)
        ops: list[Op] = [ReplaceBlock(LLVM_HASH_PATH, old, Block("hash", (new_hash,))), *fix.ops]
        body = (
            f"Bump the LLVM pin to llvm/llvm-project@{new_hash}.\n\n"
            f"Adapt to upstream API changes ({self.w.pick(_SNAKE)} builders now take a Location)."
        )
        return _Edit(
            ops, f"[BACKEND] Update LLVM version to llvm/llvm-project@{new_hash[:12]}", body, fix.symbols
        )

    def toolchain_bump(self) -> _Edit:
        f = self.tree[TOOLCHAIN_PATH]
        old = f.blocks[0]
        lines = list(old.lines)
        i = self.rng.randint(1, len(lines) - 2)
        m = re.search(r"(\d+)\.(\d+)\.(\d+)", lines[i])
        assert m is not None
        bumped = f"{m.group(1)}.{m.group(2)}.{int(m.group(3)) + self.rng.randint(1, 9)}"
        tool = lines[i].split('"')[1]
        lines[i] = lines[i].replace(m.group(0), bumped)
        return _Edit(
            [ReplaceBlock(TOOLCHAIN_PATH, old, Block("versions", tuple(lines)))],
            f"[BUILD] Bump {tool} to {bumped}",
            self.body(),
        )

    def large(self, scope: _Scope, area_key: str) -> _Edit:
        area = next(a for a in _AREAS if a.key == area_key and a.library)
        for _ in range(50):
            stem = f"{self.w.pick(_CAMEL_VERBS)}{self.w.pick(_CAMEL_NOUNS)}"
            path = f"{area.directory}/{stem}.cpp"
            if path not in self.tree:
                break
        f = self.w.cpp_file(stem, area.scope, nested=False, patterns=False, size=640)
        cm = f"{area.directory}/CMakeLists.txt"
        old = self.tree[cm].blocks[0]
        ops: list[Op] = [
            AddFile(path, f),
            ReplaceBlock(cm, old, Block("sources", tuple(sorted([*old.lines, f"  {stem}.cpp"])))),
        ]
        lit = self.edit_new_file("lit", scope)
        if lit is not None:
            ops.extend(lit.ops)
        self.pools[area.key].append(path)
        self.area_of[path] = area
        words = _camel_words(stem)
        body = (
            f"This adds a `{words}` pass. {self.w.sentence()}\n\n"
            f"The pass runs after pipelining and is enabled by default on {self.w.pick(_ARCHES)}."
        )
        return _Edit(
            ops, f"{_prefix(path)} Add {words} pass", body, [f.qualname(b.name) for b in f.blocks[:3]]
        )

    # -- messages

    def subject(self, intent: str, path: str, symbol: str) -> str:
        kind = self.tree[path].kind if path in self.tree else ""
        kind = kind if kind in ("md", "mlir", "pytest", "td", "h") else "code"
        templates = _SUBJECTS[kind, intent in ("add_function", "append")]
        text = self.w.pick(templates).format(
            topic=self.w.pick(_TOPICS),
            problem=self.w.pick(_PROBLEMS),
            arch=self.w.pick(_ARCHES),
            name=Path(path).name,
            stem=Path(path).stem,
            comp=_camel_words(Path(path).stem).replace("_", " "),
            dialect=path.split("/")[3] if path.startswith("include/") else "",
            symbol=symbol,
            section=symbol.lower(),
        )
        return f"{_prefix(path)} {text}"

    def body(self) -> str:
        lines = [self.w.sentence(), self.w.sentence()]
        if self.rng.random() < 0.3:
            lines += [
                "",
                "# New contributor declaration",
                "- [x] I am not making a trivial change, such as fixing a typo in a comment.",
                "- [x] I have added tests.",
            ]
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- history plan


_FORK_CPP = (
    (
        "// TLX: buffers placed by tlx.local_alloc keep their explicit layout.",
        "tlx::preserveExplicitLayout({a});",
    ),
    (
        "if (auto taskIds = tlx::getAsyncTaskIds({a}); !taskIds.empty()) {{",
        '  LDBG("TLX async task op: " << {a});',
        "}}",
    ),
    (
        "// FBTriton(TLX): warp-specialized partitions own their barriers.",
        "tlx::annotateWarpSpecialization({a});",
    ),
)
_FORK_PY = (
    (
        "# TLX: buffered tensors are materialized before use.",
        "from triton.language.extra.tlx import maybe_local_load",
        "{a} = maybe_local_load({a}, _semantic)",
    ),
    ("from triton.language.extra import tlx", "{a} = tlx.unwrap_buffered({a})"),
)


def _first_param(block: Block, kind: str) -> str:
    for line in block.lines:
        if kind == "cpp" and line.rstrip().endswith("{") and "(" in line:
            m = re.search(r"\(([^)]*)\)", line)
            if m and m.group(1):
                return re.split(r"[ *&]+", m.group(1).split(",")[0].strip())[-1]
        if kind == "py" and line.startswith("def "):
            m = re.search(r"\(([^,)=]+)", line)
            if m:
                return m.group(1).strip()
    return "op" if kind == "cpp" else "input"


class _Planner:
    """Plans the whole history: upstream roles, what the fork ingests, and the designed pending structure."""

    def __init__(self, size: SandboxSize, rng: random.Random) -> None:
        self.size = size
        self.rng = rng
        self.w = _Writer(rng)
        self.up = _Upstream(size, rng, self.w)

    # -- base and fork point

    def run(self, say: Callable[[str], None]) -> None:
        up = self.up
        up.initial_tree()
        say(f"upstream tree: {len(up.tree)} files")
        up.commit(_Edit([], "[BUILD] Import the Triton tree", "Initial import of the repository."), "base")
        up.commits[0].changed = dict(up.tree)
        up.commits[0].parents = {}
        for _ in range(1, self.size.base_commits):
            up.commit(self.base_edit(_ANY), "base")
        up.fork_tree = dict(up.tree)
        self.reserve()
        say("ingested range")
        self.ingested_range()
        say("pending range")
        self.pending_range()

    def base_edit(self, scope: _Scope) -> _Edit:
        r = self.rng.random()
        if r < 0.02:
            return self.up.llvm_bump(scope)
        if r < 0.03:
            return self.up.toolchain_bump()
        if r < 0.06:
            edit = self.up.edit_new_file(
                _weighted(self.rng, {"lit": 3, "pytest": 2, "ttg_transforms": 1, "conversion": 1}), scope
            )
            if edit is not None:
                return edit
        return self.up.generic(_GENERIC_AREAS, scope)

    def reserve(self) -> None:
        """Choose the shared functions the patch stack edits and plan its insertions."""
        up, size = self.up, self.size
        n_overlaps = max(3, size.pending // 40)
        want = max(n_overlaps + 2, min(40, size.fork_commits // 25))
        cands: list[tuple[str, Block, str]] = []
        for key, kind, indent in (("ttg_transforms", "cpp", "  "), ("lang", "py", "    ")):
            for path in up.pools[key]:
                for b in up.tree[path].blocks:
                    if b.lines[0].startswith("struct") or (kind == "py" and "class " in b.lines[0]):
                        continue
                    rows = [i for i in _editable(kind, b.lines) if _indent_of(b.lines[i]) == indent]
                    if len(rows) >= 7:
                        cands.append((path, b, kind))
        self.rng.shuffle(cands)
        cands.sort(key=lambda c: c[2] != "cpp")  # C++ first, then stable shuffle order
        cpp = [c for c in cands if c[2] == "cpp"]
        py = [c for c in cands if c[2] == "py"]
        n_py = min(len(py), max(1, want // 3))
        chosen = cpp[: want - n_py] + py[:n_py]
        if len(chosen) < n_overlaps + 1:
            raise SandboxError("the tree is too small to carry the fork's edits to shared functions")
        if len(chosen) > size.fork_commits - 1:
            raise SandboxError("fork_commits is too small for the fork's edits to shared functions")
        seconds = max(0, (size.fork_commits - 1) // 2 - len(chosen))
        for i, (path, block, kind) in enumerate(chosen):
            up.reserved.append(self.plan_reserved(path, block, kind, 2 if i < seconds else 1))
        for r in up.reserved:
            up.claims.reserved.add((r.path, r.base.name))
            up.claims.fork_paths.add(r.path)
        up.claims.fork_paths.add(ROOT_CMAKE)

    def plan_reserved(self, path: str, block: Block, kind: str, edits: int) -> _Reserved:
        indent = "  " if kind == "cpp" else "    "
        rows = [i for i in _editable(kind, block.lines) if _indent_of(block.lines[i]) == indent]
        head = rows[: max(1, len(rows) // 2)]
        points = sorted(self.rng.sample(head, min(edits, len(head))))
        if len(points) > 1 and points[1] - points[0] < 3:
            points = points[:1]
        a = _first_param(block, kind)
        inserts = []
        templates: Sequence[tuple[str, ...]] = _FORK_CPP if kind == "cpp" else _FORK_PY
        if kind == "py" and "_semantic" not in block.lines[0] + block.lines[1]:
            templates = _FORK_PY[1:]
        for _ in points:
            template = self.rng.choice(templates)
            inserts.append(tuple(indent + t.format(a=a) for t in template))
        far = [j for j in _editable(kind, block.lines) if all(abs(j - p) >= 3 and j != p + 1 for p in points)]
        return _Reserved(path, block, self.up.tree[path].qualname(block.name), kind, points, inserts, far)

    # -- ingested range

    def ingestion_plan(self) -> tuple[list[int], list[list[int]], list[str]]:
        """Hole offsets in the range, bundles of ingested ordinals, and each ingested commit's method."""
        n, holes = self.size.ingested, self.up.n_holes
        span = n + holes
        hole_offsets = sorted(self.rng.sample(range(1, span - 3), holes))
        bundles: list[list[int]] = []
        i = 0
        while i < n:
            k = min(n - i, self.rng.randint(3, max(3, min(25, n // 3))))
            if n - i - k < 3:
                k = n - i
            bundles.append(list(range(i, i + k)))
            i += k
        era = max(1, round(len(bundles) * 0.55)) if len(bundles) > 1 else 0
        pre = sum(len(b) for b in bundles[:era])
        methods = [self.rng.choice((CHERRY_PICK_X, PATCH_ID, PATCH_ID, SUBJECT_PATTERN)) for _ in range(pre)]
        forced = [CHERRY_PICK_X, PATCH_ID, SUBJECT_PATTERN] * 2
        for j, m in zip(self.rng.sample(range(pre), min(pre, len(forced))), forced, strict=False):
            methods[j] = m
        methods += [TRAILER] * (n - pre)
        if TRAILER not in methods:
            methods[-1] = TRAILER
        return hole_offsets, bundles, methods

    def ingested_range(self) -> None:
        up, claims = self.up, self.up.claims
        hole_offsets, self.bundles, methods = self.ingestion_plan()
        risky_hole = hole_offsets[0] if len(hole_offsets) >= 3 else -1
        ordinal = 0
        for offset in range(self.size.ingested + up.n_holes):
            if offset in hole_offsets:
                scope = _Scope(
                    lambda p: p not in claims.fork_paths and p not in claims.claimed,
                    lambda k: k not in claims.reserved and k not in claims.diverged,
                )
                areas = {"runtime": 1, "analysis": 1} if offset == risky_hole else _LOW_RISK_AREAS
                c = up.commit(up.generic(areas, scope, pair=0.0), "hole")
                self.claim(c, diverged=True, exclusive=True)
                up.truth["hole"].append(c.index)
                if offset != risky_hole:
                    up.truth["independent"].append(c.index)
                continue
            method = methods[ordinal]
            ordinal += 1
            scope = _Scope(
                functools.partial(self.ingested_path_ok, method),
                lambda k: k not in claims.reserved and k not in claims.diverged,
            )
            if method == SUBJECT_PATTERN:
                edit = up.generic(_GENERIC_AREAS, scope, block_op=True)
            else:
                edit = self.base_edit(scope)
            c = up.commit(edit, "ingested", method=method)
            if method == SUBJECT_PATTERN:
                op = next(o for o in edit.ops if isinstance(o, ReplaceBlock | InsertBlock))
                c.tweak = (op.path, op.new.name)
                claims.diverged.add(c.tweak)
                claims.fork_paths.add(op.path)
        self.tip = len(up.commits) - 1

    def ingested_path_ok(self, method: str, path: str) -> bool:
        claims = self.up.claims
        if path in claims.hole_paths or path == ROOT_CMAKE:
            return False
        return method != PATCH_ID or path not in claims.fork_paths  # a plain pick needs identical files

    def claim(self, c: _UpstreamCommit, *, diverged: bool = False, exclusive: bool = False) -> None:
        claims = self.up.claims
        keys: set[Key] = set()
        for op in c.ops:
            keys |= _op_keys(op, c.parents.get(op.path))
        claims.pending_keys |= keys
        claims.pending_paths |= set(c.parents)
        if diverged:
            claims.diverged |= keys
            claims.hole_paths |= set(c.parents)
            claims.fork_paths |= set(c.parents)
        if exclusive:
            claims.claimed |= set(c.parents)

    # -- pending range

    def slots(self) -> list[tuple[str, int]]:
        """Kinds of the commits after the tip, in upstream order: (kind, group) pairs."""
        p = self.size.pending
        total = p + 2
        slots: list[tuple[str, int] | None] = [None] * total
        free = list(range(total))

        def place(kind: str, group: int, count: int, lo: float = 0.0, hi: float = 1.0) -> None:
            pool = [i for i in free if lo * total <= i < hi * total]
            for pos in sorted(self.rng.sample(pool, count)):
                slots[pos] = (kind, group)
                free.remove(pos)

        place("emergency", 0, 2, 0.2, 0.8)
        for g in range(max(3, p // 30)):
            place("chain", g, self.rng.randint(2, 3))
        place("revert", 0, 3)
        place("llvm", 0, 1 if p < 200 else 2)
        place("large", 0, 1 if p < 300 else 2)
        n_overlap = max(3, p // 40)
        for g in range(n_overlap):
            place("conflict" if g < max(1, n_overlap // 3) else "overlap", g, 1)
        place("interface", 0, max(1, p // 150))
        place("risky", 0, max(2, p // 15))
        return [s if s is not None else ("independent", 0) for s in slots]

    def pending_range(self) -> None:
        claims = self.up.claims
        self.risky_scope = _Scope(
            lambda p: p not in claims.claimed and p != ROOT_CMAKE,
            lambda k: k not in claims.pending_keys and k not in claims.reserved and k not in claims.diverged,
        )
        self.lone_scope = _Scope(
            lambda p: (
                p not in claims.pending_paths
                and p not in claims.fork_paths
                and p not in claims.claimed
                and not is_high_risk(p)
            ),
            lambda k: k not in claims.reserved and k not in claims.diverged,
        )
        self.chains: dict[int, tuple[int, str, str, list[int]]] = {}
        self.overlap_targets = list(self.up.reserved)
        self.rng.shuffle(self.overlap_targets)
        handlers: dict[str, Callable[[int], None]] = {
            "independent": self.independent_member,
            "emergency": self.emergency_member,
            "risky": self.risky_member,
            "chain": self.chain_member,
            "revert": self.revert_member,
            "llvm": self.llvm_member,
            "large": self.large_member,
            "overlap": functools.partial(self.overlap_member, conflict=False),
            "conflict": functools.partial(self.overlap_member, conflict=True),
            "interface": self.interface_member,
        }
        counters: Counter[str] = Counter()
        for kind, group in self.slots():
            counters[kind] += 1
            handlers[kind](group if kind == "chain" else counters[kind])

    def independent_member(self, n: int) -> None:
        c = self.up.commit(self.up.generic(_LOW_RISK_AREAS, self.lone_scope, pair=0.15), "pending")
        self.claim(c, exclusive=True)
        self.up.truth["independent"].append(c.index)

    def emergency_member(self, n: int) -> None:
        areas = {"backend_py": 2, "lang": 1, "compiler_py": 1, "pytest": 1}
        c = self.up.commit(self.up.generic(areas, self.lone_scope, pair=0.0), "emergency")
        self.claim(c, exclusive=True)
        self.up.truth["emergency"].append(c.index)

    def risky_member(self, n: int) -> None:
        self.claim(self.up.commit(self.up.generic(_RISKY_AREAS, self.risky_scope, pair=0.3), "pending"))

    def large_member(self, n: int) -> None:
        edit = self.up.large(self.risky_scope, "ttg_transforms" if n == 1 else "amd_lib")
        c = self.up.commit(edit, "pending")
        self.claim(c)
        self.up.truth["large"].append(c.index)

    def interface_member(self, n: int) -> None:
        up = self.up
        for _ in range(200):
            edit = up.edit_file(self.rng.choice(up.pools["interface"]), self.risky_scope)
            if edit is not None:
                c = up.commit(edit, "pending")
                self.claim(c)
                up.truth["interface"].append(c.index)
                return
        raise _Bug("no room for an interface change")

    def chain_member(self, group: int) -> None:
        """A run of pending commits that each edit lines the previous one changed."""
        up = self.up
        if group not in self.chains:
            edit = up.generic(_CHAIN_AREAS, self.risky_scope, pair=0.0, chainable=True)
            c = up.commit(edit, "pending")
            self.claim(c)
            ((target, changed),) = edit.changed_lines.items()
            path, name = target.split("::", 1)
            self.chains[group] = (c.index, path, name, changed)
            return
        prev, path, name, changed = self.chains[group]
        f = up.tree[path]
        block = f.blocks[f.find(name)]
        got = up.ed.modify(f.kind, block, focus=changed, deletes=False, edits=1)
        if got is None:
            raise _Bug(f"chain block {path}:{name} has nothing to edit")
        prev_pr = up.commits[prev].pr
        subject = self.rng.choice(
            (
                f"{_prefix(path)} Follow-up to #{prev_pr}: handle {self.w.pick(_TOPICS)}",
                f"{_prefix(path)} Fix {self.w.pick(_PROBLEMS)} introduced in #{prev_pr}",
                f"{_prefix(path)} Address review comments from #{prev_pr} in `{name}`",
            )
        )
        edit = _Edit([ReplaceBlock(path, block, got[0])], subject, up.body(), [f.qualname(name)])
        c = up.commit(edit, "pending")
        self.claim(c)
        up.line_deps.append((c.index, prev))
        self.chains[group] = (c.index, path, name, got[1])

    def revert_member(self, n: int) -> None:
        """The first call lands a change, the second reverts it, the third relands it with a fix."""
        up = self.up
        if n == 1:
            edit = up.generic(_CHAIN_AREAS, self.risky_scope, pair=0.0, chainable=True)
            self.claim(up.commit(edit, "pending"))
            self.reverted = (len(up.commits) - 1, edit)
            return
        x, edit = self.reverted
        c = self.revert(x) if n == 2 else self.reland(x, edit)
        self.claim(c)

    def revert(self, x: int) -> _UpstreamCommit:
        up = self.up
        original = up.commits[x]
        ops = [_inverse(op) for op in reversed(original.ops)]
        why = f"It broke {self.w.pick(_ARCHES)} CI with {self.w.pick(_PROBLEMS)}."
        body = f"This reverts commit <<SHA>>.\n\n{why}"
        c = up.commit(_Edit(ops, f'Revert "{original.subject}"', body), "pending", ref=x)
        up.reverts[c.index] = x
        up.line_deps.append((c.index, x))
        self.last_revert = c.index
        return c

    def reland(self, x: int, edit: _Edit) -> _UpstreamCommit:
        up = self.up
        original = up.commits[x]
        op = original.ops[0]
        assert isinstance(op, ReplaceBlock)
        ((_, changed),) = edit.changed_lines.items()
        got = up.ed.modify(up.tree[op.path].kind, op.new, focus=changed, deletes=False, edits=1)
        assert got is not None
        ops = [ReplaceBlock(op.path, op.old, got[0]), *original.ops[1:]]
        subject = f'Reland "{original.subject}"' if self.rng.random() < 0.5 else f"[Reland] {original.title}"
        body = (
            f"This relands #{original.pr} (commit <<SHA>>) with a fix for the "
            f"{self.w.pick(_ARCHES)} failure that caused the revert."
        )
        c = up.commit(_Edit(ops, subject, body), "pending", ref=x)
        up.relands[c.index] = x
        up.line_deps.append((c.index, self.last_revert))
        return c

    def llvm_member(self, n: int) -> None:
        up = self.up
        hash_key = (LLVM_HASH_PATH, "hash")
        prev = list(up.truth["llvm"])
        scope = self.risky_scope
        loose = _Scope(scope.path_ok, lambda k: k == hash_key or scope.key_ok(k))  # bumps follow each other
        c = up.commit(up.llvm_bump(loose), "pending")
        self.claim(c)
        up.truth["llvm"].append(c.index)
        if prev:
            up.line_deps.append((c.index, prev[-1]))

    def overlap_member(self, n: int, *, conflict: bool) -> None:
        """Edit a function the patch stack changed: next to the fork's lines (conflict) or far from them."""
        up, targets = self.up, self.overlap_targets
        pick = next((r for r in targets if conflict or r.far), None)
        if pick is None and targets:
            pick, conflict = targets[0], True  # no room for a clean overlap: make it a conflicting one
        if pick is None:
            raise _Bug("no reserved block left for an overlap")
        targets.remove(pick)
        lines = list(pick.base.lines)
        names = _locals(lines)
        j = pick.points[0] + self.rng.choice((0, 1)) if conflict else self.rng.choice(pick.far)
        if conflict and j not in _editable(pick.kind, lines):
            j = pick.points[0]
        lines[j] = up.ed.variant(pick.kind, lines[j], names)
        current = up.tree[pick.path].blocks[up.tree[pick.path].find(pick.base.name)]
        if current != pick.base:
            raise _Bug("a reserved block changed upstream before its overlap")
        new = Block(pick.base.name, tuple(lines))
        subject = up.subject("modify", pick.path, pick.base.name)
        c = up.commit(
            _Edit([ReplaceBlock(pick.path, pick.base, new)], subject, up.body(), [pick.qualname]), "pending"
        )
        self.claim(c)
        up.truth["overlap"].append(c.index)
        up.overlap_symbols[c.index] = pick.qualname
        if conflict:
            up.truth["conflict"].append(c.index)


# ---------------------------------------------------------------------------------------------- fork


@dataclass
class _ForkCommit:
    author: _Person
    author_time: int
    committer: _Person
    time: int
    changed: dict[str, SourceFile]
    message: str = ""  # own commits
    upstream: int | None = None  # picks: index of the upstream commit
    method: str = ""
    ingestion_id: str = ""


_TLX_INCLUDES = (
    "triton/Dialect/TritonGPU/IR/Dialect.h",
    "triton/Dialect/Triton/IR/Dialect.h",
    "mlir/IR/PatternMatch.h",
    "llvm/Support/Debug.h",
)


class _Fork:
    """Replays the fork trunk in time order: its own patch stack, bundles of picks, emergency picks."""

    def __init__(self, planner: _Planner) -> None:
        self.p = planner
        self.up = planner.up
        self.rng = planner.rng
        self.w = planner.w
        self.ed = _Editor(self.w)
        self.tree = dict(self.up.fork_tree)
        self.team = _people(self.rng, 12, offset=17)
        self.commits: list[_ForkCommit] = []
        self.own: list[int] = []  # indices into commits of the patch stack
        self.tlx: dict[str, list[str]] = {"cpp": [], "py": [], "mlir": []}
        self.methods: dict[int, str] = {}

    def run(self, say: Callable[[str], None]) -> None:
        events = self.own_events() + self.pick_events() + self.emergency_events()
        events.sort(key=lambda e: (e[0], e[1]))
        say(f"fork trunk: {len(events)} events")
        for _, _, action in events:
            action()
        last = 0
        for c in self.commits:
            c.time = max(c.time, last + 1)
            c.author_time = min(c.author_time, c.time)
            last = c.time

    # -- scheduling

    def own_events(self) -> list[tuple[int, int, Callable[[], None]]]:
        up, n = self.up, self.p.size.fork_commits
        fork_time = up.commits[self.p.size.base_commits - 1].time
        end = up.commits[-1].time + 5400
        times = sorted(self.rng.randint(fork_time + 4000, end) for _ in range(n - 1))
        edits = [(r, k) for r in up.reserved for k in range(len(r.points))]
        slots = sorted(self.rng.sample(range(1, n), len(edits)))
        self.rng.shuffle(edits)
        edits.sort(key=lambda e: e[1])  # every block's first insertion before any second one
        plan: dict[int, tuple[_Reserved, int]] = dict(zip(slots, edits, strict=True))
        events: list[tuple[int, int, Callable[[], None]]] = [(fork_time + 3600, 0, self.bootstrap)]
        for i, t in enumerate(times, start=1):
            if i in plan:
                r, k = plan[i]
                events.append((t, 1, functools.partial(self.reserved_edit, r, k, t)))
            else:
                events.append((t, 1, functools.partial(self.tlx_commit, t)))
        return events

    def pick_events(self) -> list[tuple[int, int, Callable[[], None]]]:
        up = self.up
        ingested = [c.index for c in up.commits if c.role == "ingested"]
        events: list[tuple[int, int, Callable[[], None]]] = []
        prev_end = 0
        for number, bundle in enumerate(self.p.bundles, start=1):
            members = [ingested[i] for i in bundle]
            ready = up.commits[members[-1]].time + self.rng.randint(2 * 3600, 20 * 3600)
            start = max(ready, prev_end + 1800)
            prev_end = start + 45 * len(members)
            ingestion_id = f"ingest-{time.strftime('%Y%m%d', time.gmtime(start))}-{number:03d}"
            era = up.commits[members[0]].method == TRAILER
            events.append((start, 2, functools.partial(self.bundle, members, start, ingestion_id, era)))
        self.last_bundle_end = prev_end
        return events

    def emergency_events(self) -> list[tuple[int, int, Callable[[], None]]]:
        events: list[tuple[int, int, Callable[[], None]]] = []
        for idx in self.up.truth["emergency"]:
            t = max(self.up.commits[idx].time, self.last_bundle_end) + self.rng.randint(3600, 4 * 3600)
            events.append((t, 3, functools.partial(self.pick, idx, t, EMERGENCY, "", _SLUICE_BOT)))
        return events

    # -- picks

    def bundle(self, members: list[int], start: int, ingestion_id: str, sluice_era: bool) -> None:
        committer = _SLUICE_BOT if sluice_era else self.rng.choice(self.team)
        for k, idx in enumerate(members):
            self.pick(idx, start + 45 * k, self.up.commits[idx].method, ingestion_id, committer)

    def pick(self, idx: int, when: int, method: str, ingestion_id: str, committer: _Person) -> None:
        u = self.up.commits[idx]
        if method == PATCH_ID and any(self.tree.get(p) != f for p, f in u.parents.items()):
            method = CHERRY_PICK_X  # the fork's copy differs, so a plain pick would not keep the patch-id
        for op in u.ops:
            _apply(self.tree, op)
        if method == SUBJECT_PATTERN:
            assert u.tweak is not None
            path, name = u.tweak
            f = self.tree[path]
            i = f.find(name)
            lines = list(f.blocks[i].lines)
            lines.insert(1, _indent_of(lines[1] if len(lines) > 1 else "") + self.fork_note(f.kind))
            self.tree[path] = f.with_block(i, Block(name, tuple(lines)))
        if method != EMERGENCY:
            self.methods[idx] = method
        changed = {p: self.tree[p] for p in u.parents}
        self.commits.append(
            _ForkCommit(
                u.author,
                u.author_time,
                committer,
                when,
                changed,
                upstream=idx,
                method=method,
                ingestion_id=ingestion_id,
            )
        )

    def fork_note(self, kind: str) -> str:
        text = "FBTriton: adapted for the TLX patch stack."
        return (
            {"py": "# ", "pytest": "# ", "md": "<!-- "}.get(kind, "// ")
            + text
            + (" -->" if kind == "md" else "")
        )

    # -- own commits

    def own_commit(
        self, when: int, subject: str, changed: dict[str, SourceFile], *, summary: str = ""
    ) -> None:
        for path, f in changed.items():
            self.tree[path] = f
        author = self.rng.choice(self.team)
        plan = self.rng.choice(
            (
                "pytest third_party/tlx/test",
                "lit -v third_party/tlx/test",
                "python/test/unit/language/test_core.py -k tlx",
                "ninja check-triton-lit-tests",
            )
        )
        message = f"{subject}\n\nSummary:\n{summary or self.w.sentence()}\n\nTest Plan:\n{plan}\n"
        if self.rng.random() < 0.4:
            message += f"\nReviewed By: {self.rng.choice(self.team).email.split('+')[1].split('@')[0]}\n"
        self.own.append(len(self.commits))
        self.commits.append(
            _ForkCommit(
                author, when - self.rng.randint(600, 2 * 86400), author, when, changed, message=message
            )
        )

    def bootstrap(self) -> None:
        fork_time = self.up.commits[self.p.size.base_commits - 1].time
        changed: dict[str, SourceFile] = {
            SLUICE_CONFIG: SourceFile(
                "yaml", (), (Block("config", tuple(SLUICE_YML.rstrip("\n").split("\n"))),)
            )
        }
        changed["third_party/tlx/CMakeLists.txt"] = SourceFile(
            "cmake", (), (Block("subdirs", ("add_subdirectory(lib)",)),)
        )
        changed["third_party/tlx/README.md"] = self.w.md_file("TLX: Triton Low-level Language Extensions")
        for name in ("IR/Dialect.cpp", "IR/Ops.cpp", "Transforms/InsertBarriers.cpp"):
            changed[f"third_party/tlx/lib/{name}"] = self.tlx_cpp(Path(name).stem)
        changed["third_party/tlx/lib/CMakeLists.txt"] = _cmake_library(
            "TritonTLX", [n for n in ("IR/Dialect.cpp", "IR/Ops.cpp", "Transforms/InsertBarriers.cpp")]
        )
        for name in ("__init__.py", "core.py", "async_ops.py"):
            changed[f"third_party/tlx/language/{name}"] = self.w.py_module(language=True)
        changed["third_party/tlx/test/buffers.mlir"] = self.w.mlir_file("tlx-insert-barriers")
        root = self.tree[ROOT_CMAKE]
        subdirs = root.blocks[root.find("subdirs")]
        changed[ROOT_CMAKE] = root.with_block(
            root.find("subdirs"), Block("subdirs", (*subdirs.lines, "add_subdirectory(third_party/tlx)"))
        )
        for path in changed:
            kind = {".cpp": "cpp", ".py": "py", ".mlir": "mlir"}.get(Path(path).suffix)
            if kind:
                self.tlx[kind].append(path)
        self.own_commit(
            fork_time + 3600,
            "[TLX] Add the TLX extension skeleton and Sluice config",
            changed,
            summary="Low-level language extensions for warp-specialized kernels, built as "
            "third_party/tlx, plus the .github/sluice.yml that declares the extension.",
        )

    def tlx_cpp(self, stem: str) -> SourceFile:
        f = self.w.cpp_file(stem, "mlir::triton::tlx", nested=False, patterns=False)
        header = tuple(
            sorted(
                {
                    *(h for h in f.header if h.startswith("#include")),
                    *(f'#include "{i}"' for i in _TLX_INCLUDES),
                }
            )
        )
        rest = tuple(h for h in f.header if not h.startswith("#include"))
        return replace(f, header=(*header, *rest))

    def reserved_edit(self, r: _Reserved, k: int, when: int) -> None:
        f = self.tree[r.path]
        i = f.find(r.base.name)
        if f.blocks[i] != r.version(k):
            raise _Bug(f"patch stack lost track of {r.qualname}")
        new = f.with_block(i, r.version(k + 1))
        comp = _camel_words(Path(r.path).stem)
        subject = self.rng.choice(
            (
                f"[FBTriton] Teach {comp} about TLX {self.w.pick(_TLX_WORDS)}",
                f"[TLX] Skip TLX-managed ops in `{r.base.name}`",
                f"[TLX] Keep explicit layouts in {comp}",
            )
        )
        self.own_commit(when, subject, {r.path: new})

    def tlx_commit(self, when: int) -> None:
        """One commit of TLX work: new files, changed or added functions, lit cases, docs."""
        kind = _weighted(self.rng, _TLX_KINDS)
        word = self.w.pick(_TLX_WORDS)
        if kind == "new_cpp" and self.tlx_new_cpp(when, word):
            return
        if kind in ("new_py", "new_lit") and self.tlx_new_file(
            when, word, ".py" if kind == "new_py" else ".mlir"
        ):
            return
        if kind == "doc":
            path = "third_party/tlx/README.md"
            f = self.tree[path]
            new = replace(f, blocks=(*f.blocks, self.w.md_section([b.name for b in f.blocks])))
            self.own_commit(when, f"[TLX] Document tlx.{word}", {path: new})
            return
        pool = self.tlx["cpp" if kind.endswith("cpp") else "py" if kind.endswith("py") else "mlir"]
        path = self.rng.choice(pool)
        if not (kind.startswith("mod") and self.tlx_modify(when, word, path)):
            self.tlx_add(when, word, path)

    def tlx_new_cpp(self, when: int, word: str) -> bool:
        stem = self.w.pick(("Lower", "Insert", "Propagate", "Fuse")) + "".join(
            p.title() for p in word.split("_")
        )
        sub = self.w.pick(("Transforms", "Conversion", "IR"))
        path = f"third_party/tlx/lib/{sub}/{stem}.cpp"
        if path in self.tree:
            return False
        cmake = "third_party/tlx/lib/CMakeLists.txt"
        cm = self.tree[cmake]
        sources = Block("sources", tuple(sorted([*cm.blocks[0].lines, f"  {sub}/{stem}.cpp"])))
        self.tlx["cpp"].append(path)
        changed = {path: self.tlx_cpp(stem), cmake: cm.with_block(0, sources)}
        self.own_commit(when, f"[TLX] Add tlx.{word} lowering", changed)
        return True

    def tlx_new_file(self, when: int, word: str, ext: str) -> bool:
        python = ext == ".py"
        path = f"third_party/tlx/{'language' if python else 'test'}/{word}{ext}"
        if path in self.tree:
            return False
        f = self.w.py_module(language=True) if python else self.w.mlir_file("tlx-" + word.replace("_", "-"))
        self.tlx["py" if python else "mlir"].append(path)
        what = f"Expose tlx.{word} in the language" if python else f"Add lit tests for tlx.{word}"
        self.own_commit(when, f"[TLX] {what}", {path: f})
        return True

    def tlx_modify(self, when: int, word: str, path: str) -> bool:
        f = self.tree[path]
        i = self.rng.randrange(len(f.blocks))
        got = self.ed.modify(f.kind, f.blocks[i])
        if got is None:
            return False
        name = f.blocks[i].name
        subject = self.rng.choice(
            (
                f"[TLX] Fix {self.w.pick(_PROBLEMS)} in `{name}`",
                f"[TLX] Support {self.w.pick(_TOPICS)} in tlx.{word}",
                f"[autoWS] Handle tlx.{word} in `{name}`",
            )
        )
        self.own_commit(when, subject, {path: f.with_block(i, got[0])})
        return True

    def tlx_add(self, when: int, word: str, path: str) -> None:
        f = self.tree[path]
        taken = [b.name for b in f.blocks]
        block = self.up.new_block(f, taken) if f.kind != "cpp" else self.w.cpp_function(taken, taken[:3])
        new = replace(f, blocks=(*f.blocks, block))
        if f.kind == "mlir":
            self.own_commit(when, f"[TLX][Test] Add lit test for tlx.{word}", {path: new})
        else:
            self.own_commit(when, f"[TLX] Add `{block.name}` for tlx.{word}", {path: new})


# ---------------------------------------------------------------------------------------------- emission


class _FastImport:
    """One `git fast-import` process fed a stream; `get-mark` answers come back on stdout."""

    def __init__(self, repo: Path, marks: Path) -> None:
        self.marks = marks
        self.err = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close() or fail()
        self.proc = subprocess.Popen(
            [
                "git",
                "-c",
                "fastimport.unpackLimit=0",
                "fast-import",
                "--quiet",
                "--done",
                "--date-format=raw",
                f"--export-marks={marks}",
            ],
            cwd=repo,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.err,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin: IO[bytes] = self.proc.stdin
        self.stdout: IO[bytes] = self.proc.stdout

    def commit(
        self,
        *,
        ref: str,
        mark: int,
        author: str,
        committer: str,
        message: str,
        files: dict[str, SourceFile],
        parent: str = "",
    ) -> None:
        msg = message.encode()
        out = [
            f"commit {ref}\nmark :{mark}\nauthor {author}\ncommitter {committer}\ndata {len(msg)}\n".encode(),
            msg,
            b"\n",
        ]
        if parent:
            out.append(f"from {parent}\n".encode())
        for path, f in files.items():
            data = f.render()
            out.append(f"M 100644 inline {path}\ndata {len(data)}\n".encode())
            out.append(data)
            out.append(b"\n")
        out.append(b"\n")
        self.stdin.write(b"".join(out))

    def reset(self, ref: str, sha: str) -> None:
        self.stdin.write(f"reset {ref}\nfrom {sha}\n\n".encode())

    def get_mark(self, mark: int) -> str:
        self.stdin.write(f"get-mark :{mark}\n".encode())
        self.stdin.flush()
        sha = self.stdout.readline().decode().strip()
        if len(sha) != 40:
            self.fail()
        return sha

    def close(self) -> dict[int, str]:
        try:
            self.stdin.write(b"done\n")
            self.stdin.close()
        except BrokenPipeError:
            pass
        if self.proc.wait() != 0:
            self.fail()
        self.err.close()
        out: dict[int, str] = {}
        for line in self.marks.read_text().splitlines():
            mark, sha = line.split()
            out[int(mark[1:])] = sha
        return out

    def fail(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.err.seek(0)
        raise SandboxError(f"git fast-import failed: {self.err.read().decode(errors='replace')[-2000:]}")


def _git(repo: Path, *args: str) -> None:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)
    if done.returncode != 0:
        raise SandboxError(f"git {' '.join(args)} failed: {done.stderr.strip()}")


def _init_bare(path: Path) -> None:
    path.mkdir(parents=True)
    _git(path, "init", "--quiet", "--bare", "-b", "main")


def _upstream_message(c: _UpstreamCommit, sha_of: Callable[[int], str]) -> str:
    body = c.body.replace("<<SHA>>", sha_of(c.ref)) if c.ref is not None else c.body
    return f"{c.subject}\n\n{body}\n" if body else f"{c.subject}\n"


def _emit_upstream(repo: Path, up: _Upstream, say: Callable[[str], None]) -> list[str]:
    _init_bare(repo)
    fi = _FastImport(repo, repo / "sluice-marks")
    try:
        for c in up.commits:
            if c.index and c.index % 500 == 0:
                say(f"upstream.git: {c.index}/{len(up.commits)} commits")
            fi.commit(
                ref="refs/heads/main",
                mark=c.index + 1,
                author=c.author.ident(c.author_time),
                committer=_GITHUB.ident(c.time),
                message=_upstream_message(c, lambda i: fi.get_mark(i + 1)),
                files=c.changed,
            )
        marks = fi.close()
    except BrokenPipeError:
        fi.fail()
        raise
    (repo / "sluice-marks").unlink()
    return [marks[i + 1] for i in range(len(up.commits))]


def _pick_message(u: _UpstreamCommit, c: _ForkCommit, sha: str) -> str:
    body = f"\n\n{u.body}" if u.body else ""
    original = f"{u.subject}{body}"
    if c.method == TRAILER:
        return f"{original}\n\nUpstream-Commit: {sha}\nSluice-Ingestion: {c.ingestion_id}\n"
    if c.method == CHERRY_PICK_X:
        return f"{original}\n\n(cherry picked from commit {sha})\n"
    if c.method == PATCH_ID:
        return f"{original}\n"
    if c.method == SUBJECT_PATTERN:
        return (
            f"[Cherry-pick] '{u.title} (#{u.pr})'\n\nHand-picked from upstream #{u.pr} and adapted to the "
            f"TLX patch stack.\n\nSummary:\n{u.body.split(chr(10))[0] if u.body else u.title}\n"
        )
    return f"{original}\n\nUpstream-Commit: {sha}\nSluice-Kind: emergency\n"


def _link_objects(src: Path, dst: Path) -> None:
    for path in sorted((src / "objects").rglob("*")):
        if path.is_dir() or path.parent.name == "info":
            continue
        target = dst / "objects" / path.relative_to(src / "objects")
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, target)
        except OSError:
            shutil.copy2(path, target)


def _emit_fork(
    repo: Path, upstream: Path, fork: _Fork, up_shas: list[str], fork_point: str, say: Callable[[str], None]
) -> list[str]:
    _init_bare(repo)
    _link_objects(upstream, repo)
    fi = _FastImport(repo, repo / "sluice-marks")
    try:
        fi.reset("refs/remotes/upstream/main", up_shas[-1])
        for k, c in enumerate(fork.commits):
            if k and k % 1000 == 0:
                say(f"fork.git: {k}/{len(fork.commits)} commits")
            if c.upstream is not None:
                message = _pick_message(fork.up.commits[c.upstream], c, up_shas[c.upstream])
            else:
                message = c.message
            fi.commit(
                ref="refs/heads/main",
                mark=k + 1,
                author=c.author.ident(c.author_time),
                committer=c.committer.ident(c.time),
                message=message,
                files=c.changed,
                parent=fork_point if k == 0 else "",
            )
        marks = fi.close()
    except BrokenPipeError:
        fi.fail()
        raise
    (repo / "sluice-marks").unlink()
    _git(repo, "config", "remote.upstream.url", str(upstream))
    _git(repo, "config", "remote.upstream.fetch", "+refs/heads/*:refs/remotes/upstream/*")
    return [marks[k + 1] for k in range(len(fork.commits))]


# ---------------------------------------------------------------------------------------------- entry point


def _check(size: SandboxSize) -> None:
    for name in ("files", "base_commits", "fork_commits", "ingested", "pending"):
        if getattr(size, name) < getattr(MIN_SIZE, name):
            raise SandboxError(f"{name}={getattr(size, name)} is below the minimum {getattr(MIN_SIZE, name)}")


def _manifest(planner: _Planner, fork: _Fork, up_shas: list[str], fork_shas: list[str]) -> Manifest:
    up = planner.up
    s = up_shas.__getitem__
    truth = up.truth
    holes = truth["hole"]
    newer = [c.index for c in up.commits[planner.tip + 1 :] if c.role != "emergency"]
    picks = {s(c.upstream): fork_shas[k] for k, c in enumerate(fork.commits) if c.upstream is not None}
    return Manifest(
        upstream_head=up_shas[-1],
        fork_head=fork_shas[-1],
        fork_point=s(planner.size.base_commits - 1),
        ingestion_tip=s(planner.tip),
        ingested={s(i): m for i, m in sorted(fork.methods.items())},
        emergency=[s(i) for i in truth["emergency"]],
        backlog=[s(i) for i in holes],
        pending=[s(i) for i in sorted(holes + newer)],
        patch_stack=[fork_shas[k] for k in fork.own],
        fork_picks=picks,
        line_dependencies=[(s(a), s(b)) for a, b in up.line_deps],
        reverts={s(a): s(b) for a, b in up.reverts.items()},
        relands={s(a): s(b) for a, b in up.relands.items()},
        llvm_bumps=[s(i) for i in truth["llvm"]],
        large=[s(i) for i in truth["large"]],
        patch_stack_symbol_overlaps=[s(i) for i in truth["overlap"]],
        overlap_symbols={s(i): q for i, q in up.overlap_symbols.items()},
        conflicting=[s(i) for i in truth["conflict"]],
        interface_changes=[s(i) for i in truth["interface"]],
        independent=[s(i) for i in truth["independent"]],
    )


def build_sandbox(
    root: Path, size: SandboxSize = DEMO, *, progress: Callable[[str], None] | None = None
) -> Sandbox:
    """Build `root/upstream.git` and `root/fork.git` for `size`; identical SHAs for the same size and seed."""
    _check(size)
    say = progress or (lambda _msg: None)
    root = Path(root)
    upstream, fork_repo = root / "upstream.git", root / "fork.git"
    for path in (upstream, fork_repo):
        if path.exists():
            raise SandboxError(f"{path} already exists")
    root.mkdir(parents=True, exist_ok=True)
    planner = _Planner(size, random.Random(f"sluice-sandbox/{size.seed}"))
    planner.run(say)
    fork = _Fork(planner)
    fork.run(say)
    say(f"writing {upstream.name}: {len(planner.up.commits)} commits")
    up_shas = _emit_upstream(upstream, planner.up, say)
    say(f"writing {fork_repo.name}: {len(fork.commits)} commits")
    fork_shas = _emit_fork(fork_repo, upstream, fork, up_shas, up_shas[size.base_commits - 1], say)
    manifest = _manifest(planner, fork, up_shas, fork_shas)
    say("sandbox ready")
    return Sandbox(root=root, upstream=upstream, fork=fork_repo, manifest=manifest)
