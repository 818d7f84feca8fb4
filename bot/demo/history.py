"""The history plan: upstream roles, what the fork ingests, and the designed pending structure."""

from __future__ import annotations

import functools
import random
import re
from collections import Counter
from collections.abc import Callable, Sequence

from bot.demo.editing import block_locals, editable_lines
from bot.demo.layout import LLVM_HASH_PATH, ROOT_CMAKE
from bot.demo.records import ANY_SCOPE, Edit, Reserved, Scope, UpstreamCommit, weighted
from bot.demo.spec import (
    CHERRY_PICK_X,
    PATCH_ID,
    SUBJECT_PATTERN,
    TRAILER,
    SandboxError,
    SandboxSize,
    is_high_risk,
)
from bot.demo.text import Block, GeneratorBug, InsertBlock, Key, ReplaceBlock, inverse_op, op_keys
from bot.demo.upstream import Upstream, subject_prefix
from bot.demo.validation import LAYOUT_PATH, culprit_edit, upstream_files
from bot.demo.vocabulary import ARCHES, PROBLEMS, TOPICS
from bot.demo.writer import Writer
from bot.demo.writing import indent_of

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


class Planner:
    """Plans the whole history: upstream roles, what the fork ingests, and the designed pending structure."""

    def __init__(self, size: SandboxSize, rng: random.Random) -> None:
        self.size = size
        self.rng = rng
        self.w = Writer(rng)
        self.up = Upstream(size, rng, self.w)

    # -- base and fork point

    def run(self, say: Callable[[str], None]) -> None:
        up = self.up
        up.initial_tree()
        up.tree.update(upstream_files())  # fixed files, outside the areas: the generator never edits them
        say(f"upstream tree: {len(up.tree)} files")
        up.commit(Edit([], "[BUILD] Import the Triton tree", "Initial import of the repository."), "base")
        up.commits[0].changed = dict(up.tree)
        up.commits[0].parents = {}
        for _ in range(1, self.size.base_commits):
            up.commit(self.base_edit(ANY_SCOPE), "base")
        up.fork_tree = dict(up.tree)
        self.reserve()
        say("ingested range")
        self.ingested_range()
        say("pending range")
        self.pending_range()

    def base_edit(self, scope: Scope) -> Edit:
        r = self.rng.random()
        if r < 0.02:
            return self.up.llvm_bump(scope)
        if r < 0.03:
            return self.up.toolchain_bump()
        if r < 0.06:
            edit = self.up.edit_new_file(
                weighted(self.rng, {"lit": 3, "pytest": 2, "ttg_transforms": 1, "conversion": 1}), scope
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
                    rows = [i for i in editable_lines(kind, b.lines) if indent_of(b.lines[i]) == indent]
                    if len(rows) >= 7:
                        cands.append((path, b, kind))
        self.rng.shuffle(cands)
        cands.sort(key=lambda c: c[2] != "cpp")  # C++ first, then stable shuffle order
        cpp = [c for c in cands if c[2] == "cpp"]
        py = [c for c in cands if c[2] == "py"]
        n_py = min(len(py), max(1, want // 3))
        chosen = cpp[: want - n_py] + py[:n_py]
        if len(chosen) < n_overlaps + 1:
            raise SandboxError(
                "the tree is too small to carry the fork's edits to shared functions", "ask for more files"
            )
        if len(chosen) > size.fork_commits - 1:
            raise SandboxError(
                "fork_commits is too small for the fork's edits to shared functions",
                "ask for more fork commits",
            )
        seconds = max(0, (size.fork_commits - 1) // 2 - len(chosen))
        for i, (path, block, kind) in enumerate(chosen):
            up.reserved.append(self.plan_reserved(path, block, kind, 2 if i < seconds else 1))
        for r in up.reserved:
            up.claims.reserved.add((r.path, r.base.name))
            up.claims.fork_paths.add(r.path)
        up.claims.fork_paths.add(ROOT_CMAKE)

    def plan_reserved(self, path: str, block: Block, kind: str, edits: int) -> Reserved:
        indent = "  " if kind == "cpp" else "    "
        rows = [i for i in editable_lines(kind, block.lines) if indent_of(block.lines[i]) == indent]
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
        far = [
            j
            for j in editable_lines(kind, block.lines)
            if all(abs(j - p) >= 3 and j != p + 1 for p in points)
        ]
        return Reserved(path, block, self.up.tree[path].qualname(block.name), kind, points, inserts, far)

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
                scope = Scope(
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
            scope = Scope(
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

    def claim(self, c: UpstreamCommit, *, diverged: bool = False, exclusive: bool = False) -> None:
        claims = self.up.claims
        keys: set[Key] = set()
        for op in c.ops:
            keys |= op_keys(op, c.parents.get(op.path))
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
        self.risky_scope = Scope(
            lambda p: p not in claims.claimed and p != ROOT_CMAKE,
            lambda k: k not in claims.pending_keys and k not in claims.reserved and k not in claims.diverged,
        )
        self.lone_scope = Scope(
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
        slots = self.slots()
        # The culprit draws on its own rng, so the rest of the history is what the seed alone makes.
        culprit_rng = random.Random(f"sluice-sandbox/{self.size.seed}/culprit")
        plant_at = culprit_rng.randrange(len(slots) // 3, 2 * len(slots) // 3)
        for position, (kind, group) in enumerate(slots):
            if position >= plant_at and not self.up.truth["culprit"]:
                self.culprit_member(culprit_rng)
            counters[kind] += 1
            handlers[kind](group if kind == "chain" else counters[kind])
        if not self.up.truth["culprit"]:
            self.culprit_member(culprit_rng)

    def independent_member(self, n: int) -> None:
        c = self.up.commit(self.up.generic(_LOW_RISK_AREAS, self.lone_scope, pair=0.15), "pending")
        self.claim(c, exclusive=True)
        self.up.truth["independent"].append(c.index)

    def culprit_member(self, rng: random.Random) -> None:
        """The planted culprit: an independent, low-risk rename that breaks the fork's extension tests."""
        c = self.up.plant(culprit_edit(self.up.tree[LAYOUT_PATH]), rng)
        if c is None:
            return  # no room before this slot; the next one
        self.claim(c, exclusive=True)
        self.up.truth["independent"].append(c.index)
        self.up.truth["culprit"].append(c.index)

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
        raise GeneratorBug("no room for an interface change")

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
            raise GeneratorBug(f"chain block {path}:{name} has nothing to edit")
        prev_pr = up.commits[prev].pr
        subject = self.rng.choice(
            (
                f"{subject_prefix(path)} Follow-up to #{prev_pr}: handle {self.w.pick(TOPICS)}",
                f"{subject_prefix(path)} Fix {self.w.pick(PROBLEMS)} introduced in #{prev_pr}",
                f"{subject_prefix(path)} Address review comments from #{prev_pr} in `{name}`",
            )
        )
        edit = Edit([ReplaceBlock(path, block, got[0])], subject, up.body(), [f.qualname(name)])
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

    def revert(self, x: int) -> UpstreamCommit:
        up = self.up
        original = up.commits[x]
        ops = [inverse_op(op) for op in reversed(original.ops)]
        why = f"It broke {self.w.pick(ARCHES)} CI with {self.w.pick(PROBLEMS)}."
        body = f"This reverts commit <<SHA>>.\n\n{why}"
        c = up.commit(Edit(ops, f'Revert "{original.subject}"', body), "pending", ref=x)
        up.reverts[c.index] = x
        up.line_deps.append((c.index, x))
        self.last_revert = c.index
        return c

    def reland(self, x: int, edit: Edit) -> UpstreamCommit:
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
            f"{self.w.pick(ARCHES)} failure that caused the revert."
        )
        c = up.commit(Edit(ops, subject, body), "pending", ref=x)
        up.relands[c.index] = x
        up.line_deps.append((c.index, self.last_revert))
        return c

    def llvm_member(self, n: int) -> None:
        up = self.up
        hash_key = (LLVM_HASH_PATH, "hash")
        prev = list(up.truth["llvm"])
        scope = self.risky_scope
        loose = Scope(scope.path_ok, lambda k: k == hash_key or scope.key_ok(k))  # bumps follow each other
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
            raise GeneratorBug("no reserved block left for an overlap")
        targets.remove(pick)
        lines = list(pick.base.lines)
        names = block_locals(lines)
        j = pick.points[0] + self.rng.choice((0, 1)) if conflict else self.rng.choice(pick.far)
        if conflict and j not in editable_lines(pick.kind, lines):
            j = pick.points[0]
        lines[j] = up.ed.variant(pick.kind, lines[j], names)
        current = up.tree[pick.path].blocks[up.tree[pick.path].find(pick.base.name)]
        if current != pick.base:
            raise GeneratorBug("a reserved block changed upstream before its overlap")
        new = Block(pick.base.name, tuple(lines))
        subject = up.subject("modify", pick.path, pick.base.name)
        c = up.commit(
            Edit([ReplaceBlock(pick.path, pick.base, new)], subject, up.body(), [pick.qualname]), "pending"
        )
        self.claim(c)
        up.truth["overlap"].append(c.index)
        up.overlap_symbols[c.index] = pick.qualname
        if conflict:
            up.truth["conflict"].append(c.index)
