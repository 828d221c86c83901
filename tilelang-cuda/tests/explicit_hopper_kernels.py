"""Upstream TileLang's warp-specialized kernels, written as classic builders: the same
statements, for the lowering, nvcc and GPU tests of test_explicit_hopper.py. The
examples/warp_specialize GEMMs live in the testing kit (tilelang.testing.warp_specialized),
which benchmarks/matmul.py times too."""

from __future__ import annotations

import tilelang.language as T
from tilelang.testing.warp_specialized import (
    barrier_pipe,
    copy_gemm_roles,
    copy_gemm_split,
)

__all__ = ["barrier_pipe", "copy_gemm_roles", "copy_gemm_split", "flashmla_roles", "wide_row_tma"]


def flashmla_roles(batch=2, heads=64, kv_len=256, dim=128, pe=64, block_n=64, stages=2):
    """Upstream's FlashMLA decode kernels (examples/deepseek_mla/example_mla_decode_ws.py,
    deepseek_v32/sparse_mla_fwd_pipelined.py) in small: three warp roles written as ifs,
    no T.ws. Consumer 0 computes S = [Q, Q_pe] [KV, K_pe]^T with T.wgmma_gemm on column
    slices, the softmax, and the left half of O = P KV; consumer 1 the right half, with
    the rescale handed over in shared memory; the producer fills a 2-stage KV ring with
    T.ptx_cp_async and arrives with T.cp_async_barrier_noinc. Q comes by T.tma_copy."""
    scale = (dim + pe) ** -0.5 * 1.44269504
    half = dim // 2

    @T.prim_func
    def main(Q: T.Tensor((batch, heads, dim), "float16"), Q_pe: T.Tensor((batch, heads, pe), "float16"),
             KV: T.Tensor((batch, kv_len, dim), "float16"), K_pe: T.Tensor((batch, kv_len, pe), "float16"),
             O: T.Tensor((batch, heads, dim), "float32")):
        with T.Kernel(batch, threads=384) as bid:
            q_s = T.alloc_shared((heads, dim), "float16")
            qpe_s = T.alloc_shared((heads, pe), "float16")
            kv_s = T.alloc_shared((stages, block_n, dim), "float16")
            kpe_s = T.alloc_shared((stages, block_n, pe), "float16")
            p_s = T.alloc_shared((heads, block_n), "float16")
            alpha_s = T.alloc_shared((heads,), "float32")
            l_s = T.alloc_shared((heads,), "float32")
            acc_s = T.alloc_fragment((heads, block_n), "float32")
            acc_l = T.alloc_fragment((heads, half), "float32")
            acc_r = T.alloc_fragment((heads, half), "float32")
            m_i = T.alloc_fragment((heads,), "float32")
            m_prev = T.alloc_fragment((heads,), "float32")
            l_i = T.alloc_fragment((heads,), "float32")
            l_step = T.alloc_fragment((heads,), "float32")
            alpha = T.alloc_fragment((heads,), "float32")
            bar_q = T.alloc_barrier(arrive_count=384)
            ready = T.alloc_barrier(arrive_count=[128] * stages)
            free = T.alloc_barrier(arrive_count=[256] * stages)
            p_ready = T.alloc_barrier(arrive_count=256)
            p_free = T.alloc_barrier(arrive_count=256)
            done = T.alloc_barrier(arrive_count=128)
            tx = T.get_thread_binding()
            T.tma_copy(Q[bid, :, :], q_s, barrier=bar_q)
            T.tma_copy(Q_pe[bid, :, :], qpe_s, barrier=bar_q)
            T.barrier_arrive(bar_q)
            if tx < 128:
                T.fill(l_i, 0)
                T.fill(m_i, -(2**30))
                T.fill(acc_l, 0)
                T.barrier_wait(bar_q, 0)
                for it in T.serial(kv_len // block_n // stages):
                    for st in T.unroll(stages):
                        T.barrier_wait(ready[st], it & 1)
                        T.clear(acc_s)
                        T.wgmma_gemm(q_s[:, 0:half], kv_s[st, :, 0:half], acc_s, transpose_B=True)
                        T.wgmma_gemm(q_s[:, half:dim], kv_s[st, :, half:dim], acc_s, transpose_B=True)
                        T.wgmma_gemm(qpe_s, kpe_s[st, :, :], acc_s, transpose_B=True)
                        T.wait_wgmma(0)
                        if it != 0 or st != 0:
                            T.barrier_arrive(p_free)
                            T.barrier_wait(p_free, ((it * stages + st) & 1) ^ 1)
                        T.copy(m_i, m_prev)
                        T.reduce_max(acc_s, m_i, dim=1, clear=False)
                        for h in T.Parallel(heads):
                            alpha[h] = T.exp2((m_prev[h] - m_i[h]) * scale)
                        for h, j in T.Parallel(heads, block_n):
                            acc_s[h, j] = T.exp2(acc_s[h, j] * scale - m_i[h] * scale)
                        T.reduce_sum(acc_s, l_step, dim=1)
                        for h in T.Parallel(heads):
                            l_i[h] = l_i[h] * alpha[h] + l_step[h]
                        for h, d in T.Parallel(heads, half):
                            acc_l[h, d] *= alpha[h]
                        T.copy(alpha, alpha_s)
                        T.copy(acc_s, p_s)
                        T.gemm(p_s, kv_s[st, :, 0:half], acc_l)
                        T.barrier_arrive(p_ready)
                        T.barrier_arrive(free[st])
                for h in T.Parallel(heads):
                    l_s[h] = l_i[h]
                T.barrier_arrive(done)
                for h, d in T.Parallel(heads, half):
                    acc_l[h, d] /= l_i[h]
                T.copy(acc_l, O[bid, :, 0:half])
            elif tx >= 128 and tx < 256:
                T.fill(acc_r, 0)
                for it in T.serial(kv_len // block_n // stages):
                    for st in T.unroll(stages):
                        T.barrier_arrive(p_ready)
                        T.barrier_wait(p_ready, (it * stages + st) & 1)
                        for h, d in T.Parallel(heads, half):
                            acc_r[h, d] *= alpha_s[h]
                        T.gemm(p_s, kv_s[st, :, half:dim], acc_r)
                        T.barrier_arrive(free[st])
                        if st != stages - 1 or it != kv_len // block_n // stages - 1:
                            T.barrier_arrive(p_free)
                T.barrier_wait(done, 0)
                for h, d in T.Parallel(heads, half):
                    acc_r[h, d] /= l_s[h]
                T.copy(acc_r, O[bid, :, half:dim])
            elif tx >= 256:
                for it in T.serial(kv_len // block_n // stages):
                    for st in T.unroll(stages):
                        T.barrier_wait(free[st], (it & 1) ^ 1)
                        for r in T.serial(block_n // 16):
                            row = r * 16 + (tx - 256) // 8
                            key = (it * stages + st) * block_n + row
                            for u in T.serial(dim // 64):
                                T.ptx_cp_async(T.access_ptr(kv_s[st, row, 64 * u + (tx - 256) % 8 * 8], "w", 8),
                                               T.access_ptr(KV[bid, key, 64 * u + (tx - 256) % 8 * 8], "r", 8), 8)
                            T.ptx_cp_async(T.access_ptr(kpe_s[st, row, (tx - 256) % 8 * 8], "w", 8),
                                           T.access_ptr(K_pe[bid, key, (tx - 256) % 8 * 8], "r", 8), 8)
                        T.cp_async_barrier_noinc(ready[st])

    return main


def wide_row_tma(rows=64, width=576):
    """T.tma_copy of tiles whose rows are wider than a TMA box dimension (256 elements):
    FlashMLA's Q, 64 x 576 bf16."""

    @T.prim_func
    def main(A: T.Tensor((2, rows, width), "bfloat16"), B: T.Tensor((2, rows, width), "bfloat16")):
        with T.Kernel(2, threads=128) as bx:
            a_s = T.alloc_shared((rows, width), "bfloat16")
            bar = T.alloc_barrier(arrive_count=128)
            T.tma_copy(A[bx, :, :], a_s, barrier=bar)
            T.barrier_arrive(bar)
            T.barrier_wait(bar, 0)
            T.copy(a_s, B[bx, :, :])

    return main


def column_slice_tma(rows=64, width=256, piece=64):
    """T.tma_copy into column slices of a shared tile (upstream's FlashMLA roles fill
    ``KV_shared[:, j * 64:(j + 1) * 64]`` on barrier j), and into its last rows whole."""

    @T.prim_func
    def main(A: T.Tensor((2, rows, width), "float16"), B: T.Tensor((2, rows, width), "float16")):
        with T.Kernel(2, threads=128) as bx:
            a_s = T.alloc_shared((rows, width), "float16")
            bars = T.alloc_barrier([128] * (width // piece + 1))
            for j in T.unroll(width // piece):
                T.tma_copy(A[bx, 0:rows // 2, j * piece:(j + 1) * piece],
                           a_s[0:rows // 2, j * piece:(j + 1) * piece], barrier=bars[j])
            T.tma_copy(A[bx, rows // 2:rows, :], a_s[rows // 2:rows, :], barrier=bars[width // piece])
            for j in T.unroll(width // piece + 1):
                T.barrier_arrive(bars[j])
                T.barrier_wait(bars[j], 0)
            T.copy(a_s, B[bx, :, :])

    return main
