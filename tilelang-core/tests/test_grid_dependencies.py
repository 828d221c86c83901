"""T.pdl_trigger / T.pdl_sync (upstream's programmatic dependent launch): on the CPU they
order nothing the call does not already order, and are dropped."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.errors import LanguageError

N = 1024


@T.prim_func
def producer_consumer(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32), C: T.Tensor((N,), T.float32)):
    with T.Kernel(N // 256, threads=256) as bx:
        for i in T.Parallel(256):
            B[bx * 256 + i] = A[bx * 256 + i] + 1.0
        T.pdl_trigger()
    with T.Kernel(N // 256, threads=256) as bx2:
        T.pdl_sync()
        for i in T.Parallel(256):
            C[bx2 * 256 + i] = B[bx2 * 256 + i] * 2.0


@pytest.mark.parametrize("backend", [("cpu", "tvm_ffi"), ("c", "cython")])
def test_a_dependent_pair_of_kernels_runs_in_order(backend):
    a = np.arange(N, dtype=np.float32)
    b, c = np.zeros(N, np.float32), np.zeros(N, np.float32)
    tilelang.compile(producer_consumer, target=backend[0], execution_backend=backend[1])(a, b, c)
    np.testing.assert_array_equal(b, a + 1)
    np.testing.assert_array_equal(c, (a + 1) * 2)


def test_outside_a_kernel_they_are_refused():
    with pytest.raises(LanguageError, match=r"T.pdl_sync\(\) is only valid inside a T.Kernel frame"):
        T.pdl_sync()
