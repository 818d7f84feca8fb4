"""Deliberately broken variants of the vector-add kernel: the built-in suites must catch them."""

from runners import kernels

# Imported first, runners.kernels switched Triton to the interpreter (no GPU) before triton loads here.
BACKEND = kernels.BACKEND

import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def add_skipping_the_last(x_ptr, y_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    inside = offsets < n - 1  # the bug: off by one, the last element is never written
    total = tl.load(x_ptr + offsets, mask=inside) + tl.load(y_ptr + offsets, mask=inside)
    tl.store(out_ptr + offsets, total, mask=inside)


@triton.jit
def add_reading_the_next(x_ptr, y_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    inside = offsets < n
    shifted = offsets + 1  # the bug: y is read one element late
    total = tl.load(x_ptr + offsets, mask=inside) + tl.load(y_ptr + shifted, mask=shifted < n, other=0.0)
    tl.store(out_ptr + offsets, total, mask=inside)
