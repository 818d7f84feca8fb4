"""House rules import-linter cannot see: the core reads no clock or files; no function is long."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "bot" / "core"
# Calls that read the time of day, the environment or the file system: the core is handed these as data.
IMPURE_ATTRIBUTES = frozenset(
    {"now", "utcnow", "today", "time", "read_text", "read_bytes", "write_text", "write_bytes", "getenv"}
    | {"exists", "is_file", "is_dir", "iterdir", "mkdir", "unlink", "rglob", "resolve"}
)
IMPURE_NAMES = frozenset({"open", "input", "print"})
MAX_FUNCTION_LINES = 60
# Data tables: a schema migration lists its columns in one function, as Alembic writes them.
DATA_TABLES = ("bot/db/migrations/",)


def _calls(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Attribute) and node.func.attr in IMPURE_ATTRIBUTES:
            yield node.lineno, f".{node.func.attr}()"
        elif isinstance(node.func, ast.Name) and node.func.id in IMPURE_NAMES:
            yield node.lineno, f"{node.func.id}()"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "environ":
            yield node.lineno, "os.environ"


def test_the_core_reads_no_clock_environment_or_files() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for path in sorted(CORE.rglob("*.py"))
        for line, what in _calls(ast.parse(path.read_text()))
    ]
    assert found == []


@pytest.mark.parametrize(
    "source, impure",
    [
        ("import datetime as dt\nx = dt.datetime.now(dt.UTC)", [".now()"]),
        ("from pathlib import Path\nPath('x').read_text()", [".read_text()"]),
        ("import os\nos.environ['HOME']", ["os.environ"]),
        ("with open('x') as f:\n    pass", ["open()"]),
        ("import datetime as dt\ndef f(now: dt.datetime) -> dt.datetime:\n    return now", []),
    ],
)
def test_the_scan_finds_what_it_looks_for(source: str, impure: list[str]) -> None:
    assert [what for _, what in _calls(ast.parse(source))] == impure


def _long_functions(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                yield f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {length} lines"


def test_no_function_is_over_sixty_lines() -> None:
    sources = [
        path
        for room in ("bot", "handlers", "runners", "tests/support")
        for path in sorted((ROOT / room).rglob("*.py"))
        if not str(path.relative_to(ROOT)).startswith(DATA_TABLES)
    ]
    assert [long for path in sources for long in _long_functions(path)] == []
