"""Line-level edits of a block that keep its syntax valid."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from bot.demo.text import Block
from bot.demo.vocabulary import TOPICS
from bot.demo.writer import Writer
from bot.demo.writing import indent_of


def editable_lines(kind: str, lines: Sequence[str]) -> list[int]:
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


def block_locals(lines: Sequence[str]) -> list[str]:
    out = []
    for line in lines:
        m = _NAME_RE.search(line)
        if m:
            out.append(m.group(1) or m.group(2))
    return out or ["op"]


class Editor:
    """Line-level edits of a block that keep it syntactically valid."""

    def __init__(self, writer: Writer) -> None:
        self.w = writer
        self.rng = writer.rng

    def variant(self, kind: str, line: str, names: Sequence[str]) -> str:
        for _ in range(20):
            new = self._variant(kind, line, names)
            if new != line:
                return new
        return line + " "  # unreachable in practice; still a change

    def _variant(self, kind: str, line: str, names: Sequence[str]) -> str:
        ind, st = indent_of(line), line.strip()
        if kind == "cpp":
            return self.w.cpp_variant(line, names)
        if kind in ("py", "pytest"):
            return self.w.py_variant(line, names)
        if kind == "mlir":
            return ind + (self.w.mlir_check() if st.startswith("//") else self.w.mlir_op(names))
        if kind == "td" and st.startswith("let summary"):
            return f'{ind}let summary = "{self.w.pick(TOPICS)} {self.w.pick(("op", "operation", "helper"))}";'
        if kind == "h":
            return ind + "/// " + self.w.sentence() if st.startswith("///") else self.w.h_method()
        return ind + self.w.sentence()

    def fresh(self, kind: str, line: str, names: Sequence[str]) -> list[str]:
        ind = indent_of(line)
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
        cands = editable_lines(kind, block.lines)
        if not cands:
            return None
        names = block_locals(block.lines)
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
            return indent_of(nxt) == indent_of(lines[i]) and not lines[i - 1].rstrip().endswith(":")
        return kind in ("cpp", "mlir", "md")
