"""The sandbox's source writer: C++, Python, lit tests and docs from one random stream."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from bot.demo.cpp_source import CppWriter
from bot.demo.py_source import PyWriter
from bot.demo.text import Block, SourceFile
from bot.demo.vocabulary import MLIR_CHECKS, MLIR_OPS, SNAKE, TOPICS


class Writer(CppWriter, PyWriter):
    """Writes realistic Triton-like source: C++ and Python from its bases, lit tests and docs here."""

    # -- lit tests

    def mlir_op(self, names: Sequence[str]) -> str:
        self.serial += 1
        x, y = (self.pick(names) if names else "arg1"), (self.pick(names) if names else "arg1")
        size = self.pick(("64", "128", "256", "1024"))
        op = self.pick(MLIR_OPS).format(n=self.pick(("0", "1", "4", "16")), s=size, x=x, y=y)
        return f"%{self.pick(SNAKE)}_{self.serial} = {op}"

    def mlir_check(self) -> str:
        kind = self.pick(("CHECK", "CHECK", "CHECK", "CHECK-NOT", "CHECK-NEXT"))
        return f"// {kind}: {self.pick(MLIR_CHECKS)}"

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
        return self.unique(taken, lambda: f"{self.pick(SNAKE)}_{self.pick(SNAKE)}")

    def mlir_file(self, pass_flag: str) -> SourceFile:
        header = (f"// RUN: triton-opt %s -split-input-file -{pass_flag} | FileCheck %s", "")
        blocks: list[Block] = []
        for _ in range(self.rng.randint(2, 6)):
            blocks.append(self.mlir_case(self.mlir_name(b.name for b in blocks)))
        return SourceFile("mlir", header, tuple(blocks))

    # -- docs

    def md_section(self, taken: Iterable[str]) -> Block:
        title = self.unique(
            taken,
            lambda: (
                self.pick(("Debugging", "Using", "Tuning", "Understanding", "Lowering"))
                + " "
                + self.pick(TOPICS)
            ),
        )
        lines = ["## " + title[0].upper() + title[1:], ""]
        lines += [self.sentence() for _ in range(self.rng.randint(2, 5))]
        if self.rng.random() < 0.3:
            lines += [
                "",
                "```bash",
                f"TRITON_{self.pick(SNAKE).upper()}=1 python {self.pick(SNAKE)}.py",
                "```",
            ]
        return Block(title, tuple(lines))

    def md_file(self, stem: str) -> SourceFile:
        header = (f"# {stem.replace('-', ' ').replace('_', ' ').title()}", "", self.sentence(), "")
        blocks: list[Block] = []
        for _ in range(self.rng.randint(3, 6)):
            blocks.append(self.md_section([b.name for b in blocks]))
        return SourceFile("md", header, tuple(blocks))
