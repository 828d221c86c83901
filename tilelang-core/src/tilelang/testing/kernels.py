"""Kernels used by several tests, written as upstream TileLang spells them."""

from __future__ import annotations

import tilelang.language as T


def elementwise_add(M, N, block_M=32, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            for i, j in T.Parallel(block_M, N):
                if bx * block_M + i < M:
                    C[bx * block_M + i, j] = A[bx * block_M + i, j] + B[bx * block_M + i, j]

    return main


def row_softmax_sum(N, M=None, block=16):
    """S[i] = scale * sum_j exp(A[i, j] - max_j A[i, :]) with a loop reduction per row."""
    M = M if M is not None else T.symbolic("M")

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), scale: T.float32, S: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block)) as bx:
            for i in T.Parallel(block):
                if bx * block + i < M:
                    row_max = T.alloc_local((1,), "float32")
                    acc = T.alloc_local((1,), "float32")
                    row_max[0] = A[bx * block + i, 0]
                    for j in T.serial(1, N):
                        row_max[0] = T.max(row_max[0], A[bx * block + i, j])
                    acc[0] = 0.0
                    for j in T.serial(N):
                        acc[0] += T.exp(A[bx * block + i, j] - row_max[0])
                    S[bx * block + i] = acc[0] * scale

    return main


def tiled_matmul(M, N, K, bM=32, bN=32, bK=16, dtype="float32"):
    """C = A @ B with shared tiles and a local accumulator; edges handled by guards."""

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
                for i, j in T.Parallel(bM, bN):
                    for k in T.unroll(bK):
                        Cl[i, j] += As[i, k] * Bs[k, j]
            for i, j in T.Parallel(bM, bN):
                if by * bM + i < M and bx * bN + j < N:
                    C[by * bM + i, bx * bN + j] = Cl[i, j]

    return main


def saxpy(n, block=64):
    """y = a * x + y in place, with a scalar parameter and vectorized inner loop."""

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32"), a: T.float32):
        with T.Kernel(T.ceildiv(n, block), threads=1) as bx:
            for i in T.vectorized(block):
                if bx * block + i < n:
                    Y[bx * block + i] = a * X[bx * block + i] + Y[bx * block + i]

    return main


def split_k_gemm(M, N, K, splits, bM=64, bN=64, bK=32, dtype="float16"):
    """C += A @ B with K split over the grid's z axis: each block adds its partial C tile
    with one tile-level T.atomic_add (edge tiles included; K a multiple of splits * bK)."""
    chunk = K // splits

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), splits, threads=128) as (bx, by, bz):
            As = T.alloc_shared((bM, bK), dtype)
            Bs = T.alloc_shared((bK, bN), dtype)
            Cl = T.alloc_fragment((bM, bN), "float32")
            T.clear(Cl)
            for k in T.Pipelined(chunk // bK, num_stages=2):
                T.copy(A[by * bM, bz * chunk + k * bK], As)
                T.copy(B[bz * chunk + k * bK, bx * bN], Bs)
                T.gemm(As, Bs, Cl)
            T.atomic_add(C[by * bM, bx * bN], Cl)

    return main


def tile_gemm(M, N, K, bM=32, bN=32, bK=16, trans_a=False, trans_b=False, dtype="float16", stages=2,
              relu=False, threads=128, panel=0):
    """C = op(A) @ op(B) with tile ops, upstream style: transposes, pipeline stages, threads,
    rasterization, and optionally a relu T.Parallel epilogue on the fragment. (The examples'
    GEMM is the same kernel; tests use this one, which an installed wheel has too.)"""
    a_shape, b_shape = ((K, M) if trans_a else (M, K)), ((N, K) if trans_b else (K, N))
    a_tile, b_tile = ((bK, bM) if trans_a else (bM, bK)), ((bN, bK) if trans_b else (bK, bN))

    @T.prim_func
    def main(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=threads) as (bx, by):
            As = T.alloc_shared(a_tile, dtype)
            Bs = T.alloc_shared(b_tile, dtype)
            Cl = T.alloc_fragment((bM, bN), "float32")
            T.use_swizzle(max(panel, 1), enable=panel > 0)
            T.clear(Cl)
            for k in T.Pipelined(T.ceildiv(K, bK), num_stages=stages):
                if trans_a:
                    T.copy(A[k * bK, by * bM], As)
                else:
                    T.copy(A[by * bM, k * bK], As)
                if trans_b:
                    T.copy(B[bx * bN, k * bK], Bs)
                else:
                    T.copy(B[k * bK, bx * bN], Bs)
                T.gemm(As, Bs, Cl, transpose_A=trans_a, transpose_B=trans_b)
            if relu:
                for i, j in T.Parallel(bM, bN):
                    Cl[i, j] = T.max(Cl[i, j], T.float32(0))
            T.copy(Cl, C[by * bM, bx * bN])

    return main
