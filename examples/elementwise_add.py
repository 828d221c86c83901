"""Elementwise add: the smallest TileLang kernel. Runs on the best available backend."""

from __future__ import annotations

import numpy as np
import tilelang
import tilelang.language as T
from tilelang.testing import to_kernel_device, to_numpy


@tilelang.jit(out_idx=[-1])
def elementwise_add(M, N, block_M=64, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            for i, j in T.Parallel(block_M, N):
                if bx * block_M + i < M:
                    C[bx * block_M + i, j] = A[bx * block_M + i, j] + B[bx * block_M + i, j]

    return main


def run(M: int = 1000, N: int = 256) -> str:
    kernel = elementwise_add(M, N)
    a = np.random.rand(M, N).astype("float32")
    b = np.random.rand(M, N).astype("float32")
    out = kernel(*to_kernel_device(kernel, a, b))
    np.testing.assert_allclose(to_numpy(out), a + b, rtol=1e-6)
    return kernel.describe()


if __name__ == "__main__":
    print(run())
