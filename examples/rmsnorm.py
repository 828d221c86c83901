"""RMSNorm over the rows of a matrix: y = x / sqrt(mean(x^2) + eps), with tile ops, in
upstream TileLang's eager style."""

from __future__ import annotations

import numpy as np
import tilelang
import tilelang.language as T
from tilelang.testing import to_kernel_device, to_numpy


@tilelang.jit
def rmsnorm(X, block_M=8, eps=1e-6, dtype=T.float32):
    M, N = T.const("M, N")
    X: T.Tensor((M, N), dtype)
    Y = T.empty((M, N), dtype)

    with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
        x = T.alloc_shared((block_M, N), dtype)
        sq = T.alloc_fragment((block_M, N), T.float32)
        ms = T.alloc_fragment((block_M,), T.float32)
        T.copy(X[bx * block_M, 0], x)
        for i, j in T.Parallel(block_M, N):
            sq[i, j] = x[i, j] * x[i, j]
        T.reduce_sum(sq, ms, dim=1)
        for i in T.Parallel(block_M):
            ms[i] = T.rsqrt(ms[i] / N + eps)
        for i, j in T.Parallel(block_M, N):
            sq[i, j] = x[i, j] * ms[i]
        T.copy(sq, Y[bx * block_M, 0])

    return Y


def reference(x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps)


def run(M: int = 100, N: int = 256) -> str:
    kernel = rmsnorm.compile(M=M, N=N)
    x = np.random.randn(M, N).astype("float32")
    out = to_numpy(rmsnorm(*to_kernel_device(kernel, x)))
    np.testing.assert_allclose(out, reference(x), rtol=1e-4, atol=1e-5)
    return kernel.describe()


if __name__ == "__main__":
    print(run())
