"""Remembered resolutions: learn how a person resolved each diff3 block, replay it, keep it in the store."""

from __future__ import annotations

import hashlib
import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.core import rerere
from bot.core.diff3 import Diff3Error
from bot.core.rerere import apply, conflict_blocks, conflict_key, learn
from bot.db.store import Store

FORK = "acme/triton"
AT = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)


MERGE_FILE = ["git", "merge-file", "-p", "--diff3", "-L", "ours", "-L", "base", "-L", "theirs"]


def diff3(tmp_path: Path, base: str, ours: str, theirs: str) -> str:
    """What `git merge-file -p --diff3 -L ours -L base -L theirs` makes of the three versions."""
    for name, text in (("base", base), ("ours", ours), ("theirs", theirs)):
        (tmp_path / name).write_text(text)
    merged = subprocess.run(
        [*MERGE_FILE, "ours", "base", "theirs"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert merged.returncode > 0, "expected a conflict"
    return merged.stdout


def lines(text: str) -> tuple[str, ...]:
    return tuple(text.splitlines())


# A C++ file where the fork and upstream both added an include and both changed one call.
CPP_BASE = """\
#include "triton/Analysis/Utility.h"
#include "triton/Dialect/TritonGPU/IR/Dialect.h"
#include "triton/Dialect/TritonGPU/Transforms/Passes.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "triton-loop-pipeline"

namespace mlir::triton::gpu {

static void scheduleLoads(scf::ForOp forOp, CoarseSchedule &schedule) {
  auto loads = getLoadsToPipeline(forOp);
  for (Operation *op : loads)
    schedule.insert(op, /*stage=*/0, /*cluster=*/nullptr);
}

void lowerLoops(ModuleOp moduleOp) {
  SmallVector<scf::ForOp> loops;
  moduleOp->walk([&](scf::ForOp forOp) { loops.push_back(forOp); });
  for (scf::ForOp forOp : loops)
    pipelineLoop(forOp, /*numStages=*/3);
}

} // namespace mlir::triton::gpu
"""
CPP_OURS = CPP_BASE.replace(
    '#include "triton/Dialect/TritonGPU/Transforms/Passes.h"\n',
    '#include "triton/Dialect/TritonGPU/Transforms/Passes.h"\n#include "tlx/Dialect/TLX/IR/Dialect.h"\n',
).replace(
    "    pipelineLoop(forOp, /*numStages=*/3);\n",
    "    pipelineLoop(forOp, /*numStages=*/3, /*tlxAware=*/true);\n",
)
CPP_THEIRS = CPP_BASE.replace(
    '#include "triton/Dialect/TritonGPU/Transforms/Passes.h"\n',
    '#include "triton/Dialect/TritonGPU/Transforms/Passes.h"\n'
    '#include "triton/Dialect/TritonGPU/Transforms/Schedule.h"\n',
).replace(
    "    pipelineLoop(forOp, /*numStages=*/3);\n",
    "    pipelineLoop(forOp, getNumStages(forOp));\n",
)
CPP_RESOLVED = CPP_BASE.replace(
    '#include "triton/Dialect/TritonGPU/Transforms/Passes.h"\n',
    '#include "triton/Dialect/TritonGPU/Transforms/Passes.h"\n'
    '#include "triton/Dialect/TritonGPU/Transforms/Schedule.h"\n'
    '#include "tlx/Dialect/TLX/IR/Dialect.h"\n',
).replace(
    "    pipelineLoop(forOp, /*numStages=*/3);\n",
    "    pipelineLoop(forOp, getNumStages(forOp), /*tlxAware=*/true);\n",
)

# A lit test where both sides changed the same CHECK lines.
LIT_BASE = """\
// RUN: triton-opt %s -split-input-file -tritongpu-pipeline=num-stages=3 | FileCheck %s

// CHECK-LABEL: tt.func @matmul_loop
// CHECK: ttg.local_alloc
// CHECK: scf.for
// CHECK:   ttg.async_copy_global_to_local
// CHECK:   ttg.async_wait {{.*}} {num = 2 : i32}
tt.func @matmul_loop(%lb : index, %ub : index, %step : index) -> tensor<128x128xf32, #C> {
  %c0 = arith.constant 0 : index
  tt.return %acc : tensor<128x128xf32, #C>
}
"""
LIT_OURS = LIT_BASE.replace(
    "// CHECK: ttg.local_alloc\n", "// CHECK: ttg.local_alloc\n// CHECK: tlx.barrier_alloc\n"
).replace("{num = 2 : i32}", "{num = 1 : i32}")
LIT_THEIRS = LIT_BASE.replace("// CHECK: ttg.local_alloc\n", "// CHECK-COUNT-2: ttg.local_alloc\n").replace(
    "{num = 2 : i32}", "{num = 3 : i32}"
)
# Both sides' allocations; the wait count stays at the base's 2 (the person knew both changes cancel out).
LIT_RESOLVED = LIT_BASE.replace(
    "// CHECK: ttg.local_alloc\n", "// CHECK-COUNT-2: ttg.local_alloc\n// CHECK: tlx.barrier_alloc\n"
)


@pytest.mark.parametrize(
    ("base", "ours", "theirs", "resolved", "blocks"),
    [
        pytest.param(CPP_BASE, CPP_OURS, CPP_THEIRS, CPP_RESOLVED, 2, id="cpp-include-and-call"),
        pytest.param(LIT_BASE, LIT_OURS, LIT_THEIRS, LIT_RESOLVED, 2, id="lit-check-lines"),
    ],
)
def test_learn_then_apply_gives_back_the_persons_file(
    tmp_path: Path, base: str, ours: str, theirs: str, resolved: str, blocks: int
) -> None:
    merged = diff3(tmp_path, base, ours, theirs)
    assert len(conflict_blocks(merged)) == blocks

    learned = learn(merged, resolved)
    text, used = apply(merged, learned)

    assert len(learned) == blocks
    assert text == resolved
    assert used == tuple(block.key for block in conflict_blocks(merged))


def test_learn_maps_each_block_to_its_own_lines(tmp_path: Path) -> None:
    merged = diff3(tmp_path, CPP_BASE, CPP_OURS, CPP_THEIRS)
    includes, call = conflict_blocks(merged)

    learned = learn(merged, CPP_RESOLVED)

    assert includes.ours == ('#include "tlx/Dialect/TLX/IR/Dialect.h"',)
    assert includes.base == ()
    assert learned[includes.key] == (
        '#include "triton/Dialect/TritonGPU/Transforms/Schedule.h"',
        '#include "tlx/Dialect/TLX/IR/Dialect.h"',
    )
    assert learned[call.key] == ("    pipelineLoop(forOp, getNumStages(forOp), /*tlxAware=*/true);",)


def test_a_block_resolved_by_dropping_everything_is_learned_as_empty(tmp_path: Path) -> None:
    merged = diff3(tmp_path, LIT_BASE, LIT_OURS, LIT_THEIRS)
    resolved = LIT_RESOLVED.replace("// CHECK:   ttg.async_wait {{.*}} {num = 2 : i32}\n", "")

    learned = learn(merged, resolved)

    assert sorted(learned.values()) == [
        (),
        ("// CHECK-COUNT-2: ttg.local_alloc", "// CHECK: tlx.barrier_alloc"),
    ]
    assert apply(merged, learned)[0] == resolved


def test_an_edit_to_a_clean_line_far_away_is_still_learned(tmp_path: Path) -> None:
    merged = diff3(tmp_path, CPP_BASE, CPP_OURS, CPP_THEIRS)
    edited = CPP_RESOLVED.replace(
        "  auto loads = getLoadsToPipeline(forOp);\n",
        "  auto loads = getLoadsToPipeline(forOp, /*tlx=*/true);\n",
    ).replace("} // namespace mlir::triton::gpu\n", "} // namespace mlir::triton::gpu\n\n// EOF\n")

    learned = learn(merged, edited)

    assert learned == learn(merged, CPP_RESOLVED)
    assert len(learned) == 2


def test_a_far_edit_that_adds_and_removes_lines_learns_each_blocks_own_lines(tmp_path: Path) -> None:
    merged = diff3(tmp_path, CPP_BASE, CPP_OURS, CPP_THEIRS)
    # A line added above the first block and one between the blocks: each block lies lower than in the merge.
    edited = "// Copyright the fork's authors.\n" + CPP_RESOLVED.replace(
        "  auto loads = getLoadsToPipeline(forOp);\n",
        "  auto loads = getLoadsToPipeline(forOp);\n  // The fork pipelines TLX loads first.\n",
    )

    learned = learn(merged, edited)

    assert learned == learn(merged, CPP_RESOLVED)
    assert apply(merged, learned)[0] == CPP_RESOLVED


def test_an_edit_next_to_a_block_learns_nothing(tmp_path: Path) -> None:
    merged = diff3(tmp_path, CPP_BASE, CPP_OURS, CPP_THEIRS)
    # The line right after the second block: is the edit part of its resolution or not? Nobody can tell.
    edited = CPP_RESOLVED.replace(
        "getNumStages(forOp), /*tlxAware=*/true);\n}\n", "getNumStages(forOp));\n};\n"
    )

    assert learn(merged, edited) == {}


def test_a_clean_line_that_fits_in_two_places_learns_nothing() -> None:
    merged = """\
void Pass::runOnOperation() {
<<<<<<< ours
  runTLX();
||||||| base
  run();
=======
  runPipeliner();
>>>>>>> theirs
}
<<<<<<< ours
static int fork = 1;
||||||| base
=======
static int upstream = 2;
>>>>>>> theirs
"""
    # The person also added a helper after the first block: its `}` could be the clean line, or the
    # clean line could be the one after it; either reading is a valid fit.
    resolved = """\
void Pass::runOnOperation() {
  runPipeliner();
  runTLX();
}

void helper() {
}
static int upstream = 2;
"""

    assert learn(merged, resolved) == {}


def test_two_adjacent_blocks_learn_nothing() -> None:
    first = "<<<<<<< ours\nb\n||||||| base\n=======\nc\n>>>>>>> theirs\n"
    second = "<<<<<<< ours\nd\n||||||| base\ne\n=======\nf\n>>>>>>> theirs\n"
    merged = f"a\n{first}{second}z\n"

    assert learn(merged, "a\nb\nc\nf\nz\n") == {}


def test_a_resolved_file_with_markers_left_learns_nothing(tmp_path: Path) -> None:
    merged = diff3(tmp_path, CPP_BASE, CPP_OURS, CPP_THEIRS)

    assert learn(merged, merged) == {}


def test_a_resolved_file_that_lost_the_anchors_learns_nothing(tmp_path: Path) -> None:
    merged = diff3(tmp_path, CPP_BASE, CPP_OURS, CPP_THEIRS)

    assert learn(merged, "// rewritten from scratch\n") == {}


def test_the_same_block_resolved_two_ways_is_not_learned() -> None:
    block = "<<<<<<< ours\nfork();\n||||||| base\nold();\n=======\nnew();\n>>>>>>> theirs\n"
    merged = f"int a() {{\n{block}}}\n\nint b() {{\n{block}}}\n"
    key = conflict_blocks(merged)[0].key

    assert learn(merged, "int a() {\nnew();\n}\n\nint b() {\nfork();\n}\n") == {}
    assert learn(merged, "int a() {\nnew();\n}\n\nint b() {\nnew();\n}\n") == {key: ("new();",)}


def test_the_key_survives_the_file_shifting(tmp_path: Path) -> None:
    merged = diff3(tmp_path, CPP_BASE, CPP_OURS, CPP_THEIRS)
    learned = learn(merged, CPP_RESOLVED)
    header = "".join(f"// Copyright line {n}\n" for n in range(25))

    shifted = diff3(tmp_path, header + CPP_BASE, header + CPP_OURS, header + CPP_THEIRS)

    assert [b.key for b in conflict_blocks(shifted)] == [b.key for b in conflict_blocks(merged)]
    assert apply(shifted, learned) == (header + CPP_RESOLVED, tuple(learned))


def test_the_key_ignores_trailing_whitespace_and_carriage_returns() -> None:
    assert conflict_key(["a  "], ["b\r"], ["c\t"]) == conflict_key(["a"], ["b"], ["c"])
    assert conflict_key(["a"], ["b"], ["c"]) != conflict_key(["a"], ["c"], ["b"])  # sides are not swappable
    assert conflict_key([], ["b", "c"], []) != conflict_key([], ["b"], ["c"])
    assert conflict_key(["  a"], [], []) != conflict_key(["a"], [], [])  # indentation counts


def test_the_key_is_sha256_of_the_documented_json() -> None:
    base, ours, theirs = ["int x;  "], ["int x = 1;"], ["long x;", "é"]
    canonical = json.dumps(
        ["sluice-rerere/1", ["int x;"], ["int x = 1;"], ["long x;", "é"]],
        ensure_ascii=False,
        separators=(",", ":"),
    )

    assert conflict_key(base, ours, theirs) == hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    assert (
        conflict_key(base, ours, theirs) == rerere.ConflictBlock(tuple(base), tuple(ours), tuple(theirs)).key
    )


def test_apply_needs_every_block_known(tmp_path: Path) -> None:
    merged = diff3(tmp_path, CPP_BASE, CPP_OURS, CPP_THEIRS)
    includes, _ = conflict_blocks(merged)
    known = {includes.key: learn(merged, CPP_RESOLVED)[includes.key], "f" * 64: ("unrelated",)}

    assert apply(merged, known) == (None, (includes.key,))
    assert apply(merged, {}) == (None, ())


def test_apply_without_blocks_returns_the_text() -> None:
    assert apply("int main() {}\n", {}) == ("int main() {}\n", ())


def test_apply_keeps_a_missing_final_newline() -> None:
    merged = "a\n<<<<<<< ours\nb\n||||||| base\nx\n=======\nc\n>>>>>>> theirs\nd"
    key = conflict_blocks(merged)[0].key

    assert apply(merged, {key: ("b", "c")}) == ("a\nb\nc\nd", (key,))


@pytest.mark.parametrize(
    "merged",
    [
        "a\n<<<<<<< ours\nb\n=======\nc\n>>>>>>> theirs\n",  # merge style, no base section
        "a\n<<<<<<< ours\nb\n||||||| base\n=======\nc\n",  # never closed
        "<<<<<<< ours\n<<<<<<< ours\n||||||| base\n=======\n>>>>>>> theirs\n",  # nested
    ],
)
def test_malformed_diff3_is_refused(merged: str) -> None:
    with pytest.raises(Diff3Error):
        conflict_blocks(merged)


def test_lines_that_merely_look_like_markers_are_content() -> None:
    look_alike = "<<<<<<<< eight wide\n<<<<<<<\tafter a tab\n======= with text\n  >>>>>>> indented\n"
    merged = f"{look_alike}<<<<<<< ours\nx\n||||||| base\n=======\ny\n>>>>>>> theirs\n"

    (block,) = conflict_blocks(merged)

    assert (block.ours, block.base, block.theirs) == (("x",), (), ("y",))
    assert learn(merged, f"{look_alike}x\ny\n") == {block.key: ("x", "y")}


def test_a_seven_wide_underline_makes_the_merge_unreadable_so_it_teaches_nothing() -> None:
    # git copies the file's own `=======` into the merge, where it reads as a marker out of place.
    merged = "Title\n=======\n<<<<<<< ours\nx\n||||||| base\n=======\ny\n>>>>>>> theirs\n"

    with pytest.raises(Diff3Error, match="line 2: unexpected ======="):
        conflict_blocks(merged)
    assert learn(merged, "Title\n=======\nx\ny\n") == {}


def test_learned_resolutions_round_trip_through_the_store(tmp_path: Path, store: Store) -> None:
    merged = diff3(tmp_path, CPP_BASE, CPP_OURS, CPP_THEIRS)
    path = "lib/Dialect/TritonGPU/Transforms/Pipeliner/SoftwarePipeliner.cpp"
    for key, resolution in learn(merged, CPP_RESOLVED).items():
        store.remember_resolution(
            FORK,
            key,
            resolution,
            path=path,
            recorded_by="alice",
            upstream_sha="a" * 40,
            fork_sha="b" * 40,
            at=AT,
        )
    # Later, the same upstream change conflicts again, further down a longer file.
    header = "// SPDX-License-Identifier: MIT\n\n"
    again = diff3(tmp_path, header + CPP_BASE, header + CPP_OURS, header + CPP_THEIRS)
    keys = [block.key for block in conflict_blocks(again)]

    text, used = apply(again, store.resolutions(FORK, keys))

    assert text == header + CPP_RESOLVED
    assert used == tuple(keys)
    assert store.resolutions("acme/other-fork", keys) == {}
