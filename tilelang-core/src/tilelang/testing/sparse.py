"""Testing kit for ``T.gemm_sp``: a 2:4 sparse GEMM kernel in upstream's four operand forms
(A and B from shared memory or fragments), semi-sparse inputs and a compressor written
from the metadata format (tilelang.language.gemm_sp), in numpy."""

from __future__ import annotations

from typing import Any

import numpy as np

import tilelang.language as T
from tilelang.plugin import sparse_e_factor, sparse_group


def sparse_gemm(M: int, N: int, K: int, bM: int, bN: int, bK: int, trans_a: bool = False, trans_b: bool = False,
                dtype: str = "float16", accum: str = "float32", meta: str = "int16", stages: int = 2,
                threads: int = 128, a_frag: bool = False, b_frag: bool = False) -> Any:
    """C = A @ B (op(A), op(B) as the transposes say) with A given compressed: A_sparse,
    E (both transposed with A), B, C -- upstream's test_tilelang_tilelibrary_gemm_sp form."""
    factor = sparse_e_factor(dtype, meta)
    a_shape, as_shape = ((K // 2, M), (bK // 2, bM)) if trans_a else ((M, K // 2), (bM, bK // 2))
    e_shape, es_shape = ((K // factor, M), (bK // factor, bM)) if trans_a else ((M, K // factor), (bM, bK // factor))
    b_shape, bs_shape = ((N, K), (bN, bK)) if trans_b else ((K, N), (bK, bN))

    @T.prim_func
    def main(A_sparse: T.Tensor(a_shape, dtype), E: T.Tensor(e_shape, meta), B: T.Tensor(b_shape, dtype),
             C: T.Tensor((M, N), accum)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=threads) as (bx, by):
            A_s = T.alloc_shared(as_shape, dtype)
            E_s = T.alloc_shared(es_shape, meta)
            B_s = T.alloc_shared(bs_shape, dtype)
            A_f = T.alloc_fragment(as_shape, dtype)
            B_f = T.alloc_fragment(bs_shape, dtype)
            C_f = T.alloc_fragment((bM, bN), accum)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, bK), num_stages=stages):
                if trans_a:
                    T.copy(E[k * bK // factor, by * bM], E_s)
                    T.copy(A_sparse[k * bK // 2, by * bM], A_s)
                else:
                    T.copy(E[by * bM, k * bK // factor], E_s)
                    T.copy(A_sparse[by * bM, k * bK // 2], A_s)
                if trans_b:
                    T.copy(B[bx * bN, k * bK], B_s)
                else:
                    T.copy(B[k * bK, bx * bN], B_s)
                if a_frag:
                    T.copy(A_s, A_f)
                if b_frag:
                    T.copy(B_s, B_f)
                T.gemm_sp(A_f if a_frag else A_s, E_s, B_f if b_frag else B_s, C_f, trans_a, trans_a, trans_b)
            T.copy(C_f, C[by * bM, bx * bN])

    return main


def semi_sparse(rng: np.random.Generator, M: int, K: int, dtype: str = "float16") -> np.ndarray:
    """An (M, K) array (float32 values exact in ``dtype``) with at most ``nonzeros`` nonzero
    values in each group of ``group`` along K, at random positions; some groups keep fewer."""
    nonzeros, group = sparse_group(dtype)
    values = rng.integers(-3, 4, (M, K)).astype(np.float32) if "int" in dtype else rng.standard_normal((M, K))
    values = values.astype(np.float32).reshape(M, K // group, group)
    order = np.argsort(rng.random(values.shape), axis=-1)
    np.put_along_axis(values, order[..., nonzeros:], 0, axis=-1)
    fewer = rng.random(values.shape[:2] + (1,)) < 0.1  # a tenth of the groups keep one value fewer
    first = np.take_along_axis(values, order[..., :1], axis=-1)
    np.put_along_axis(values, order[..., :1], np.where(fewer, 0, first), axis=-1)
    return values.reshape(M, K)


def compress(dense: np.ndarray, dtype: str, meta: str) -> tuple[np.ndarray, np.ndarray]:
    """(A_sparse, E) of an (M, K) semi-sparse array: the kept values of each group in order
    (zeros where a group keeps fewer), and per group a 4-bit chunk -- bits 1:0 the position of
    the first kept value, bits 3:2 of the second (16-bit halves for 32-bit types) -- packed
    lowest first into ``meta`` integers of ``sparse_e_factor(dtype, meta)`` elements each."""
    nonzeros, group = sparse_group(dtype)
    M, K = dense.shape
    factor = sparse_e_factor(dtype, meta)
    bits = np.dtype(meta).itemsize * 8
    sparse = np.zeros((M, K // 2), dense.dtype)
    words = np.zeros((M, K // factor), np.int64)
    for m in range(M):
        for g in range(K // group):
            kept = [p for p in range(group) if dense[m, g * group + p] != 0]
            kept += [p for p in range(group) if p not in kept][:nonzeros - len(kept)]
            kept = sorted(kept[:nonzeros])
            for slot, p in enumerate(kept):
                sparse[m, g * nonzeros + slot] = dense[m, g * group + p]
            halves = [2 * p for p in kept] + [2 * p + 1 for p in kept] if nonzeros == 1 else kept
            chunk = halves[0] | (halves[1] << 2)
            words[m, g * group // factor] |= chunk << (4 * ((g * group % factor) // group))
    words = np.where(words >= 1 << (bits - 1), words - (1 << bits), words) if meta.startswith("int") else words
    return sparse, words.astype(meta)
