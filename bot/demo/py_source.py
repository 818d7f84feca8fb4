"""Python modules and pytest files for the sandbox's Triton-like tree."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from bot.demo.text import Block, SourceFile
from bot.demo.vocabulary import (
    CAMEL_NOUNS,
    PY_CONDS,
    PY_EXPRS,
    PY_IMPORTS,
    PY_SIMPLE,
    PY_VARS,
    SNAKE,
    TEST_EXPRS,
)
from bot.demo.writing import WriterBase, indent_of


class PyWriter(WriterBase):
    """Writes Python functions, classes, modules and pytest cases."""

    def py_simple(self, names: Sequence[str], helpers: Sequence[str], *, comment: bool = True) -> str:
        if comment and self.rng.random() < 0.07:
            return "# " + self.sentence()
        template = self.pick(PY_SIMPLE)
        if "{helper}" in template and not helpers:
            template = "{v} = {expr}"
        fn = self.pick(SNAKE) + "_" + self.pick(SNAKE)
        expr = self.fill(self.pick(PY_EXPRS), names, helpers, pool=PY_VARS, fn=fn)
        cond = self.fill(self.pick(PY_CONDS), names, helpers, pool=PY_VARS)
        return self.fill(template, names, helpers, pool=PY_VARS, expr=expr, cond=cond)

    def py_stmt(self, names: Sequence[str], helpers: Sequence[str]) -> list[str]:
        r = self.rng.random()
        if r < 0.15:
            cond = self.fill(self.pick(PY_CONDS), names, helpers, pool=PY_VARS)
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
        name = self.unique(taken, lambda: self.pick(SNAKE) + "_" + self.pick(SNAKE))
        params = self.rng.sample(PY_VARS, self.rng.randint(1, 3))
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
            taken, lambda: self.pick(CAMEL_NOUNS) + self.pick(("Cache", "Spec", "Config", "Launcher"))
        )
        fields = self.rng.sample(PY_VARS, 2)
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
        header += [*sorted(self.rng.sample(PY_IMPORTS[:4], 2)), "from typing import List, Optional", ""]
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
        ind = indent_of(line)
        if line.strip().startswith("#"):
            return ind + "# " + self.sentence()
        return ind + self.py_simple(names, (), comment=False)

    def pytest_block(self, name: str) -> Block:
        param = self.pick(("N", "BLOCK", "SIZE", "M"))
        values = ", ".join(str(v) for v in sorted(self.rng.sample((32, 64, 128, 256, 512, 1024, 4096), 3)))
        tl_expr, torch_expr = self.pick(TEST_EXPRS)
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
        return self.unique(taken, lambda: f"test_{self.pick(SNAKE)}_{self.pick(SNAKE)}")

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
