"""Row softmax with a dynamic number of rows: one kernel serves every batch size
(T.dynamic), while the row length is a compile-time size (T.const)."""

from __future__ import annotations

import numpy as np
import tilelang
import tilelang.language as T
from tilelang.testing import to_kernel_device, to_numpy


@tilelang.jit
def softmax(X, block=8, dtype=T.float32):
    M = T.dynamic("M")  # taken from X at each call; new values do not recompile
    N = T.const("N")
    X: T.Tensor((M, N), dtype)
    Y = T.empty((M, N), dtype)

    with T.Kernel(T.ceildiv(M, block)) as bx:
        for i in T.Parallel(block):
            if bx * block + i < M:
                row_max = T.alloc_local((1,), dtype)
                total = T.alloc_local((1,), dtype)
                row_max[0] = X[bx * block + i, 0]
                for j in T.serial(1, N):
                    row_max[0] = T.max(row_max[0], X[bx * block + i, j])
                total[0] = 0.0
                for j in T.serial(N):
                    Y[bx * block + i, j] = T.exp(X[bx * block + i, j] - row_max[0])
                    total[0] += Y[bx * block + i, j]
                for j in T.serial(N):
                    Y[bx * block + i, j] = Y[bx * block + i, j] / total[0]

    return Y


def reference(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def run(N: int = 128) -> str:
    kernel = softmax.compile(N=N)  # M is dynamic: no value needed
    for rows in (1, 33, 300):
        x = np.random.randn(rows, N).astype("float32")
        out = softmax(*to_kernel_device(kernel, x))
        np.testing.assert_allclose(to_numpy(out), reference(x), rtol=1e-5, atol=1e-6)
    if softmax.compile(N=N) is not kernel:  # every row count above ran the same kernel
        raise AssertionError("softmax recompiled for a new number of rows")
    return kernel.describe()


if __name__ == "__main__":
    print(run())
