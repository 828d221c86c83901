"""Lowering patterns from upstream TileLang's examples, run on the CPU against numpy: each
kernel is a small one of our own with the same shape of code (the CUDA side of the same
patterns is tilelang-cuda's tests/test_cuda_lowering_patterns.py)."""

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


def test_a_global_workspace_carries_partial_results_between_two_kernels():
    rows, cols, splits = 4, 64, 2
    part = cols // splits

    @T.prim_func
    def split_row_sum(A: T.Tensor((rows, cols), T.float32), Out: T.Tensor((rows,), T.float32)):
        partial = T.alloc_global((rows, splits), T.float32)
        with T.Kernel(rows, splits, threads=32) as (bx, by):
            tile = T.alloc_fragment((part,), T.float32)
            total = T.alloc_fragment((1,), T.float32)
            T.copy(A[bx, by * part:(by + 1) * part], tile)
            T.reduce_sum(tile, total, dim=0)
            partial[bx, by] = total[0]
        with T.Kernel(rows, threads=32) as bx:
            acc = T.alloc_local((1,), T.float32)
            acc[0] = 0
            for s in T.serial(splits):
                acc[0] += partial[bx, s]
            Out[bx] = acc[0]

    kernel = tilelang.compile(split_row_sum, target="cpu")
    a = np.random.default_rng(1).standard_normal((rows, cols)).astype("float32")
    out = np.zeros(rows, "float32")
    kernel(a, out)
    np.testing.assert_allclose(out, a.sum(axis=1), rtol=1e-5, atol=1e-5)


def flat_views_kernel():
    """Upstream's convolution sees its 4-D weight and output as matrices with
    ``T.Tensor(shape, dtype, X.data)`` inside the kernel."""

    @T.prim_func
    def scale_flat(W: T.Tensor((2, 4, 8), T.float32), Out: T.Tensor((2, 4, 8), T.float32)):
        with T.Kernel(2, threads=32) as bx:
            w_flat = T.Tensor((8, 8), T.float32, W.data)
            out_flat = T.Tensor((8, 8), T.float32, Out.data)
            tile = T.alloc_shared((4, 8), T.float32)
            T.copy(w_flat[bx * 4, 0], tile)
            for i, j in T.Parallel(4, 8):
                out_flat[bx * 4 + i, j] = tile[i, j] * 2.0 + i

    return scale_flat


def test_a_tensor_over_a_parameters_data_is_a_view_of_it():
    kernel = tilelang.compile(flat_views_kernel(), target="cpu")
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
