"""Definitions and enclosing symbols found in C++, Python, TableGen and MLIR blobs."""

import pytest

from bot.core.symbols import Definition, definitions, enclosing_symbols, innermost_names, language_of

CPP = b"""\
#include "triton/Dialect/TritonGPU/IR/Dialect.h"

using namespace mlir;

namespace mlir {
namespace triton {

namespace {
// Pattern local to this file: the anonymous namespace adds nothing to names.
struct CanonicalizeLoad : public OpRewritePattern<LoadOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(LoadOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.getMask())
      return failure();
    return success();
  }
};
} // namespace

LogicalResult foo(Operation *op) { return success(); }

template <typename T>
SmallVector<T> reorder(ArrayRef<T> values, ArrayRef<unsigned> order) {
  SmallVector<T> result;
  for (unsigned i : order)
    result.push_back(values[i]);
  return result;
}

void LoadOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                         MLIRContext *context) {
  results.add<CanonicalizeLoad>(context);
}

} // namespace triton
} // namespace mlir

namespace mlir::triton::gpu {

class LayoutCache {
public:
  LayoutCache();
  ~LayoutCache();
  LogicalResult verify();
  static LayoutCache *
  create(MLIRContext *context);
  bool operator==(const LayoutCache &other) const;
  int (*callback)(int);

private:
  unsigned hits = 0;
};

LayoutCache::LayoutCache() = default;

LogicalResult LayoutCache::verify() {
  return success(hits >= 0);
}

bool LayoutCache::operator==(const LayoutCache &other) const {
  return hits == other.hits;
}

enum class CacheState { Cold, Warm };

} // namespace mlir::triton::gpu
"""

CPP_DEFINITIONS = (
    Definition("mlir::triton::CanonicalizeLoad", "struct", 10, 19),
    Definition("mlir::triton::CanonicalizeLoad::matchAndRewrite", "method", 13, 18),
    Definition("mlir::triton::foo", "function", 22, 22),
    Definition("mlir::triton::reorder", "function", 24, 30),  # from its `template <>` line
    Definition("mlir::triton::LoadOp::getCanonicalizationPatterns", "method", 32, 35),
    Definition("mlir::triton::gpu::LayoutCache", "class", 42, 54),
    Definition("mlir::triton::gpu::LayoutCache::LayoutCache", "method", 44, 44),
    Definition("mlir::triton::gpu::LayoutCache::~LayoutCache", "method", 45, 45),
    Definition("mlir::triton::gpu::LayoutCache::verify", "method", 46, 46),
    Definition("mlir::triton::gpu::LayoutCache::create", "method", 47, 48),
    Definition("mlir::triton::gpu::LayoutCache::operator==", "method", 49, 49),
    # line 50, `int (*callback)(int);`, is a data member, not a method
    Definition("mlir::triton::gpu::LayoutCache::LayoutCache", "method", 56, 56),
    Definition("mlir::triton::gpu::LayoutCache::verify", "method", 58, 60),
    Definition("mlir::triton::gpu::LayoutCache::operator==", "method", 62, 64),
    Definition("mlir::triton::gpu::CacheState", "enum", 66, 66),
)

CPP_FORMS = b"""\
void a::b::c() {}
template <typename T> void Cache<T>::fill() {}
void ::global() {}
Foo::operator bool() const { return true; }
int Foo::operator()(int x) { return x; }
Foo &Foo::operator = (const Foo &) { return *this; }
extern "C" { void from_c() {} }
#ifdef TRITON_ENABLE_AMD
void onlyOnAmd() {}
#endif
struct Outer { struct Inner { void g(); }; };
void mlir::triton::populatePatterns(RewritePatternSet &patterns) {}
struct Pair {
  friend bool operator==(Pair a, Pair b) { return true; }
  friend void swap(Pair &a, Pair &b);
};
"""

CPP_FORMS_DEFINITIONS = (
    Definition("a::b::c", "function", 1, 1),
    Definition("Cache::fill", "method", 2, 2),
    Definition("global", "function", 3, 3),
    Definition("Foo::operator bool", "method", 4, 4),
    Definition("Foo::operator()", "method", 5, 5),
    Definition("Foo::operator=", "method", 6, 6),
    Definition("from_c", "function", 7, 7),
    Definition("onlyOnAmd", "function", 9, 9),
    Definition("Outer", "struct", 11, 11),
    Definition("Outer::Inner", "struct", 11, 11),
    Definition("Outer::Inner::g", "method", 11, 11),
    Definition("mlir::triton::populatePatterns", "function", 12, 12),
    Definition("Pair", "struct", 13, 16),
    # A friend is not a member: its definition is a function, its declaration nothing.
    Definition("Pair::operator==", "function", 14, 14),
)

PYTHON = b'''\
"""Layout helpers."""
import functools


def top(x):
    def inner(y):
        return y

    return inner(x)


@functools.lru_cache
@staticmethod
def cached():
    pass


class Layout:
    """A layout."""

    rank = 2

    class Slice:
        def parent(self):
            return 1

    @property
    def order(self):
        return self.rank

    async def run(self):
        pass

if True:
    def conditional():
        pass
'''

PYTHON_DEFINITIONS = (
    Definition("top", "function", 5, 9),
    Definition("top.inner", "function", 6, 7),
    Definition("cached", "function", 12, 15),
    Definition("Layout", "class", 18, 32),
    Definition("Layout.Slice", "class", 23, 25),
    Definition("Layout.Slice.parent", "method", 24, 25),
    Definition("Layout.order", "method", 27, 29),
    Definition("Layout.run", "method", 31, 32),
    Definition("conditional", "function", 35, 36),
)

TABLEGEN = b"""\
#ifndef TRITON_OPS
#define TRITON_OPS

include "triton/Dialect/Triton/IR/TritonDialect.td"

class TT_Op<string mnemonic, list<Trait> traits = []> :
    Op<Triton_Dialect, mnemonic,
       !listconcat(traits, [TensorSizeTrait, VerifyTensorLayoutsTrait])> {
}

// def NotAnOp : commented { }
def TT_LoadOp : TT_Op<"load", [
  SameLoadStoreOperandsAndResultShape,
  AttrSizedOperandSegments,
]> {
  let summary = "Load from a tensor of pointers or from a tensor pointer";
  let arguments = (ins AnyTypeOf<[TT_PtrLike, TT_TensorPtr]>:$ptr);
  let extraClassDeclaration = [{
    // brace in code { not closed
    bool isVolatile() { return getIsVolatile(); }
  }];
  let hasCanonicalizer = 1;
}

def TT_StoreOp : TT_Op<"store", [MemoryEffects<[MemWrite<GlobalMemory>]>]>;

let hasVerifier = 1 in {
  def TT_DotOp : TT_Op<"dot", [Pure]> {
    let summary = "dot }";
  }
}

multiclass TT_Binary<string name> {
  def _f : TT_Op<name # "f">;
  def _i : TT_Op<name # "i">;
}
defm TT_Add : TT_Binary<"add">;
def : Pat<(TT_AddOp $a, $b), (TT_AddOp $b, $a)>;

class TritonGPU_Attr<string name, string attrMnemonic, list<Trait> traits = []>
  : AttrDef<TritonGPU_Dialect, name, traits> {
  let description = [{
    TritonGPU tensors differ from usual tensors in that they contain a _layout_ attribute.
  }];
}

#endif
"""

TABLEGEN_DEFINITIONS = (
    Definition("TT_Op", "tdclass", 6, 9),
    Definition("TT_LoadOp", "op", 12, 23),
    Definition("TT_StoreOp", "op", 25, 25),
    Definition("TT_DotOp", "op", 28, 30),
    Definition("TT_Binary", "multiclass", 33, 36),
    Definition("TT_Add", "defm", 37, 37),
    # line 38 is an anonymous `def : Pat<...>;`: nothing to name
    Definition("TritonGPU_Attr", "tdclass", 40, 45),
)

MLIR = b"""\
// RUN: triton-opt %s -split-input-file -tritongpu-coalesce | FileCheck %s

#blocked = #ttg.blocked<{sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>
module attributes {"ttg.num-warps" = 4 : i32} {
// CHECK-LABEL: tt.func @load_kernel
tt.func public @load_kernel(%arg0: !tt.ptr<f32> {tt.divisibility = 16 : i32},
                            %arg1: i32) attributes {noinline = false} {
  %0 = tt.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32, #blocked>
  scf.for %i = %c0 to %c1 step %c1 {
    "tt.print"() {prefix = "}"} : () -> ()
  }
  tt.return
}
}

// -----

module {
  tt.func private @callee(i32) -> i32
  tt.func @caller(%a: i32) -> i32 {
    %r = tt.call @callee(%a) : (i32) -> i32
    tt.return %r : i32
  }
  func.func @f() {
    return
  }
}
"""

MLIR_DEFINITIONS = (
    Definition("@load_kernel", "mlir-func", 6, 13),
    Definition("@callee", "mlir-func", 19, 19),
    Definition("@caller", "mlir-func", 20, 23),
    Definition("@f", "mlir-func", 24, 26),
)


@pytest.mark.parametrize(
    ("path", "language"),
    [
        ("lib/Dialect/TritonGPU/IR/Dialect.cpp", "cpp"),
        ("include/triton/Dialect/TritonGPU/IR/Dialect.h", "cpp"),
        ("include/triton/Dialect/Triton/IR/Ops.h.inc", "cpp"),
        ("third_party/nvidia/backend/driver.c", "cpp"),
        ("lib/kernels/Reduce.CU", "cpp"),
        ("python/triton/language/core.py", "python"),
        ("python/triton/_C/libtriton.pyi", "python"),
        ("include/triton/Dialect/Triton/IR/TritonOps.td", "tablegen"),
        ("test/TritonGPU/coalesce.mlir", "mlir"),
        ("README.md", None),
        ("CMakeLists.txt", None),
        ("Makefile", None),
        ("python/triton/py.typed", None),
    ],
)
def test_language_of(path: str, language: str | None) -> None:
    assert language_of(path) == language


@pytest.mark.parametrize(
    ("path", "source", "expected"),
    [
        ("lib/Dialect/TritonGPU/IR/Dialect.cpp", CPP, CPP_DEFINITIONS),
        ("lib/Forms.cpp", CPP_FORMS, CPP_FORMS_DEFINITIONS),
        ("python/triton/layout.py", PYTHON, PYTHON_DEFINITIONS),
        ("include/triton/Dialect/Triton/IR/TritonOps.td", TABLEGEN, TABLEGEN_DEFINITIONS),
        ("test/TritonGPU/coalesce.mlir", MLIR, MLIR_DEFINITIONS),
    ],
    ids=["cpp", "cpp-forms", "python", "tablegen", "mlir"],
)
def test_definitions(path: str, source: bytes, expected: tuple[Definition, ...]) -> None:
    assert definitions(path, source) == expected


@pytest.mark.parametrize(
    ("path", "source", "lines", "expected"),
    [
        ("Dialect.cpp", CPP, [3], ()),  # `using namespace`, outside any definition
        ("Dialect.cpp", CPP, [16], ("mlir::triton::CanonicalizeLoad::matchAndRewrite",)),
        ("Dialect.cpp", CPP, [11], ("mlir::triton::CanonicalizeLoad",)),  # class body, not a method
        ("Dialect.cpp", CPP, [24], ("mlir::triton::reorder",)),  # the `template <>` line
        ("Dialect.cpp", CPP, [48], ("mlir::triton::gpu::LayoutCache::create",)),
        ("Dialect.cpp", CPP, [50, 53], ("mlir::triton::gpu::LayoutCache",)),
        (
            "Dialect.cpp",
            CPP,
            [5, 17, 22, 34, 59, 63, 68],
            (
                "mlir::triton::CanonicalizeLoad::matchAndRewrite",
                "mlir::triton::LoadOp::getCanonicalizationPatterns",
                "mlir::triton::foo",
                "mlir::triton::gpu::LayoutCache::operator==",
                "mlir::triton::gpu::LayoutCache::verify",
            ),
        ),
        ("layout.py", PYTHON, [2], ()),
        ("layout.py", PYTHON, [7], ("top.inner",)),
        ("layout.py", PYTHON, [9], ("top",)),
        ("layout.py", PYTHON, [12], ("cached",)),  # decorator line
        ("layout.py", PYTHON, [25], ("Layout.Slice.parent",)),  # method of a nested class
        ("layout.py", PYTHON, [21, 26], ("Layout",)),
        ("layout.py", PYTHON, [27, 36], ("Layout.order", "conditional")),
        ("TritonOps.td", TABLEGEN, [4, 11, 26, 47], ()),
        ("TritonOps.td", TABLEGEN, [19], ("TT_LoadOp",)),
        ("TritonOps.td", TABLEGEN, [29, 35, 43], ("TT_Binary", "TT_DotOp", "TritonGPU_Attr")),
        ("coalesce.mlir", MLIR, [3, 14, 16, 18], ()),
        ("coalesce.mlir", MLIR, [7, 10], ("@load_kernel",)),
        ("coalesce.mlir", MLIR, [19, 21, 25], ("@callee", "@caller", "@f")),
        ("README.md", b"def f():\n    pass\n", [1, 2], ()),
    ],
)
def test_enclosing_symbols(path: str, source: bytes, lines: list[int], expected: tuple[str, ...]) -> None:
    assert enclosing_symbols(path, source, lines) == expected


def test_enclosing_symbols_over_every_line_of_a_file() -> None:
    every_line = range(0, CPP.count(b"\n") + 5)
    # Each definition is the innermost one on at least one of its lines; overloads appear once.
    assert enclosing_symbols("Dialect.cpp", CPP, every_line) == (
        "mlir::triton::CanonicalizeLoad",
        "mlir::triton::CanonicalizeLoad::matchAndRewrite",
        "mlir::triton::LoadOp::getCanonicalizationPatterns",
        "mlir::triton::foo",
        "mlir::triton::gpu::CacheState",
        "mlir::triton::gpu::LayoutCache",
        "mlir::triton::gpu::LayoutCache::LayoutCache",
        "mlir::triton::gpu::LayoutCache::create",
        "mlir::triton::gpu::LayoutCache::operator==",
        "mlir::triton::gpu::LayoutCache::verify",
        "mlir::triton::gpu::LayoutCache::~LayoutCache",
        "mlir::triton::reorder",
    )


@pytest.mark.parametrize(
    ("defs", "lines", "expected"),
    [
        # Same first line: the shorter span is the inner one.
        ((Definition("Outer", "struct", 1, 3), Definition("Outer::g", "method", 1, 1)), [1], ("Outer::g",)),
        ((Definition("Cls", "class", 1, 9), Definition("Cls.m", "method", 1, 3)), [1, 4], ("Cls", "Cls.m")),
        # A definition that ended before the line must not shadow the one still open.
        (
            (
                Definition("a", "function", 1, 10),
                Definition("b", "function", 2, 3),
                Definition("c", "function", 5, 6),
            ),
            [3, 4, 6, 10, 11],
            ("a", "b", "c"),
        ),
        # Partly overlapping spans (macro-confused parses): the smaller one wins.
        ((Definition("a", "function", 1, 10), Definition("b", "function", 5, 30)), [7], ("a",)),
        ((Definition("a", "function", 1, 10),), [], ()),
        ((), [1, 2, 3], ()),
    ],
)
def test_innermost_names(defs: tuple[Definition, ...], lines: list[int], expected: tuple[str, ...]) -> None:
    assert innermost_names(defs, lines) == expected


@pytest.mark.parametrize(
    ("path", "source"),
    [
        ("a.cpp", b"int f() { return 0; }\n"),
        ("a.h", b"struct S { void f(); };\n"),
        ("a.py", b"def f():\n    pass\n"),
        ("a.td", b"def F : Op;\n"),
        ("a.mlir", b"tt.func @f() {\n}\n"),
    ],
)
def test_binary_content_has_no_symbols(path: str, source: bytes) -> None:
    assert definitions(path, source) != ()  # the same text without a NUL byte has symbols
    blob = source + b"\x00\x01\xff\xfe" + bytes(range(256)) * 8
    assert definitions(path, blob) == ()
    assert enclosing_symbols(path, blob, [1, 2, 3]) == ()


def test_unknown_extension_has_no_symbols() -> None:
    assert definitions("a.bin", b"int f() { return 0; }\n") == ()


@pytest.mark.parametrize("path", ["a.cpp", "a.py", "a.td", "a.mlir"])
def test_noise_without_nul_bytes_does_not_raise(path: str) -> None:
    noise = bytes(range(1, 256)) * 40
    assert definitions(path, noise) == ()


@pytest.mark.parametrize(
    ("path", "source", "expected"),
    [
        ("a.cpp", b"// caf\xe9 in latin-1\nint f() { return 0; }\n", (Definition("f", "function", 2, 2),)),
        ("a.py", b"# caf\xe9\ndef f():\n    pass\n", (Definition("f", "function", 2, 3),)),
        ("a.td", b"// caf\xe9\ndef X : Y;\n", (Definition("X", "op", 2, 2),)),
        ("a.mlir", b"// caf\xe9\ntt.func @k() {\n}\n", (Definition("@k", "mlir-func", 2, 3),)),
        ("a.cpp", b"", ()),
        ("a.py", b"", ()),
        ("a.td", b"", ()),
        ("a.mlir", b"", ()),
    ],
)
def test_undecodable_bytes_and_empty_files(
    path: str, source: bytes, expected: tuple[Definition, ...]
) -> None:
    assert definitions(path, source) == expected


@pytest.mark.parametrize(
    ("path", "source", "error_line", "before"),
    [
        (
            "a.cpp",
            b"namespace mlir {\nLogicalResult first() { return success(); }\n"
            b"int second(int x) { return x * 2; }\nvoid broken( {{{ ;; ) ]]\n",
            4,
            (Definition("mlir::first", "function", 2, 2), Definition("mlir::second", "function", 3, 3)),
        ),
        (
            "a.py",
            b"def ok():\n    return 1\n\nclass K:\n    def m(self):\n        pass\n\ndef bad(:\n    pass\n",
            8,
            (
                Definition("ok", "function", 1, 2),
                Definition("K", "class", 4, 6),
                Definition("K.m", "method", 5, 6),
            ),
        ),
        (
            "a.td",
            b'def A : Op<"a">;\nclass B<int n> {\n  let x = n;\n}\ndef C : Op<"c"> {\n  let y = [{ {\n',
            6,
            (Definition("A", "op", 1, 1), Definition("B", "tdclass", 2, 4)),
        ),
        (
            "a.mlir",
            b"tt.func @ok() {\n  tt.return\n}\ntt.func @open(%a: i32 {\n",
            4,
            (Definition("@ok", "mlir-func", 1, 3),),
        ),
    ],
)
def test_syntax_errors_keep_the_definitions_before_them(
    path: str, source: bytes, error_line: int, before: tuple[Definition, ...]
) -> None:
    found = definitions(path, source)
    assert tuple(d for d in found if d.end_line < error_line) == before


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # An unterminated record runs to the last non-blank line.
        (b"def A : B {\n  let x = 1;\n\n\n", (Definition("A", "op", 1, 2),)),
        # `//` inside a string is not a comment, and `;` inside braces does not end the record.
        (b'def A : B<"http://x"> {\n  let x = 1;\n}\n', (Definition("A", "op", 1, 3),)),
        (b"/* def Hidden : X; */\ndef Shown : X;\n", (Definition("Shown", "op", 2, 2),)),
    ],
)
def test_tablegen_edges(source: bytes, expected: tuple[Definition, ...]) -> None:
    assert definitions("a.td", source) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # A split marker ends a function whose closing brace never came.
        (
            b"tt.func @f() {\n  tt.return\n// -----\ntt.func @g() {\n}\n",
            (Definition("@f", "mlir-func", 1, 2), Definition("@g", "mlir-func", 4, 5)),
        ),
        # The result type on its own line and the attribute dict do not open the body.
        (
            b"llvm.func @h(%a: i32)\n    -> i32 attributes {passthrough = []} {\n  llvm.return %a : i32\n}\n",
            (Definition("@h", "mlir-func", 1, 4),),
        ),
        (b'func.func @"quoted name"() {\n}\n', (Definition('@"quoted name"', "mlir-func", 1, 2),)),
        (b"// CHECK: tt.func @only_in_a_comment\n", ()),
    ],
)
def test_mlir_edges(source: bytes, expected: tuple[Definition, ...]) -> None:
    assert definitions("a.mlir", source) == expected


def test_deep_nesting_does_not_hit_the_recursion_limit() -> None:
    depth = 3000
    source = b"namespace n {\n" * depth + b"void f() {}\n" + b"}\n" * depth
    assert definitions("deep.cpp", source) == (
        Definition("::".join(["n"] * depth + ["f"]), "function", 3001, 3001),
    )


def test_namespace_scope_prototypes_are_definitions() -> None:
    header = b"namespace mlir::triton {\nLogicalResult verify(Operation *op);\nint kDepth = 3;\n}\n"
    assert definitions("include/triton/Analysis/Utility.h", header) == (
        Definition("mlir::triton::verify", "function", 2, 2),
    )
