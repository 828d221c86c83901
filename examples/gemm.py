"""GEMM with tile operations (fp16 in, fp32 accumulation) in the classic style, which
keeps working beside the eager one the other examples use: ``@tilelang.jit(out_idx=[-1])``
on a builder that takes the sizes and returns a ``T.prim_func``; calling the builder gives
the compiled kernel. Runs on the best available backend."""

from __future__ import annotations

import numpy as np
import tilelang
import tilelang.language as T
from tilelang.testing import to_kernel_device, to_numpy


@tilelang.jit(out_idx=[-1])
def matmul(M, N, K, bM=128, bN=128, bK=32, threads=128, num_stages=3, panel=0, dtype="float16",
           accum_dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=threads) as (bx, by):
            As = T.alloc_shared((bM, bK), dtype)
            Bs = T.alloc_shared((bK, bN), dtype)
            Cl = T.alloc_fragment((bM, bN), accum_dtype)
            T.use_swizzle(max(panel, 1), enable=panel > 0)  # blocks in panels sharing L2 tiles
            T.clear(Cl)
            for k in T.Pipelined(T.ceildiv(K, bK), num_stages=num_stages):
                T.copy(A[by * bM, k * bK], As)
                T.copy(B[k * bK, bx * bN], Bs)
                T.gemm(As, Bs, Cl)
            T.copy(Cl, C[by * bM, bx * bN])

    return main


def run(M: int = 256, N: int = 256, K: int = 128, bM: int = 64, bN: int = 64, bK: int = 32) -> str:
    kernel = matmul(M, N, K, bM, bN, bK)
    a = np.random.randn(M, K).astype("float16")
    b = np.random.randn(K, N).astype("float16")
    out = to_numpy(kernel(*to_kernel_device(kernel, a, b))).astype("float32")
    expected = a.astype("float32") @ b.astype("float32")
    np.testing.assert_allclose(out, expected, rtol=1e-2, atol=5e-2)  # fp16 output rounding
    return kernel.describe()


if __name__ == "__main__":
    print(run())
