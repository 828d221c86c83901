"""Tensors of 2**31 elements and more (issue 15, item 2), on every CPU execution backend.

Before: a symbolic (m, n) int8 tensor of 2**31+ elements segfaulted cython (the flattened
index i * n + j was int32 in the generated C), and a 1-D symbolic dimension >= 2**31 made
both backends return at once with the output unwritten (the extent was truncated to int32).
Now the indices of buffers that may hold 2**31+ elements are computed in int64
(WidenLargeBufferIndices), and an int32 symbolic dimension refuses an extent it cannot hold.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.errors import ArgumentError

BACKENDS = [pytest.param(("cpu", "tvm_ffi"), id="tvm_ffi"), pytest.param(("c", "cython"), id="cython")]
BIG_ROWS, BIG_COLS = 2**16 + 1, 2**15  # 2**31 + 2**15 elements


def add_one_2d(bm: int = 64):
    m, n = T.symbolic("m"), T.symbolic("n")

    @T.prim_func
    def main(A: T.Tensor((m, n), "int8"), B: T.Tensor((m, n), "int8")):
        with T.Kernel(T.ceildiv(m, bm)) as bx:
            for i, j in T.Parallel(bm, n):
                if bx * bm + i < m:
                    B[bx * bm + i, j] = A[bx * bm + i, j] + T.int8(1)

    return main


def add_one_1d(dtype: str, block: int = 4096):
    n = T.symbolic("n", dtype)

    @T.prim_func
    def main(A: T.Tensor((n,), "int8"), B: T.Tensor((n,), "int8")):
        with T.Kernel(T.ceildiv(n, block)) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    B[bx * block + i] = A[bx * block + i] + T.int8(1)

    return main


def copy_const(rows: int, cols: int):
    @T.prim_func
    def main(A: T.Tensor((rows, cols), "int8"), B: T.Tensor((rows, cols), "int8")):
        with T.Kernel(T.ceildiv(rows, 64)) as bx:
            for i, j in T.Parallel(64, 256):
                if bx * 64 + i < rows:
                    B[bx * 64 + i, j] = A[bx * 64 + i, j]

    return main


def _all_ones(b: np.ndarray, a: np.ndarray) -> None:
    """b == a + 1 everywhere, checked in slices (no 2 GiB temporaries)."""
    flat_a, flat_b = a.reshape(-1), b.reshape(-1)
    step = 2**27
    for start in range(0, flat_b.size, step):
        got, want = flat_b[start:start + step], flat_a[start:start + step] + np.int8(1)
        if not np.array_equal(got, want):
            bad = start + int(np.flatnonzero(got != want)[0])
            pytest.fail(f"element {bad} is {flat_b[bad]}, expected {flat_a[bad] + 1}")


@pytest.mark.slow
def test_more_than_2_31_int8_elements() -> None:
    """The one big test: 2-D symbolic int32 extents whose product passes 2**31, and a 1-D
    int64 symbolic extent past 2**31, on both backends (about 4 GiB at a time)."""
    a = np.zeros((BIG_ROWS, BIG_COLS), dtype="int8")
    a[-1] = np.arange(BIG_COLS) % 100  # the last row, where a wrapped offset would go wrong
    a[0, :7] = np.arange(7)
    for target, execution in (("cpu", "tvm_ffi"), ("c", "cython")):
        for func, arg in ((add_one_2d(), a), (add_one_1d("int64"), a.reshape(-1))):
            kernel = tilelang.compile(func, out_idx=[-1], target=target, execution_backend=execution)
            b = kernel(arg)
            _all_ones(b, arg)
            del b


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_int32_symbolic_extent_past_2_31_is_refused(backend: tuple[str, str]) -> None:
    target, execution = backend
    kernel = tilelang.compile(add_one_1d("int32"), out_idx=[-1], target=target, execution_backend=execution)
    a = np.zeros(2**31 + 64, dtype="int8")  # never touched: calloc'd pages cost nothing
    with pytest.raises(ArgumentError, match=r"argument 'A' \(#0\): dimension 0 is 2147483712, more than its "
                                            r"symbolic dimension n \(int32\) holds; declare it "
                                            r"T.symbolic\('n', 'int64'\) for tensors this large"):
        kernel(a)
    small = np.arange(10, dtype="int8")
    np.testing.assert_array_equal(kernel(small), small + 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_int32_symbolic_extent_past_2_31_is_refused_for_torch(backend: tuple[str, str]) -> None:
    """The generated torch fast path checks the extent too (or leaves it to the full checks)."""
    torch = pytest.importorskip("torch")
    target, execution = backend
    kernel = tilelang.compile(add_one_1d("int32"), out_idx=[-1], target=target, execution_backend=execution)
    with pytest.raises(ArgumentError, match=r"dimension 0 is 2147483712, more than its symbolic dimension n"):
        kernel(torch.empty(2**31 + 64, dtype=torch.int8))


def _c_source(func) -> str:
    return tilelang.lower(func, target="c").kernel_source


def test_large_buffers_get_int64_offsets_in_the_c_source() -> None:
    symbolic = _c_source(add_one_2d())
    assert re.search(r"int64_t \w+ = .*\(\(int64_t\)n\)", symbolic), symbolic
    big = _c_source(copy_const(BIG_ROWS, BIG_COLS))
    assert "(int64_t)32768" in big, big
    small = _c_source(copy_const(64, 256))  # provably small: stays int32
    assert "int32_t cse_v1 = ((i * 256) + j);" in small, small
    assert not re.search(r"int64_t cse_v|\(int64_t\)(i|j|block)\b", small), small


def test_large_buffers_get_int64_offsets_in_the_cuda_source() -> None:
    pytest.importorskip("tilelang.cuda")
    big = tilelang.lower(copy_const(BIG_ROWS, BIG_COLS), target="cuda").kernel_source
    assert re.search(r"B_ptr \+ \(\(+\(\(int64_t\)\(\(int\)blockIdx\.x\)\) \* \(int64_t\)2097152\)", big), big
    small = tilelang.lower(copy_const(64, 256), target="cuda").kernel_source
    body = small.split("__global__", 1)[1]
    assert "int64_t" not in body, body
