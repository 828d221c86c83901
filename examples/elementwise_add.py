"""Elementwise add: the smallest TileLang kernel, in upstream TileLang's eager style.
Runs on the best available backend."""

from __future__ import annotations

import numpy as np
import tilelang
import tilelang.language as T
from tilelang.testing import to_kernel_device, to_numpy


@tilelang.jit
def elementwise_add(A, B, block_M=64, dtype=T.float32):
    M, N = T.const("M, N")  # read from the arguments' shapes: one kernel per shape
    A: T.Tensor((M, N), dtype)
    B: T.Tensor((M, N), dtype)
    C = T.empty((M, N), dtype)  # the output, allocated at each call and returned

    with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
        for i, j in T.Parallel(block_M, N):
            if bx * block_M + i < M:
                C[bx * block_M + i, j] = A[bx * block_M + i, j] + B[bx * block_M + i, j]

    return C


def run(M: int = 1000, N: int = 256) -> str:
    a = np.random.rand(M, N).astype("float32")
    b = np.random.rand(M, N).astype("float32")
    kernel = elementwise_add.compile(M=M, N=N)  # no tensors needed; tells us the device
    c = elementwise_add(*to_kernel_device(kernel, a, b))  # compiles nothing more
    np.testing.assert_allclose(to_numpy(c), a + b, rtol=1e-6)
    return kernel.describe()


if __name__ == "__main__":
    print(run())
