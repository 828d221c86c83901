"""Flash-attention forward (online softmax over key blocks), written as upstream TileLang
writes it: tile copies, two GEMMs (one with B transposed), row reductions."""

from __future__ import annotations

import math

import numpy as np
import tilelang
import tilelang.language as T
from tilelang.testing import to_kernel_device, to_numpy


@tilelang.jit
def flashattn(Q, K, V, block_M=64, block_N=64, threads=128, num_stages=2):
    batch, seq_len, heads, dim = T.const("batch, seq_len, heads, dim")
    shape = [batch, seq_len, heads, dim]
    dtype, accum_dtype = T.float16, T.float32
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # log2(e): exp(x) = exp2(x * log2(e))
    Q: T.Tensor(shape, dtype)
    K: T.Tensor(shape, dtype)
    V: T.Tensor(shape, dtype)
    Output = T.empty(shape, dtype)

    with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
        Q_shared = T.alloc_shared([block_M, dim], dtype)
        K_shared = T.alloc_shared([block_N, dim], dtype)
        V_shared = T.alloc_shared([block_N, dim], dtype)
        acc_s = T.alloc_fragment([block_M, block_N], accum_dtype)
        acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
        acc_o = T.alloc_fragment([block_M, dim], accum_dtype)
        scores_max = T.alloc_fragment([block_M], accum_dtype)
        scores_max_prev = T.alloc_fragment([block_M], accum_dtype)
        scores_scale = T.alloc_fragment([block_M], accum_dtype)
        scores_sum = T.alloc_fragment([block_M], accum_dtype)
        logsum = T.alloc_fragment([block_M], accum_dtype)

        T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_shared)
        T.fill(acc_o, 0)
        T.fill(logsum, 0)
        T.fill(scores_max, -T.infinity(accum_dtype))
        for k in T.Pipelined(T.ceildiv(seq_len, block_N), num_stages=num_stages):
            T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], K_shared)
            T.clear(acc_s)
            T.gemm(Q_shared, K_shared, acc_s, transpose_B=True)
            T.copy(scores_max, scores_max_prev)
            T.reduce_max(acc_s, scores_max, dim=1, clear=False)
            for i in T.Parallel(block_M):
                scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] *= scores_scale[i]
            for i, j in T.Parallel(block_M, block_N):
                acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
            T.copy(acc_s, acc_s_cast)
            T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], V_shared)
            T.gemm(acc_s_cast, V_shared, acc_o)
            T.reduce_sum(acc_s, scores_sum, dim=1)
            for i in T.Parallel(block_M):
                logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
        for i, j in T.Parallel(block_M, dim):
            acc_o[i, j] /= logsum[i]
        T.copy(acc_o, Output[bz, bx * block_M:(bx + 1) * block_M, by, :])

    return Output


def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """softmax(Q K^T / sqrt(d)) V per (batch, head), in float32 ([batch, seq, heads, dim])."""
    q, k, v = (x.astype("float32").transpose(0, 2, 1, 3) for x in (q, k, v))
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1])
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return (p @ v).transpose(0, 2, 1, 3)


def run(batch: int = 1, heads: int = 2, seq_len: int = 128, dim: int = 64) -> str:
    kernel = flashattn.compile(batch=batch, seq_len=seq_len, heads=heads, dim=dim)
    q, k, v = (np.random.randn(batch, seq_len, heads, dim).astype("float16") for _ in range(3))
    out = to_numpy(flashattn(*to_kernel_device(kernel, q, k, v))).astype("float32")
    np.testing.assert_allclose(out, reference(q, k, v), rtol=2e-2, atol=2e-2)
    return kernel.describe()


if __name__ == "__main__":
    print(run())
