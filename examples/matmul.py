"""Tiled matmul with shared-memory tiles and a per-block accumulator.

(Tile operations — T.copy, T.gemm, T.Pipelined — arrive with the tile-programming work;
this version spells the tiling out with T.Parallel loops.)
"""

from __future__ import annotations

import numpy as np

import tilelang
import tilelang.language as T
from tilelang.testing import to_kernel_device, to_numpy


@tilelang.jit(out_idx=[-1])
def matmul(M, N, K, bM=64, bN=64, bK=32, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
            As = T.alloc_shared((bM, bK), dtype)
            Bs = T.alloc_shared((bK, bN), dtype)
            Cl = T.alloc_local((bM, bN), dtype)
            for i, j in T.Parallel(bM, bN):
                Cl[i, j] = 0.0
            for ko in T.serial(T.ceildiv(K, bK)):
                for i, k in T.Parallel(bM, bK):
                    As[i, k] = T.if_then_else(
                        by * bM + i < M and ko * bK + k < K, A[by * bM + i, ko * bK + k], T.cast(0, dtype)
                    )
                for k, j in T.Parallel(bK, bN):
                    Bs[k, j] = T.if_then_else(
                        ko * bK + k < K and bx * bN + j < N, B[ko * bK + k, bx * bN + j], T.cast(0, dtype)
                    )
                for i, k, j in T.grid(bM, bK, bN):
                    Cl[i, j] += As[i, k] * Bs[k, j]
            for i, j in T.Parallel(bM, bN):
                if by * bM + i < M and bx * bN + j < N:
                    C[by * bM + i, bx * bN + j] = Cl[i, j]

    return main


def run(M: int = 256, N: int = 256, K: int = 256) -> str:
    kernel = matmul(M, N, K)
    a = np.random.rand(M, K).astype("float32")
    b = np.random.rand(K, N).astype("float32")
    out = kernel(*to_kernel_device(kernel, a, b))
    np.testing.assert_allclose(to_numpy(out), a @ b, rtol=1e-4, atol=1e-4)
    return kernel.describe()


if __name__ == "__main__":
    print(run())
