"""The generated fast path of argument binding (jit/fastbind.py) refuses what the full
checks refuse. It serves torch tensors: tvm_ffi calls it for every call, and the shared
ArgumentBinder (nvrtc, cython's retries) before its full checks. A fast path that lets a
wrong tensor through launches the kernel with it, so each case is checked twice: the
generated function itself misses (returns None), and the kernel on the CPU (tvm_ffi)
raises the full path's ArgumentError (issue 15, item 8: a (16,5) tensor bound to a (16,4)
parameter on the nvrtc path once the constant-dimension check was removed)."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.errors import ArgumentError
from tilelang.jit.arguments import ArgumentBinder
from tilelang.jit.fastbind import build_fast_binder
from tilelang.testing.kernels import elementwise_add

torch = pytest.importorskip("torch")
CPU = 1  # DLPack's kDLCPU


def rows_add(dtype: str = "int32"):
    """A (M, 4) + s * B (M, 4): M symbolic, shared by both inputs; s an integer scalar."""
    M = T.symbolic("M")
    scalar = getattr(T, dtype)

    @T.prim_func
    def main(A: T.Tensor((M, 4), "float32"), B: T.Tensor((M, 4), "float32"), s: scalar,
             C: T.Tensor((M, 4), "float32")):
        with T.Kernel(T.ceildiv(M, 16)) as bx:
            for i, j in T.Parallel(16, 4):
                if bx * 16 + i < M:
                    C[bx * 16 + i, j] = A[bx * 16 + i, j] + T.cast(s, "float32") * B[bx * 16 + i, j]

    return main


@functools.cache
def kernel(which: str) -> tilelang.JITKernel:
    func = elementwise_add(16, 4) if which == "fixed" else rows_add()
    compiled = tilelang.compile(func, out_idx=[-1], target="cpu", execution_backend="tvm_ffi")
    assert compiled.context.execution_spec.name == "tvm_ffi"
    return compiled


def t(*shape: int, dtype: str = "float32"):
    return torch.arange(int(np.prod(shape)), dtype=getattr(torch, dtype)).reshape(shape)


CASES = {
    "(16,5) for (16,4)": ("fixed", lambda: (t(16, 5), t(16, 4)),
                          r"argument 'A' \(#0\): expected shape \(16, 4\), got \(16, 5\): dimension 1 must be 4"),
    "(17,4) for (16,4)": ("fixed", lambda: (t(16, 4), t(17, 4)),
                          r"argument 'B' \(#1\): expected shape \(16, 4\), got \(17, 4\): dimension 0 must be 16"),
    "rank 1": ("fixed", lambda: (t(64), t(16, 4)), r"argument 'A' \(#0\): expected 2 dimensions \(16, 4\), got shape \(64,\)"),
    "rank 3": ("fixed", lambda: (t(16, 4), t(16, 4, 1)), r"argument 'B' \(#1\): expected 2 dimensions"),
    "dtype": ("fixed", lambda: (t(16, 4, dtype="float64"), t(16, 4)),
              r"argument 'A' \(#0\): expected dtype float32, got float64"),
    "not contiguous": ("fixed", lambda: (t(4, 16).T, t(16, 4)),
                       r"argument 'A' \(#0\): expected a contiguous \(row-major\) tensor"),
    "not a tensor": ("fixed", lambda: (t(16, 4), np.zeros((16, 4), "float32").tolist()),
                     r"argument 'B' \(#1\): expected a tensor \(torch.Tensor or numpy.ndarray\), got list"),
    "symbolic rows disagree": ("rows", lambda: (t(8, 4), t(9, 4), 1),
                               r"argument 'B' \(#1\): symbolic dimension M is 9 here but 8 in an earlier argument"),
    "symbolic rows, wrong columns": ("rows", lambda: (t(8, 4), t(8, 3), 1), r"dimension 1 must be 4"),
    "int32 scalar 2**31": ("rows", lambda: (t(8, 4), t(8, 4), 2**31), r"2147483648 does not fit its type int32"),
    "int32 scalar -2**31-1": ("rows", lambda: (t(8, 4), t(8, 4), -(2**31) - 1), r"-2147483649 does not fit its type int32"),
    "float for an int32 scalar": ("rows", lambda: (t(8, 4), t(8, 4), 1.5), r"argument 's' \(#2\): expected an integer"),
}


@pytest.mark.parametrize("case", CASES)
def test_the_fast_path_misses_and_the_kernel_refuses(case: str) -> None:
    which, args, message = CASES[case]
    compiled = kernel(which)
    assert build_fast_binder(compiled.artifact, CPU)(*args()) is None
    with pytest.raises(ArgumentError, match=message):
        ArgumentBinder(compiled.artifact, CPU).bind(args())
    with pytest.raises(ArgumentError, match=message):
        compiled(*args())


def test_well_formed_calls_take_the_fast_path_and_compute() -> None:
    fixed, rows = kernel("fixed"), kernel("rows")
    a, b = t(16, 4), t(16, 4) * 0.5
    call, outputs, symbols = build_fast_binder(fixed.artifact, CPU)(a, b)
    assert call[:2] == [a, b] and outputs[0].shape == (16, 4) and symbols == {}
    torch.testing.assert_close(fixed(a, b), a + b, rtol=0, atol=0)
    for m, s in ((1, 3), (8, -2), (37, 2**31 - 1), (5, -(2**31))):
        a, b = t(m, 4), torch.ones(m, 4)
        call, outputs, symbols = build_fast_binder(rows.artifact, CPU)(a, b, s)
        assert symbols == {"M": m} and outputs[0].shape == (m, 4) and call[2] == s
        torch.testing.assert_close(rows(a, b, s), a + float(s), rtol=1e-6, atol=0)
