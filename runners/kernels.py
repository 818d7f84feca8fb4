"""The Triton kernels the built-in suites run: vector add, fused softmax, layer norm, a sum and a matmul."""

# Triton reads kernel parameters' annotations (tl.constexpr, specialisation hints), so they carry no types;
# and no `from __future__ import annotations`, so Triton sees them as it does in its own tutorials.
# mypy: allow-untyped-defs

from runners import backend

BACKEND = backend.select()  # before triton loads: without a GPU, triton must load in interpreter mode

from collections.abc import Mapping  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from bot.core.config import MAX_ROW  # noqa: E402  (the widest row softmax and layer norm keep in one block)


@dataclass(frozen=True)
class Launch:
    """One kernel launch with its grid and arguments, so it can be run, timed or compiled afresh."""

    kernel: Any  # a triton JITFunction, or the interpreter's stand-in
    grid: tuple[int, ...]
    args: tuple[Any, ...]
    options: Mapping[str, int]  # constexprs and launch options (num_warps, num_stages)

    def __call__(self) -> None:
        self.kernel[self.grid](*self.args, **self.options)


@dataclass(frozen=True)
class Op:
    """The launches that compute `out` from inputs already in place; each call computes it again."""

    kernel: str
    launches: tuple[Launch, ...]
    out: torch.Tensor

    def __call__(self) -> torch.Tensor:
        for launch in self.launches:
            launch()
        return self.out

    @property
    def config(self) -> dict[str, int]:
        """The first launch's constexprs and options: what tells this variant from another."""
        return dict(self.launches[0].options)


def _unwritten(shape: tuple[int, ...], *, dtype: torch.dtype, like: torch.Tensor) -> torch.Tensor:
    """An output that starts as NaN, so an element no program stores to shows up in a check."""
    return torch.full(shape, float("nan"), dtype=dtype, device=like.device)


def _row_warps(block: int) -> int:
    return 4 if block < 2048 else 8 if block < 8192 else 16


# --- vector add -------------------------------------------------------------------------------------------


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    start = tl.program_id(axis=0) * BLOCK_SIZE
    offsets = start + tl.arange(0, BLOCK_SIZE)
    inside = offsets < n
    total = tl.load(x_ptr + offsets, mask=inside) + tl.load(y_ptr + offsets, mask=inside)
    tl.store(out_ptr + offsets, total, mask=inside)


def add(x: torch.Tensor, y: torch.Tensor, *, block_size: int = 1024, kernel: Any = add_kernel) -> Op:
    """x + y elementwise, for contiguous tensors of one shape; `kernel` lets a test swap in a variant."""
    out = _unwritten(tuple(x.shape), dtype=x.dtype, like=x)
    n = x.numel()
    launch = Launch(kernel, (triton.cdiv(n, block_size),), (x, y, out, n), {"BLOCK_SIZE": block_size})
    return Op("vector_add", (launch,), out)


# --- fused softmax ----------------------------------------------------------------------------------------


@triton.jit
def softmax_kernel(in_ptr, out_ptr, in_stride, out_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK_SIZE)
    inside = cols < n_cols
    x = tl.load(in_ptr + row * in_stride + cols, mask=inside, other=-float("inf")).to(tl.float32)
    exps = tl.exp(x - tl.max(x, axis=0))  # minus the row's max: no overflow, same result
    result = exps / tl.sum(exps, axis=0)
    tl.store(out_ptr + row * out_stride + cols, result.to(out_ptr.dtype.element_ty), mask=inside)


def softmax(x: torch.Tensor) -> Op:
    """Softmax over the last dimension of a 2-D tensor, one row per program, in one pass over memory."""
    rows, cols = x.shape
    block = _row_block(cols)
    out = _unwritten((rows, cols), dtype=x.dtype, like=x)
    options = {"BLOCK_SIZE": block, "num_warps": _row_warps(block)}
    launch = Launch(softmax_kernel, (rows,), (x, out, x.stride(0), out.stride(0), cols), options)
    return Op("softmax", (launch,), out)


def _row_block(cols: int) -> int:
    if cols > MAX_ROW:
        raise ValueError(f"rows of {cols} elements do not fit one block (at most {MAX_ROW})")
    return triton.next_power_of_2(cols)


# --- layer norm -------------------------------------------------------------------------------------------


@triton.jit
def layer_norm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, stride, n_cols, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK_SIZE)
    inside = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=inside, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    centred = tl.where(inside, x - mean, 0.0)  # padding must not count towards the variance
    inv_std = 1.0 / tl.sqrt(tl.sum(centred * centred, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=inside, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=inside, other=0.0).to(tl.float32)
    result = centred * inv_std * w + b
    tl.store(out_ptr + row * stride + cols, result.to(out_ptr.dtype.element_ty), mask=inside)


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, *, eps: float = 1e-5) -> Op:
    """Layer norm over the last dimension of a contiguous 2-D tensor (forward only)."""
    rows, cols = x.shape
    block = _row_block(cols)
    out = _unwritten((rows, cols), dtype=x.dtype, like=x)
    options = {"BLOCK_SIZE": block, "num_warps": _row_warps(block)}
    args = (x, weight, bias, out, x.stride(0), cols, eps)
    return Op("layer_norm", (Launch(layer_norm_kernel, (rows,), args, options),), out)


# --- sum --------------------------------------------------------------------------------------------------


@triton.jit
def partial_sum_kernel(x_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    block = tl.program_id(axis=0)
    offsets = block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offsets, mask=offsets < n, other=0.0).to(tl.float32)
    tl.store(out_ptr + block, tl.sum(x, axis=0))


def total(x: torch.Tensor, *, block_size: int = 1024) -> Op:
    """The sum of all elements in fp32: each pass sums blocks into partials, until one is left.

    Deterministic (no atomics), so two runs of the same input give the same bits.
    """
    launches: list[Launch] = []
    source, n = x, x.numel()
    while True:
        blocks = triton.cdiv(n, block_size)
        partials = _unwritten((blocks,), dtype=torch.float32, like=x)
        launches.append(
            Launch(partial_sum_kernel, (blocks,), (source, partials, n), {"BLOCK_SIZE": block_size})
        )
        if blocks == 1:
            return Op("sum", tuple(launches), partials)
        source, n = partials, blocks


# --- matmul -----------------------------------------------------------------------------------------------


@triton.jit
def matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    # Walk the output tiles in groups of GROUP_M rows so neighbouring programs share A and B tiles in L2.
    tile = tl.program_id(axis=0)
    tiles_n = tl.cdiv(N, BLOCK_N)
    group = tile // (GROUP_M * tiles_n)
    first_m = group * GROUP_M
    group_rows = min(tl.cdiv(M, BLOCK_M) - first_m, GROUP_M)
    tile_m = first_m + (tile % (GROUP_M * tiles_n)) % group_rows
    tile_n = (tile % (GROUP_M * tiles_n)) // group_rows

    rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    depth = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        ks = k * BLOCK_K + depth
        a_tile = tl.load(
            a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak,
            mask=(rows[:, None] < M) & (ks[None, :] < K),
            other=0.0,
        )
        b_tile = tl.load(
            b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn,
            mask=(ks[:, None] < K) & (cols[None, :] < N),
            other=0.0,
        )
        acc = tl.dot(a_tile, b_tile, acc)
    c_tile = acc.to(c_ptr.dtype.element_ty)
    inside = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, c_tile, mask=inside)


def matmul(
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    block: tuple[int, int, int] = (64, 64, 32),
    group_m: int = 8,
    num_warps: int | None = None,
    num_stages: int | None = None,
) -> Op:
    """a @ b for 2-D tensors of one dtype, accumulated in fp32; any M, N, K (the edges are masked)."""
    (m, k), (k_b, n) = a.shape, b.shape
    if k != k_b:
        raise ValueError(f"cannot multiply {m}x{k} by {k_b}x{n}")
    c = _unwritten((m, n), dtype=a.dtype, like=a)
    options = {"BLOCK_M": block[0], "BLOCK_N": block[1], "BLOCK_K": block[2], "GROUP_M": group_m}
    options |= {key: value for key, value in (("num_warps", num_warps), ("num_stages", num_stages)) if value}
    grid = (triton.cdiv(m, block[0]) * triton.cdiv(n, block[1]),)
    strides = (a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    return Op("matmul", (Launch(matmul_kernel, grid, (a, b, c, m, n, k, *strides), options),), c)
