"""Lowering patterns from upstream TileLang's examples, run on the CPU against numpy: each
kernel is a small one of our own with the same shape of code (the CUDA side of the same
patterns is tilelang-cuda's tests/test_cuda_lowering_patterns.py)."""

from __future__ import annotations

import numpy as np
import tilelang
import tilelang.language as T
from tilelang.testing.kernels import flat_views, masked_block_sum, split_row_sum


def test_a_bool_mask_compared_with_zero_selects_blocks():
    # `if mask[k] != 0` on a bool buffer: TVM's LLVM codegen compares non-integers with
    # fcmp, which its verifier rejects for i1; the comparison is widened to int8
    n_blocks, block, cols = 4, 16, 8

    kernel = tilelang.compile(masked_block_sum(n_blocks, block, cols, threads=32), target="cpu")
    rng = np.random.default_rng(0)
    mask = np.array([True, False, True, True])
    a = rng.standard_normal((n_blocks * block, cols)).astype("float32")
    out = np.zeros((block, cols), "float32")
    kernel(mask, a, out)
    expected = sum(a[k * block:(k + 1) * block][::-1] for k in range(n_blocks) if mask[k])
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_a_global_workspace_carries_partial_results_between_two_kernels():
    rows, cols, splits = 4, 64, 2
    kernel = tilelang.compile(split_row_sum(rows, cols, splits), target="cpu")
    a = np.random.default_rng(1).standard_normal((rows, cols)).astype("float32")
    out = np.zeros(rows, "float32")
    kernel(a, out)
    np.testing.assert_allclose(out, a.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_a_tensor_over_a_parameters_data_is_a_view_of_it():
    kernel = tilelang.compile(flat_views(), target="cpu")
    w = np.random.default_rng(2).standard_normal((2, 4, 8)).astype("float32")
    out = np.zeros_like(w)
    kernel(w, out)
    expected = w.reshape(8, 8) * 2.0 + np.tile(np.arange(4, dtype="float32"), 2)[:, None]
    np.testing.assert_allclose(out.reshape(8, 8), expected, rtol=1e-6, atol=1e-6)



def test_fill_of_one_element_sets_only_that_element():
    # upstream's topk selector resets a shared counter with T.fill(s_num_input[0], 0)
    @T.prim_func
    def reset_first(A: T.Tensor((4,), T.int32), Out: T.Tensor((4,), T.int32)):
        with T.Kernel(1, threads=4) as bx:
            counters = T.alloc_shared([4], T.int32)
            T.copy(A, counters)
            T.fill(counters[1], 7)
            T.copy(counters, Out)

    kernel = tilelang.compile(reset_first, target="cpu")
    out = np.zeros(4, "int32")
    kernel(np.array([1, 2, 3, 4], "int32"), out)
    np.testing.assert_array_equal(out, [1, 7, 3, 4])
