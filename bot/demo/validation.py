"""What the sandbox validates with: upstream's layout API, the fork's TLX buffers on it, the tier commands.

The fork's L1 runs its own extension tests (`third_party/tlx/test`) and the built-in smoke suite; its L2
the built-in numerics sweep (`.github/sluice.yml`'s `tiers:`, `ci/validate.sh l1|l2` by hand). One
pending upstream commit renames the layout function TLX imports: textually clean and low-risk to the
planner, so it lands in a bundle, and L1 fails on every candidate that holds it — the culprit the
bundle's bisection has to find.
"""

from __future__ import annotations

from bot.demo.records import Edit
from bot.demo.text import Block, ReplaceBlock, SourceFile

LAYOUT_PATH = "python/triton_kernels/triton_kernels/layout.py"
OLD_NAME, NEW_NAME = "default_blocked_layout", "make_blocked_layout"
CULPRIT_SUBJECT = f"[KERNELS] Rename `{OLD_NAME}` to `{NEW_NAME}`"
_CULPRIT_BODY = (
    "The layout is no longer a default: callers choose the vector width, so the name says what the\n"
    "function does. No functional change."
)

_KERNELS_INIT = '''\
"""triton_kernels: kernels and tensor layouts built on Triton, shared by the projects that use it."""
'''

_LAYOUT = '''\
"""Blocked layouts: how a block of a tensor is spread over the threads and warps of a CTA."""

from __future__ import annotations

import math
from dataclasses import dataclass

THREADS_PER_WARP = 32


@dataclass(frozen=True)
class BlockedLayout:
    """Each thread holds `size_per_thread` contiguous elements; `order` lists dimensions fastest first."""

    size_per_thread: tuple[int, ...]
    threads_per_warp: tuple[int, ...]
    warps_per_cta: tuple[int, ...]
    order: tuple[int, ...]

    def shape_per_cta(self) -> tuple[int, ...]:
        """The tile one pass of the CTA covers; a larger block repeats it."""
        dims = zip(self.size_per_thread, self.threads_per_warp, self.warps_per_cta)
        return tuple(s * t * w for s, t, w in dims)


def default_blocked_layout(shape: tuple[int, ...], num_warps: int, vector: int = 4) -> BlockedLayout:
    """Triton's layout for a block of `shape`: `vector` elements a thread along the last dimension,
    threads and then warps filling the fastest dimensions first."""
    if not shape or any(d <= 0 for d in shape):
        raise ValueError(f"a block needs positive dimensions, got {shape}")
    if num_warps <= 0 or num_warps & (num_warps - 1):
        raise ValueError(f"num_warps must be a power of two, got {num_warps}")
    order = tuple(reversed(range(len(shape))))
    size = [1] * len(shape)
    size[-1] = min(vector, shape[-1])
    threads = _spread(THREADS_PER_WARP, [math.ceil(d / s) for d, s in zip(shape, size)], order)
    room = [math.ceil(d / (s * t)) for d, s, t in zip(shape, size, threads)]
    warps = _spread(num_warps, room, order)
    return BlockedLayout(tuple(size), tuple(threads), tuple(warps), order)


def _spread(count: int, room: list[int], order: tuple[int, ...]) -> list[int]:
    """Split `count` (a power of two) over the dimensions in `order` while each has room; the rest
    goes to the slowest dimension."""
    out = [1] * len(room)
    for dim in order:
        while count > 1 and out[dim] * 2 <= room[dim]:
            out[dim] *= 2
            count //= 2
    out[order[-1]] *= count
    return out
'''

_TLX_INIT = '''\
"""TLX's Python side: shared-memory buffers that warp-specialized kernels allocate themselves."""

from tlx.buffers import LocalBuffer, local_alloc, plan_buffers

__all__ = ["LocalBuffer", "local_alloc", "plan_buffers"]
'''

_TLX_BUFFERS = '''\
"""`tlx.local_alloc`: buffers a kernel places in shared memory itself, each with an explicit layout.

A buffer takes the layout Triton gives its block (triton_kernels.layout), so loading it into registers
needs no layout conversion.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from triton_kernels.layout import BlockedLayout, default_blocked_layout

SHARED_MEMORY_BYTES = 228 * 1024  # one H100 SM
ALIGNMENT = 128  # TMA copies need 128-byte aligned buffers


@dataclass(frozen=True)
class LocalBuffer:
    shape: tuple[int, ...]
    element_bytes: int
    num_buffers: int  # 2 or 3 for a pipelined loop: one buffer loads while another is read
    layout: BlockedLayout

    @property
    def bytes(self) -> int:
        return math.prod(self.shape) * self.element_bytes * self.num_buffers


def local_alloc(
    shape: Sequence[int], element_bytes: int, *, num_buffers: int = 1, num_warps: int = 4
) -> LocalBuffer:
    if element_bytes not in (1, 2, 4, 8):
        raise ValueError(f"an element is 1, 2, 4 or 8 bytes, not {element_bytes}")
    if num_buffers < 1:
        raise ValueError(f"num_buffers must be at least 1, got {num_buffers}")
    block = tuple(shape)
    return LocalBuffer(block, element_bytes, num_buffers, default_blocked_layout(block, num_warps))


def plan_buffers(buffers: Sequence[LocalBuffer], capacity: int = SHARED_MEMORY_BYTES) -> list[int]:
    """Each buffer's byte offset in shared memory, aligned, in order; ValueError when they do not fit."""
    offsets, end = [], 0
    for buffer in buffers:
        start = -(-end // ALIGNMENT) * ALIGNMENT
        offsets.append(start)
        end = start + buffer.bytes
    if end > capacity:
        raise ValueError(f"the buffers need {end} bytes of shared memory, {capacity} are available")
    return offsets
'''

_TLX_CONFTEST = '''\
"""Puts TLX's Python package and upstream's triton_kernels on sys.path, as their editable installs do."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
for source in ("third_party/tlx/python", "python/triton_kernels"):
    if str(ROOT / source) not in sys.path:
        sys.path.insert(0, str(ROOT / source))
'''

_TLX_TEST = '''\
"""tlx.local_alloc and the shared-memory plan, on the layouts triton_kernels gives a block."""

import math

import pytest
from tlx import local_alloc, plan_buffers


def test_a_buffer_takes_the_layout_triton_gives_its_block():
    layout = local_alloc((128, 64), 2).layout
    assert layout.order == (1, 0)
    assert layout.size_per_thread == (1, 4)
    assert layout.threads_per_warp == (2, 16)
    assert layout.shape_per_cta() == (8, 64)


@pytest.mark.parametrize("num_warps", [1, 2, 4, 8])
def test_every_thread_of_every_warp_holds_part_of_the_block(num_warps):
    layout = local_alloc((64, 32), 4, num_warps=num_warps).layout
    assert math.prod(layout.threads_per_warp) == 32
    assert math.prod(layout.warps_per_cta) == num_warps


def test_multi_buffering_multiplies_the_bytes():
    assert local_alloc((128, 64), 2, num_buffers=3).bytes == 128 * 64 * 2 * 3


def test_buffers_are_placed_aligned_one_after_another():
    small, big = local_alloc((3,), 1), local_alloc((64, 64), 2)
    assert plan_buffers([small, big, small]) == [0, 128, 128 + 64 * 64 * 2]


def test_buffers_that_do_not_fit_are_refused():
    with pytest.raises(ValueError, match="shared memory"):
        plan_buffers([local_alloc((256, 256), 4, num_buffers=2)])
    with pytest.raises(ValueError, match="bytes"):
        local_alloc((16, 16), 3)
'''

_VALIDATE_SH = """\
#!/usr/bin/env bash
# One tier of the fork's validation by hand, as its CI job runs it: ci/validate.sh l1|l2 [runner options].
# L1: the TLX extension tests and the built-in smoke kernels; L2: the numerics sweep (.github/sluice.yml,
# `tiers:`). Needs Sluice's tier runner: PYTHON names an interpreter that has it (default python3).
# Without a GPU the kernels run in Triton's interpreter. The tier report goes to build/sluice-<tier>.json.
set -euo pipefail
cd "$(dirname "$0")/.."

tier="${1:-}"
case "$tier" in
  l1|l2) shift ;;
  *) echo "usage: ci/validate.sh l1|l2 [python -m runners run options]" >&2; exit 2 ;;
esac

PYTHON="${PYTHON:-python3}"
# The tier's command suites run `python3`: make it the interpreter that has the runner.
PATH="$(dirname "$("$PYTHON" -c 'import sys; print(sys.executable)')"):$PATH"
export PATH
exec "$PYTHON" -m runners run --tier "$tier" --config .github/sluice.yml --out "build/sluice-$tier.json" "$@"
"""


def _whole(text: str, *, executable: bool = False) -> SourceFile:
    """A file the generator never edits: one block holding all of it."""
    return SourceFile(
        "text", (), (Block("file", tuple(text.rstrip("\n").split("\n"))),), executable=executable
    )


def upstream_files() -> dict[str, SourceFile]:
    """Upstream's triton_kernels package: the layout API the fork's TLX buffers build on."""
    return {
        "python/triton_kernels/triton_kernels/__init__.py": _whole(_KERNELS_INIT),
        LAYOUT_PATH: _whole(_LAYOUT),
    }


def fork_files() -> dict[str, SourceFile]:
    """The fork's TLX Python package, its tests, and the command that runs a tier by hand."""
    return {
        "third_party/tlx/python/tlx/__init__.py": _whole(_TLX_INIT),
        "third_party/tlx/python/tlx/buffers.py": _whole(_TLX_BUFFERS),
        "third_party/tlx/test/conftest.py": _whole(_TLX_CONFTEST),
        "third_party/tlx/test/test_buffers.py": _whole(_TLX_TEST),
        "ci/validate.sh": _whole(_VALIDATE_SH, executable=True),
    }


def culprit_edit(layout: SourceFile) -> Edit:
    """The rename: clean against fork trunk (the fork never edits the file), fatal to TLX's import."""
    (old,) = layout.blocks
    new = Block(old.name, tuple(line.replace(OLD_NAME, NEW_NAME) for line in old.lines))
    return Edit([ReplaceBlock(LAYOUT_PATH, old, new)], CULPRIT_SUBJECT, _CULPRIT_BODY)
