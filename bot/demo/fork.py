"""The patch-stack writer: the fork trunk's own commits, bundles of picks and emergency picks."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from bot.demo.cpp_source import cmake_library
from bot.demo.editing import Editor
from bot.demo.history import Planner
from bot.demo.layout import ROOT_CMAKE, SLUICE_CONFIG, SLUICE_YML
from bot.demo.people import SLUICE_BOT, Person, people
from bot.demo.records import Reserved, weighted
from bot.demo.spec import CHERRY_PICK_X, EMERGENCY, PATCH_ID, SUBJECT_PATTERN, TRAILER
from bot.demo.text import Block, GeneratorBug, SourceFile, apply_op
from bot.demo.validation import fork_files
from bot.demo.vocabulary import PROBLEMS, TLX_WORDS, TOPICS
from bot.demo.writing import camel_words, indent_of

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


@dataclass
class ForkCommit:
    author: Person
    author_time: int
    committer: Person
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


class Fork:
    """Replays the fork trunk in time order: its own patch stack, bundles of picks, emergency picks."""

    def __init__(self, planner: Planner) -> None:
        self.p = planner
        self.up = planner.up
        self.rng = planner.rng
        self.w = planner.w
        self.ed = Editor(self.w)
        self.tree = dict(self.up.fork_tree)
        self.team = people(self.rng, 12, offset=17)
        self.commits: list[ForkCommit] = []
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
        plan: dict[int, tuple[Reserved, int]] = dict(zip(slots, edits, strict=True))
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
            events.append((t, 3, functools.partial(self.pick, idx, t, EMERGENCY, "", SLUICE_BOT)))
        return events

    # -- picks

    def bundle(self, members: list[int], start: int, ingestion_id: str, sluice_era: bool) -> None:
        committer = SLUICE_BOT if sluice_era else self.rng.choice(self.team)
        for k, idx in enumerate(members):
            self.pick(idx, start + 45 * k, self.up.commits[idx].method, ingestion_id, committer)

    def pick(self, idx: int, when: int, method: str, ingestion_id: str, committer: Person) -> None:
        u = self.up.commits[idx]
        if method == PATCH_ID and any(self.tree.get(p) != f for p, f in u.parents.items()):
            method = CHERRY_PICK_X  # the fork's copy differs, so a plain pick would not keep the patch-id
        for op in u.ops:
            apply_op(self.tree, op)
        if method == SUBJECT_PATTERN:
            assert u.tweak is not None
            path, name = u.tweak
            f = self.tree[path]
            i = f.find(name)
            lines = list(f.blocks[i].lines)
            lines.insert(1, indent_of(lines[1] if len(lines) > 1 else "") + self.fork_note(f.kind))
            self.tree[path] = f.with_block(i, Block(name, tuple(lines)))
        if method != EMERGENCY:
            self.methods[idx] = method
        changed = {p: self.tree[p] for p in u.parents}
        self.commits.append(
            ForkCommit(
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
            ForkCommit(
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
        changed["third_party/tlx/lib/CMakeLists.txt"] = cmake_library(
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
        changed.update(fork_files())  # after the pools: the generator never edits these
        self.own_commit(
            fork_time + 3600,
            "[TLX] Add the TLX extension skeleton and Sluice config",
            changed,
            summary="Low-level language extensions for warp-specialized kernels, built as "
            "third_party/tlx, plus the .github/sluice.yml that declares the extension and its "
            "validation tiers (ci/validate.sh l1|l2 runs one by hand).",
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

    def reserved_edit(self, r: Reserved, k: int, when: int) -> None:
        f = self.tree[r.path]
        i = f.find(r.base.name)
        if f.blocks[i] != r.version(k):
            raise GeneratorBug(f"patch stack lost track of {r.qualname}")
        new = f.with_block(i, r.version(k + 1))
        comp = camel_words(Path(r.path).stem)
        subject = self.rng.choice(
            (
                f"[FBTriton] Teach {comp} about TLX {self.w.pick(TLX_WORDS)}",
                f"[TLX] Skip TLX-managed ops in `{r.base.name}`",
                f"[TLX] Keep explicit layouts in {comp}",
            )
        )
        self.own_commit(when, subject, {r.path: new})

    def tlx_commit(self, when: int) -> None:
        """One commit of TLX work: new files, changed or added functions, lit cases, docs."""
        kind = weighted(self.rng, _TLX_KINDS)
        word = self.w.pick(TLX_WORDS)
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
                f"[TLX] Fix {self.w.pick(PROBLEMS)} in `{name}`",
                f"[TLX] Support {self.w.pick(TOPICS)} in tlx.{word}",
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
