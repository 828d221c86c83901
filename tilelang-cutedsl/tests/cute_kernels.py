"""Kernels the cutedsl tests compile: what this backend lowers (elementwise, copies, fill,
reductions, the swizzled-shared extension, a GEMM staged through shared memory) and one it
does not (an atomic)."""

from __future__ import annotations

import tilelang.language as T


def tile_copy_scale(M=64, N=64, bM=32, bN=32, dtype="float16"):
    """B = A + 1 through a shared tile and a fragment: T.copy both ways, T.fill, T.Parallel."""

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
            S = T.alloc_shared((bM, bN), dtype)
            F = T.alloc_fragment((bM, bN), "float32")
            T.copy(A[by * bM, bx * bN], S)
            T.fill(F, 1.0)
            for i, j in T.Parallel(bM, bN):
                F[i, j] += S[i, j]
            T.copy(F, B[by * bM, bx * bN])

    return main


def swizzled_transpose(N=64, b=32, dtype="float16"):
    """B = A^T through a shared tile stored swizzled (T.ext.swizzled_shared)."""

    @T.prim_func
    def main(A: T.Tensor((N, N), dtype), B: T.Tensor((N, N), dtype)):
        with T.Kernel(N // b, N // b, threads=128) as (bx, by):
            S = T.alloc_shared((b, b), dtype)
            T.ext.swizzled_shared(S, 3, 3, 3)
            T.copy(A[by * b, bx * b], S)
            for i, j in T.Parallel(b, b):
                B[bx * b + i, by * b + j] = S[j, i]

    return main


def row_sum(M=64, N=128, rows=4):
    """B[i] = sum_j A[i, j]: a shared tile reduced along rows (T.reduce_sum)."""

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M,), "float32")):
        with T.Kernel(M // rows, threads=128) as bx:
            S = T.alloc_shared((rows, N), "float32")
            F = T.alloc_fragment((rows,), "float32")
            T.copy(A[bx * rows, 0], S)
            T.reduce_sum(S, F, dim=1)
            T.copy(F, B[bx * rows])

    return main


def row_max_exp(M=64, N=64, rows=4):
    """B[i, j] = exp(A[i, j] - max_j A[i, :]): a max reduction and math."""

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(M // rows, threads=128) as bx:
            S = T.alloc_shared((rows, N), "float32")
            m = T.alloc_fragment((rows,), "float32")
            T.copy(A[bx * rows, 0], S)
            T.reduce_max(S, m, dim=1)
            for i, j in T.Parallel(rows, N):
                B[bx * rows + i, j] = T.exp(S[i, j] - m[i])

    return main


def row_sum_of_product():
    """S = rowsum(A @ B): a reduction reads the GEMM's accumulator across the MMA layout, so
    the GEMM runs on MMA atoms through shared memory (staged.py), once."""

    @T.prim_func
    def main(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 64), "float16"), S: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128):
            As = T.alloc_shared((64, 32), "float16")
            Bs = T.alloc_shared((32, 64), "float16")
            Cl = T.alloc_fragment((64, 64), "float32")
            Sl = T.alloc_fragment((64,), "float32")
            T.copy(A, As)
            T.copy(B, Bs)
            T.clear(Cl)
            T.gemm(As, Bs, Cl)
            T.reduce_sum(Cl, Sl, dim=1)  # reads across the MMA layout
            T.copy(Sl, S)

    return main


def atomic_sum(N=256):
    """An atomic: cutedsl does not lower it, so it stays on cuda."""

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((1,), "float32")):
        with T.Kernel(N // 128, threads=128) as bx:
            for i in T.Parallel(128):
                T.atomic_add(B[0], A[bx * 128 + i])

    return main
