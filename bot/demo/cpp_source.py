"""C++ sources, headers, TableGen and CMake files for the sandbox's Triton-like tree."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from bot.demo.text import Block, SourceFile
from bot.demo.vocabulary import (
    CAMEL_NOUNS,
    CAMEL_VERBS,
    CPP_INCLUDES,
    CPP_OPS,
    CPP_PARAMS,
    CPP_RET,
    CPP_SIMPLE,
    CPP_VARS,
    FN_NOUNS,
    FN_VERBS,
    PRED_VERBS,
)
from bot.demo.writing import WriterBase, camel_words, indent_of


class CppWriter(WriterBase):
    """Writes C++ functions, conversion patterns, headers and TableGen ops."""

    # -- C++

    def cpp_simple(self, names: Sequence[str], helpers: Sequence[str]) -> str:
        if helpers and self.rng.random() < 0.15:
            return self.fill("auto {v} = {helper}({a});", names, helpers)
        if self.rng.random() < 0.08:
            return "// " + self.sentence()
        return self.fill(self.pick(CPP_SIMPLE), names, helpers)

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
        rtype, fail, ok = CPP_RET[int(self.rng.random() * len(CPP_RET))]
        verb_pool = PRED_VERBS if rtype == "bool" else FN_VERBS
        name = self.unique(taken, lambda: self.pick(verb_pool) + self.pick(FN_NOUNS))
        params = self.rng.sample(CPP_PARAMS, self.rng.randint(1, 3))
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
        op = self.pick(CPP_OPS)
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
        chosen = sorted({*self.rng.sample(CPP_INCLUDES, self.rng.randint(3, 7)), *extra})
        return [f'#include "{inc}"' for inc in chosen]

    def cpp_file(self, stem: str, scope: str, *, nested: bool, patterns: bool, size: int = 0) -> SourceFile:
        header = self.cpp_includes()
        if scope:
            header += ["", f'#define DEBUG_TYPE "{"-".join(camel_words(stem).split())}"']
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
        ind = indent_of(line)
        if line.strip().startswith("//"):
            return ind + "// " + self.sentence()
        return ind + self.cpp_simple(names, ())

    # -- headers and TableGen

    def h_decl(self, taken: Iterable[str]) -> Block:
        if self.rng.random() < 0.25:
            name = self.unique(
                taken, lambda: self.pick(CAMEL_NOUNS) + self.pick(("Info", "Analysis", "Builder"))
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
                    f"  Operation *{self.pick(CPP_VARS)}Op = nullptr;",
                    "};",
                ),
            )
        name = self.unique(taken, self.fn_name)
        rtype = CPP_RET[int(self.rng.random() * 8)][0]
        params = ", ".join(t + n for t, n in self.rng.sample(CPP_PARAMS, self.rng.randint(1, 3)))
        docs = ["/// " + self.sentence() for _ in range(self.rng.randint(1, 2))]
        return Block(name, (*docs, f"{rtype} {name}({params});"))

    def h_method(self) -> str:
        rtype = CPP_RET[int(self.rng.random() * 8)][0]
        param = self.pick(CPP_PARAMS)
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
            lambda: self.pick(CAMEL_VERBS) + self.pick(CAMEL_NOUNS),
        )
        mnemonic = "_".join(camel_words(stem).split())
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
                f'  let summary = "{camel_words(stem)}";',
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


def cmake_library(name: str, sources: Sequence[str]) -> SourceFile:
    return SourceFile(
        "cmake",
        (f"add_triton_library({name}",),
        (Block("sources", tuple(f"  {s}" for s in sorted(sources))),),
        ("", "  DEPENDS", f"  {name}IncGen", "", "  LINK_LIBS PUBLIC", "  MLIRTransforms", "  TritonIR", ")"),
    )


def root_cmake() -> SourceFile:
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


def toolchain_json() -> SourceFile:
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
