"""Upstream TileLang's examples/warp_specialize GEMMs, written as classic builders: kernels
that schedule themselves with their own warp roles and mbarriers (``T.ws``, ``T.tma_copy``,
``T.alloc_barrier``). The tests of the CUDA backend lower and run them; benchmarks/matmul.py
times them."""

from __future__ import annotations

import tilelang.language as T


def copy_gemm_roles(M, N, K, producer=0, consumer=1, stages=0, bM=128, bN=128, bK=64, dtype="float16"):
    """example_warp_specialize_gemm_copy_0_gemm_1 (producer 0, consumer 1) and _copy_1_gemm_0
    / _softpipe_stage2 (producer 1, consumer 0, T.Pipelined with 2 stages): one producer
    warpgroup loads A and B with TMA, one consumer warpgroup multiplies, two barriers."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=256) as (bx, by):
            A_shared = T.alloc_shared((bM, bK), dtype)
            B_shared = T.alloc_shared((bK, bN), dtype)
            C_local = T.alloc_fragment((bM, bN), "float32")
            data_is_ready = T.alloc_barrier(arrive_count=128)
            compute_is_done = T.alloc_barrier(arrive_count=128)
            with T.ws(consumer):
                T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, bK), num_stages=stages):
                with T.ws(producer):
                    T.barrier_wait(compute_is_done, (ko + 1) % 2)
                    T.tma_copy(A[by * bM, ko * bK], A_shared, barrier=data_is_ready)
                    T.tma_copy(B[ko * bK, bx * bN], B_shared, barrier=data_is_ready)
                    T.barrier_arrive(data_is_ready)
                with T.ws(consumer):
                    T.barrier_wait(data_is_ready, ko % 2)
                    T.gemm(A_shared, B_shared, C_local)
                    T.barrier_arrive(compute_is_done)
            with T.ws(consumer):
                T.copy(C_local, C[by * bM, bx * bN])

    return main


def barrier_pipe(M, N, K, stages=2, bM=128, bN=128, bK=64, dtype="float16"):
    """example_warp_specialize_gemm_barrierpipe_stage2: a ring of ``stages`` tiles, full
    barriers [0, stages) and empty barriers [stages, 2 stages) in one array."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=256) as (bx, by):
            A_shared = T.alloc_shared((stages, bM, bK), dtype)
            B_shared = T.alloc_shared((stages, bK, bN), dtype)
            C_local = T.alloc_fragment((bM, bN), "float32")
            mbars = T.alloc_barrier([128, 128] * stages)
            with T.ws(0):
                T.clear(C_local)
            for ko in range(T.ceildiv(K, bK)):
                with T.ws(1):
                    T.mbarrier_wait_parity(mbarrier=mbars[ko % stages + stages],
                                           parity=((ko // stages) % stages) ^ 1)
                    T.tma_copy(A[by * bM:(by + 1) * bM, ko * bK:(ko + 1) * bK], A_shared[ko % stages, :, :],
                               barrier=mbars[ko % stages])
                    T.tma_copy(B[ko * bK:(ko + 1) * bK, bx * bN:(bx + 1) * bN], B_shared[ko % stages, :, :],
                               barrier=mbars[ko % stages])
                    T.mbarrier_arrive(mbarrier=mbars[ko % stages])
                with T.ws(0):
                    T.mbarrier_wait_parity(mbarrier=mbars[ko % stages], parity=(ko // stages) % stages)
                    T.gemm(A_shared[ko % stages, :, :], B_shared[ko % stages, :, :], C_local)
                    T.mbarrier_arrive(mbarrier=mbars[ko % stages + stages])
            with T.ws(0):
                T.copy(C_local, C[by * bM, bx * bN])

    return main


def copy_gemm_split(M, N, K, bM=128, bN=128, bK=64, dtype="float16"):
    """example_warp_specialize_gemm_copy_gemm_0_1: the block copies A, each warpgroup copies
    its half of B and multiplies into its own accumulator (no explicit barriers)."""
    half = bN // 2

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=256) as (bx, by):
            A_shared = T.alloc_shared((bM, bK), dtype, "shared")
            B_shared_g0 = T.alloc_shared((bK, half), dtype, "shared")
            B_shared_g1 = T.alloc_shared((bK, half), dtype, "shared")
            C_local_g0 = T.alloc_fragment((bM, half), "float32")
            C_local_g1 = T.alloc_fragment((bM, half), "float32")
            with T.ws(1):
                T.clear(C_local_g1)
            with T.ws(0):
                T.clear(C_local_g0)
            for ko in T.Pipelined(T.ceildiv(K, bK), num_stages=0):
                T.copy(A[by * bM, ko * bK], A_shared)
                with T.ws(1):
                    T.copy(B[ko * bK, bx * bN], B_shared_g1)
                    T.gemm(A_shared, B_shared_g1, C_local_g1)
                with T.ws(0):
                    T.copy(B[ko * bK, bx * bN + half], B_shared_g0)
                    T.gemm(A_shared, B_shared_g0, C_local_g0)
            with T.ws(1):
                T.copy(C_local_g1, C[by * bM, bx * bN])
            with T.ws(0):
                T.copy(C_local_g0, C[by * bM, bx * bN + half])

    return main


__all__ = ["barrier_pipe", "copy_gemm_roles", "copy_gemm_split"]
