"""Where the kernels run: a GPU through the Triton compiler, or the CPU through the Triton interpreter."""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass
from typing import Any

INTERPRET_ENV = "TRITON_INTERPRET"
_TRUE = ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Backend:
    interpreter: bool  # TRITON_INTERPRET=1: kernels run on the CPU; correctness is real, timings are not
    device: str  # where the suites allocate tensors: "cuda" (also ROCm) or "cpu"
    set_interpret: bool = False  # select() set TRITON_INTERPRET itself (command suites must not inherit it)


@functools.cache
def select() -> Backend:
    """The backend for this process; sets TRITON_INTERPRET=1 when there is no GPU.

    `triton.jit` chooses between the compiler and the interpreter when it decorates a kernel, so this runs
    before `runners.kernels` defines any. An explicit TRITON_INTERPRET in the environment is respected.
    """
    if INTERPRET_ENV in os.environ:
        interpreter = interpret_requested()
        return Backend(interpreter=interpreter, device="cpu" if interpreter else "cuda")
    if _gpu_available():
        return Backend(interpreter=False, device="cuda")
    if "triton.language" in sys.modules:
        # tl.sum, tl.cdiv... were then defined for the compiler, and the interpreter fails on them.
        raise RuntimeError(
            "triton was imported before the runner chose the interpreter: import runners.kernels "
            f"(or call runners.backend.select()) before triton, or set {INTERPRET_ENV}=1"
        )
    os.environ[INTERPRET_ENV] = "1"
    return Backend(interpreter=True, device="cpu", set_interpret=True)


def interpret_requested() -> bool:
    """Whether the environment asks Triton for its interpreter."""
    return os.environ.get(INTERPRET_ENV, "").strip().lower() in _TRUE


def command_environment() -> dict[str, str]:
    """The environment for a command suite: this process's, less a TRITON_INTERPRET that select() set."""
    env = dict(os.environ)
    if select.cache_info().currsize and select().set_interpret:
        env.pop(INTERPRET_ENV, None)
    return env


def _gpu_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def interpreter_workarounds() -> tuple[str, ...]:
    """Work around known interpreter defects that would fail correct kernels; returns one note for each.

    Only when kernels run in the interpreter, and only after a probe shows the defect: a Triton whose
    interpreter is fixed gets no workaround.
    """
    if not select().interpreter:
        return ()
    return tuple(note for note in (_widen_bf16_dot_operands(),) if note)


@functools.cache
def _widen_bf16_dot_operands() -> str | None:
    # Triton 3.9's interpreter stores bfloat16 as uint16 and hands those raw bits to np.matmul in tl.dot,
    # so every bf16 matmul comes out wrong by ~1e10 while loads, stores and casts are right. On a GPU the
    # products are exact in fp32 too, so widening the operands to fp32 computes what the hardware does.
    if not _bf16_dot_is_wrong():
        return None
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    original = builder.create_dot

    def create_dot(
        self: Any, a: Any, b: Any, d: Any, input_precision: Any, max_num_imprecise_acc: Any
    ) -> Any:
        return original(self, _as_fp32(a), _as_fp32(b), d, input_precision, max_num_imprecise_acc)

    builder.create_dot = create_dot
    if _bf16_dot_is_wrong():  # the workaround did not take: leave the interpreter as it was
        builder.create_dot = original
        return (
            "interpreter: tl.dot on bfloat16 operands is wrong in this Triton and could not be worked around"
        )
    return (
        "interpreter: bfloat16 tl.dot operands are widened to fp32 "
        "(this Triton's interpreter multiplies their raw bits)"
    )


def _as_fp32(handle: Any) -> Any:
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    if handle.get_element_ty() != tl.bfloat16:
        return handle
    widened = (handle.data.astype(np.uint32) << 16).view(np.float32)
    return interpreter.TensorHandle(widened, tl.float32)


def _bf16_dot_is_wrong() -> bool:
    import torch

    from runners import kernels

    a = torch.tensor([[1.0, 2.0]] * 16, dtype=torch.bfloat16).repeat(1, 8)
    b = torch.ones(16, 16, dtype=torch.bfloat16)
    out = kernels.matmul(a, b, block=(16, 16, 16))()
    return not bool(torch.equal(out.float(), a.float() @ b.float()))
