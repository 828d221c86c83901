"""Lowering patterns from upstream TileLang's examples, run on the CPU against numpy: each
kernel is a small one of our own with the same shape of code (the CUDA side of the same
patterns is tilelang-cuda's tests/test_lowering_patterns.py)."""

from __future__ import annotations

import numpy as np
import tilelang
import tilelang.language as T


def test_a_bool_mask_compared_with_zero_selects_blocks():
    # `if mask[k] != 0` on a bool buffer: TVM's LLVM codegen compares non-integers with
    # fcmp, which its verifier rejects for i1; the comparison is widened to int8
    n_blocks, block, cols = 4, 16, 8

    @T.prim_func
    def masked_block_sum(Mask: T.Tensor((n_blocks,), T.bool), A: T.Tensor((n_blocks * block, cols), T.float32),
                         Out: T.Tensor((block, cols), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            mask = T.alloc_fragment([n_blocks], T.bool)
            tile = T.alloc_shared([block, cols], T.float32)
            acc = T.alloc_fragment([block, cols], T.float32)
            T.copy(Mask, mask)
            T.clear(acc)
            for k in T.Pipelined(n_blocks, num_stages=1):
                if mask[k] != 0:
                    T.copy(A[k * block:(k + 1) * block, :], tile)
                    for i, j in T.Parallel(block, cols):
                        acc[i, j] += tile[block - 1 - i, j]
            T.copy(acc, Out)

    kernel = tilelang.compile(masked_block_sum, target="cpu")
    rng = np.random.default_rng(0)
    mask = np.array([True, False, True, True])
    a = rng.standard_normal((n_blocks * block, cols)).astype("float32")
    out = np.zeros((block, cols), "float32")
    kernel(mask, a, out)
    expected = sum(a[k * block:(k + 1) * block][::-1] for k in range(n_blocks) if mask[k])
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
