"""What the shared ArgumentBinder promises beyond one kernel's checks, from the mutants
session's survivors: outputs come back as the inputs came (numpy in, numpy out), the data
pointer alignment a kernel declares is enforced (CPU kernels declare none, so a CPU array
is checked against an artifact that does), and an int for a float scalar too large for
int64 is converted by the full path, never handed to the launcher by the fast one."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest
import tilelang
from tilelang.errors import ArgumentError
from tilelang.jit.arguments import ArgumentBinder
from tilelang.testing.kernels import elementwise_add, saxpy

CPU = 1


@functools.cache
def add() -> tilelang.JITKernel:
    return tilelang.compile(elementwise_add(16, 4), out_idx=[-1], target="cpu", execution_backend="tvm_ffi")


def test_numpy_inputs_give_numpy_outputs_and_torch_inputs_torch_outputs() -> None:
    a = np.ones((16, 4), "float32")
    out = add()(a, a)
    assert type(out) is np.ndarray
    np.testing.assert_array_equal(out, 2 * a)
    torch = pytest.importorskip("torch")
    t = torch.ones(16, 4)
    assert type(add()(t, t)) is torch.Tensor


def aligned_views(alignment: int) -> tuple[np.ndarray, np.ndarray]:
    """Two contiguous (16, 4) float32 arrays: one at an ``alignment``-byte boundary, one 4 bytes past it."""
    raw = np.zeros(16 * 4 + 2 * alignment, "float32")
    skip = (-raw.ctypes.data % alignment) // 4
    aligned = raw[skip:skip + 64].reshape(16, 4)
    return aligned, raw[skip + 1:skip + 65].reshape(16, 4)


def test_a_declared_alignment_refuses_a_view_that_starts_mid_allocation() -> None:
    artifact = dataclasses.replace(add().artifact, min_alignment=64)
    aligned, shifted = aligned_views(64)
    assert aligned.ctypes.data % 64 == 0 and shifted.ctypes.data % 64 == 4
    ArgumentBinder(artifact, CPU).bind((aligned, aligned))
    with pytest.raises(ArgumentError, match=r"argument 'B' \(#1\): its data pointer is not aligned to 64 bytes"):
        ArgumentBinder(artifact, CPU).bind((aligned, shifted))


def test_an_int_beyond_int64_for_a_float_scalar_is_converted() -> None:
    torch = pytest.importorskip("torch")  # torch tensors: the call takes the generated fast path first
    kernel = tilelang.compile(saxpy(64), target="cpu", execution_backend="tvm_ffi")
    x, y = torch.full((64,), 2.0**-62), torch.ones(64)
    kernel(x, y, 2**63)  # y = a * x + y, in float32
    torch.testing.assert_close(y, torch.full((64,), 3.0), rtol=0, atol=0)
