"""The upstream history writer: structured edits that keep the fork-side invariants by construction."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from pathlib import Path

from bot.demo.cpp_source import cmake_library, root_cmake, toolchain_json
from bot.demo.editing import Editor, editable_lines
from bot.demo.layout import (
    AREAS,
    LLVM_HASH_PATH,
    ROOT_CMAKE,
    TOOLCHAIN_PATH,
    Area,
    area_counts,
    make_file,
    synthetic_name,
)
from bot.demo.people import people, stream_times
from bot.demo.records import Claims, Edit, Reserved, Scope, UpstreamCommit, weighted
from bot.demo.spec import SandboxSize
from bot.demo.text import (
    AddFile,
    Block,
    GeneratorBug,
    InsertBlock,
    Key,
    Op,
    ReplaceBlock,
    SetHeader,
    SourceFile,
    apply_op,
    op_keys,
)
from bot.demo.vocabulary import (
    ARCHES,
    CAMEL_NOUNS,
    CAMEL_VERBS,
    CPP_INCLUDES,
    PROBLEMS,
    PY_IMPORTS,
    SNAKE,
    TOPICS,
)
from bot.demo.writer import Writer
from bot.demo.writing import camel_words

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


# The ground truth Upstream keeps, by kind: indices of the commits that have it.
_TRUTH_KINDS = (
    *("llvm", "large", "overlap", "conflict", "interface"),
    *("independent", "hole", "emergency", "culprit"),
)


def subject_prefix(path: str) -> str:
    for start, prefix in _PREFIXES:
        if path.startswith(start):
            return prefix
    return "[BACKEND]"


class Upstream:
    """Generates the upstream stream as structured edits, keeping the fork-side invariants in Claims."""

    def __init__(self, size: SandboxSize, rng: random.Random, writer: Writer) -> None:
        self.size = size
        self.rng = rng
        self.w = writer
        self.ed = Editor(writer)
        self.tree: dict[str, SourceFile] = {}
        self.pools: dict[str, list[str]] = {}
        self.area_of: dict[str, Area] = {}
        self.commits: list[UpstreamCommit] = []
        self.claims = Claims()
        self.authors = people(rng, 40, offset=0)
        self.fork_tree: dict[str, SourceFile] = {}
        self.reserved: list[Reserved] = []
        self.truth: dict[str, list[int]] = {k: [] for k in _TRUTH_KINDS}
        self.line_deps: list[tuple[int, int]] = []
        self.reverts: dict[int, int] = {}
        self.relands: dict[int, int] = {}
        self.overlap_symbols: dict[int, str] = {}
        self.n_holes = max(1, round(size.ingested * 0.03))
        total = size.base_commits + size.ingested + self.n_holes + size.pending + 2
        self.times = stream_times(total, rng)
        self.next_pr = 4000

    # -- tree

    def initial_tree(self) -> None:
        counts = area_counts(self.size.files)
        by_dir: dict[str, list[str]] = {}
        for area, count in zip(AREAS, counts, strict=True):
            names = list(area.seeds[:count])
            taken = {f"{area.directory}/{n}" for n in names} | set(self.tree)
            k = 0
            while len(names) < count:
                k += 1
                name = synthetic_name(area, self.w, k)
                if f"{area.directory}/{name}" not in taken:
                    taken.add(f"{area.directory}/{name}")
                    names.append(name)
            for name in names:
                path = f"{area.directory}/{name}"
                self.tree[path] = make_file(area, path, self.w)
                self.pools.setdefault(area.key, []).append(path)
                self.area_of[path] = area
                if area.library:
                    by_dir.setdefault(area.directory, []).append(name)
        for area in AREAS:
            if area.library:
                self.tree[f"{area.directory}/CMakeLists.txt"] = cmake_library(
                    area.library, by_dir[area.directory]
                )
        self.tree[ROOT_CMAKE] = root_cmake()
        self.tree[LLVM_HASH_PATH] = SourceFile("text", (), (Block("hash", (self.w.llvm_hash(),)),))
        self.tree[TOOLCHAIN_PATH] = toolchain_json()

    # -- commit recording

    def commit(
        self, edit: Edit, role: str, *, rng: random.Random | None = None, **extra: object
    ) -> UpstreamCommit:
        index = len(self.commits)
        rng = rng or self.rng
        parents: dict[str, SourceFile | None] = {}
        for op in edit.ops:
            parents.setdefault(op.path, self.tree.get(op.path))
            apply_op(self.tree, op)
        changed = {p: self.tree[p] for p in parents}
        self.next_pr += rng.choice((1, 1, 2, 3, 5))
        author = rng.choice(self.authors)
        when = self.times[index]
        c = UpstreamCommit(
            index=index,
            pr=self.next_pr,
            subject=f"{edit.subject} (#{self.next_pr})",
            body=edit.body,
            author=author,
            author_time=when - rng.randint(3600, 5 * 86400),
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

    def plant(self, edit: Edit, rng: random.Random) -> UpstreamCommit | None:
        """A pending commit slipped in between two planned ones, drawing only on `rng`: the rest of the
        history (times, authors, edits) stays as the seed made it; later PR numbers move up. None when
        the next planned commit lands within a second of the last one (no time between them)."""
        index = len(self.commits)
        before = self.commits[-1].time
        after = self.times[index] if index < len(self.times) else before + 7200
        if after - before < 2:
            return None
        self.times.insert(index, rng.randint(before + 1, after - 1))
        return self.commit(edit, "pending", rng=rng)

    def keys_of(self, ops: Sequence[Op]) -> set[Key]:
        keys: set[Key] = set()
        for op in ops:
            keys |= op_keys(op, self.tree.get(op.path))
        return keys

    def ok(self, scope: Scope, ops: Sequence[Op]) -> bool:
        return all(scope.path_ok(op.path) for op in ops) and all(scope.key_ok(k) for k in self.keys_of(ops))

    # -- edits on one file

    def edit_file(self, path: str, scope: Scope, intent: str = "") -> Edit | None:
        f = self.tree[path]
        kind = f.kind
        intent = intent or weighted(self.rng, _INTENTS.get(kind, (("modify", 1),)))
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

    def _blocks(self, path: str, scope: Scope) -> list[Block]:
        return [b for b in self.tree[path].blocks if scope.key_ok((path, b.name))]

    def edit_modify(self, path: str, scope: Scope, *, deletes: bool = True) -> Edit | None:
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
                return Edit(
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
        raise GeneratorBug(f"no new blocks for {f.kind}")

    def edit_add_function(self, path: str, scope: Scope) -> Edit | None:
        f = self.tree[path]
        if not f.blocks:
            return None
        anchor = self.rng.choice(f.blocks).name
        new = self.new_block(f, [b.name for b in f.blocks])
        ops: list[Op] = [InsertBlock(path, anchor, new)]
        if not self.ok(scope, ops):
            return None
        return Edit(ops, self.subject("add_function", path, new.name), self.body(), [f.qualname(new.name)])

    def edit_append(self, path: str, scope: Scope) -> Edit | None:
        f = self.tree[path]
        if f.kind not in ("pytest", "mlir", "md", "td", "h", "cpp", "py"):
            return None
        new = self.new_block(f, [b.name for b in f.blocks])
        ops: list[Op] = [InsertBlock(path, f.blocks[-1].name if f.blocks else None, new)]
        if not self.ok(scope, ops):
            return None
        return Edit(ops, self.subject("append", path, new.name), self.body(), [f.qualname(new.name)])

    def edit_add_include(self, path: str, scope: Scope) -> Edit | None:
        f = self.tree[path]
        header = list(f.header)
        if f.kind == "cpp":
            have = [i for i, line in enumerate(header) if line.startswith('#include "')]
            options = [f'#include "{inc}"' for inc in CPP_INCLUDES if f'#include "{inc}"' not in header]
            if not have or not options:
                return None
            line = self.rng.choice(options)
            group = sorted([header[i] for i in have] + [line])
            header[have[0] : have[-1] + 1] = group
        elif f.kind == "py":
            options = [imp for imp in PY_IMPORTS if imp not in header]
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
        return Edit(
            ops, f"{subject_prefix(path)} Add missing `{what}` include to {Path(path).name}", self.body()
        )

    def edit_rename(self, path: str, scope: Scope) -> Edit | None:
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
        subject = f"{subject_prefix(path)} [NFC] Rename `{old}` to `{new}`"
        return Edit(ops, subject, self.body(), [f.qualname(old), f.qualname(new)])

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

    def edit_regen_test(self, path: str, scope: Scope) -> Edit | None:
        for block in self._blocks(path, scope)[:3]:
            new = self.w.pytest_block(block.name)
            ops: list[Op] = [ReplaceBlock(path, block, new)]
            if new != block and self.ok(scope, ops):
                return Edit(ops, self.subject("regen_test", path, block.name), self.body(), [block.name])
        return None

    def edit_new_file(self, area_key: str, scope: Scope) -> Edit | None:
        areas = [a for a in AREAS if a.key == area_key]
        area = self.rng.choice(areas)
        name = synthetic_name(area, self.w, self.rng.randint(0, 1))
        path = f"{area.directory}/{name}"
        if path in self.tree or not scope.path_ok(path):
            return None
        ops: list[Op] = [AddFile(path, make_file(area, path, self.w))]
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
            subject = f"[TESTING] Add {camel_words(stem).replace('_', ' ')} tests"
        else:
            subject = f"{subject_prefix(path)} Add {stem} for {self.w.pick(TOPICS)}"
        return Edit(ops, subject, self.body())

    # -- multi-file and special edits

    def generic(
        self,
        areas: dict[str, int],
        scope: Scope,
        *,
        pair: float = 0.3,
        block_op: bool = False,
        chainable: bool = False,
    ) -> Edit:
        """A typical upstream commit in the given areas: one main edit, sometimes with a test."""
        for _ in range(80):
            area = weighted(self.rng, areas)
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

    def chainable(self, edit: Edit) -> bool:
        """True when the edit changed at least one line a later commit can edit again."""
        ((target, changed),) = edit.changed_lines.items()
        f = self.tree[target.split("::", 1)[0]]
        op = edit.ops[0]
        assert isinstance(op, ReplaceBlock)
        return any(i in editable_lines(f.kind, op.new.lines) for i in changed)

    def add_companion(self, edit: Edit, main: str, scope: Scope) -> None:
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

    def fallback_new_test(self, scope: Scope) -> Edit:
        for _ in range(200):
            edit = self.edit_new_file(self.rng.choice(("lit", "pytest")), scope)
            if edit is not None:
                return edit
        raise GeneratorBug("no room for a new test file")

    def llvm_bump(self, scope: Scope) -> Edit:
        old = self.tree[LLVM_HASH_PATH].blocks[0]
        new_hash = self.w.llvm_hash()
        fix = self.generic({"conversion": 3, "nvidia_lib": 2, "amd_lib": 2}, scope, pair=0.0, chainable=True)
        ops: list[Op] = [ReplaceBlock(LLVM_HASH_PATH, old, Block("hash", (new_hash,))), *fix.ops]
        body = (
            f"Bump the LLVM pin to llvm/llvm-project@{new_hash}.\n\n"
            f"Adapt to upstream API changes ({self.w.pick(SNAKE)} builders now take a Location)."
        )
        return Edit(
            ops, f"[BACKEND] Update LLVM version to llvm/llvm-project@{new_hash[:12]}", body, fix.symbols
        )

    def toolchain_bump(self) -> Edit:
        f = self.tree[TOOLCHAIN_PATH]
        old = f.blocks[0]
        lines = list(old.lines)
        i = self.rng.randint(1, len(lines) - 2)
        m = re.search(r"(\d+)\.(\d+)\.(\d+)", lines[i])
        assert m is not None
        bumped = f"{m.group(1)}.{m.group(2)}.{int(m.group(3)) + self.rng.randint(1, 9)}"
        tool = lines[i].split('"')[1]
        lines[i] = lines[i].replace(m.group(0), bumped)
        return Edit(
            [ReplaceBlock(TOOLCHAIN_PATH, old, Block("versions", tuple(lines)))],
            f"[BUILD] Bump {tool} to {bumped}",
            self.body(),
        )

    def large(self, scope: Scope, area_key: str) -> Edit:
        area = next(a for a in AREAS if a.key == area_key and a.library)
        for _ in range(50):
            stem = f"{self.w.pick(CAMEL_VERBS)}{self.w.pick(CAMEL_NOUNS)}"
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
        words = camel_words(stem)
        body = (
            f"This adds a `{words}` pass. {self.w.sentence()}\n\n"
            f"The pass runs after pipelining and is enabled by default on {self.w.pick(ARCHES)}."
        )
        return Edit(
            ops, f"{subject_prefix(path)} Add {words} pass", body, [f.qualname(b.name) for b in f.blocks[:3]]
        )

    # -- messages

    def subject(self, intent: str, path: str, symbol: str) -> str:
        kind = self.tree[path].kind if path in self.tree else ""
        kind = kind if kind in ("md", "mlir", "pytest", "td", "h") else "code"
        templates = _SUBJECTS[kind, intent in ("add_function", "append")]
        text = self.w.pick(templates).format(
            topic=self.w.pick(TOPICS),
            problem=self.w.pick(PROBLEMS),
            arch=self.w.pick(ARCHES),
            name=Path(path).name,
            stem=Path(path).stem,
            comp=camel_words(Path(path).stem).replace("_", " "),
            dialect=path.split("/")[3] if path.startswith("include/") else "",
            symbol=symbol,
            section=symbol.lower(),
        )
        return f"{subject_prefix(path)} {text}"

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
