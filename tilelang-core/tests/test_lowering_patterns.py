"""Lowering patterns from upstream TileLang's examples, run on the CPU against numpy: each
kernel is a small one of our own with the same shape of code (the CUDA side of the same
patterns is tilelang-cuda's tests/test_cuda_lowering_patterns.py)."""

from __future__ import annotations

import numpy as np
import pytest
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


def _masked_lanes(rows: int, cols: int, lanes: int, rereads: bool):
    """A scalar declared inside a vectorized loop (upstream's attention-sink kernel writes
    ``k_idx = k * block_N + j`` in a T.Parallel body that the GPU backend vectorizes)."""

    @T.prim_func
    def masked(A: T.Tensor((rows, cols), T.float32), B: T.Tensor((rows, cols), T.float32)):
        with T.Kernel(1, threads=1):
            for i in T.serial(rows):
                for jo in T.serial(cols // lanes):
                    for v in T.vectorized(lanes):
                        k_idx = jo * lanes + v
                        if rereads:
                            A[i, k_idx] = A[i, k_idx] + 1.0
                            shifted = A[i, k_idx]
                            B[i, k_idx] = shifted
                        else:
                            B[i, k_idx] = T.if_then_else(i >= k_idx, A[i, k_idx], -1.0)

    return masked


def test_a_scalar_declared_in_a_vectorized_loop_has_one_value_per_lane():
    # VectorizeLoop stored all lanes into the scalar's one element and every lane read the
    # last lane's value: element j was masked with the mask of j + lanes - 1
    rows, cols = 8, 16
    a = np.random.default_rng(3).standard_normal((rows, cols)).astype("float32")
    for lanes in (2, 4):
        kernel = tilelang.compile(_masked_lanes(rows, cols, lanes, rereads=False), target="cpu")
        out = np.zeros_like(a)
        kernel(a, out)
        expected = np.where(np.arange(rows)[:, None] >= np.arange(cols)[None, :], a, -1.0)
        np.testing.assert_array_equal(out, expected)


def test_a_scalar_reading_what_the_loop_writes_keeps_its_order():
    # `shifted = A[i, k]` after a store to A: not replaced by the load (the loop is
    # unrolled instead of vectorized)
    rows, cols = 4, 8
    a = np.random.default_rng(4).standard_normal((rows, cols)).astype("float32")
    kernel = tilelang.compile(_masked_lanes(rows, cols, 4, rereads=True), target="cpu")
    a_run, out = a.copy(), np.zeros_like(a)
    kernel(a_run, out)
    np.testing.assert_allclose(out, a + 1.0, rtol=1e-6)
    np.testing.assert_allclose(a_run, a + 1.0, rtol=1e-6)


def test_a_vectorized_loop_accumulating_into_one_element_adds_every_lane():
    # upstream's B[row] = B[row] + A[row, k] under T.vectorized(K): vectorized, every lane
    # stored to B[row] at once and only the last lane's sum survived
    M, K = 4, 8

    @T.prim_func
    def row_sums(A: T.Tensor((M, K), T.float32), B: T.Tensor((M,), T.float32)):
        with T.Kernel(M, threads=1) as row:
            B[row] = 0.0
            for k in T.vectorized(K):
                B[row] = B[row] + A[row, k]

    a = np.random.default_rng(10).standard_normal((M, K)).astype("float32")
    out = np.zeros(M, "float32")
    tilelang.compile(row_sums, target="cpu")(a, out)
    np.testing.assert_allclose(out, a.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_a_slice_between_two_names_has_the_length_their_values_give():
    # upstream's sparse MLA: H0 = ...; H1 = H0 + 64; T.copy(Q[b, s, H0:H1, :D], Q_shared[:, :D])
    @T.prim_func
    def rows(A: T.Tensor((4, 256, 16), T.float32), B: T.Tensor((4, 256, 16), T.float32)):
        with T.Kernel(4, 2, threads=64) as (bx, by):
            tile = T.alloc_shared((64, 16), T.float32)
            h0 = by * 128 + (bx % 2) * 64
            h1 = h0 + 64
            T.copy(A[bx, h0:h1, :], tile)
            for i, j in T.Parallel(64, 16):
                tile[i, j] = tile[i, j] * 2.0
            T.copy(tile, B[bx, h0:h1, :])

    a = np.random.default_rng(0).standard_normal((4, 256, 16)).astype("float32")
    b = np.zeros_like(a)
    tilelang.compile(rows, target="cpu")(a, b)
    expect = np.zeros_like(a)
    for bx in range(4):
        for by in range(2):
            h0 = by * 128 + (bx % 2) * 64
            expect[bx, h0:h0 + 64] = 2 * a[bx, h0:h0 + 64]
    np.testing.assert_array_equal(b, expect)
    assert tilelang.lower(rows, target={"kind": "cuda", "arch": "sm_90"}).device_source  # lowers for CUDA too


def test_a_slice_between_two_scalars_stored_before_the_copy_has_the_length_their_values_give():
    # upstream's persistent MLA decode: tile_id, bid assigned in two loops are scalars, so is
    # sid (it reads tile_id) and so are kv_start / kv_end; KV[b, kv_start:kv_end] is 8 rows
    @T.prim_func
    def waves(A: T.Tensor((2, 64, 4), T.float32), B: T.Tensor((2, 64, 4), T.float32)):
        with T.Kernel(2, threads=32) as block:
            tile = T.alloc_shared((8, 4), T.float32)
            for w in T.serial(2):
                tile_id = 2 * w + block
                bid = tile_id // 2
                sid = tile_id % 2
                for k in T.serial(4):
                    kv_start = sid * 32 + k * 8
                    kv_end = sid * 32 + (k + 1) * 8
                    T.copy(A[bid, kv_start:kv_end, :], tile)
                    for i, j in T.Parallel(8, 4):
                        tile[i, j] = tile[i, j] + 1.0
                    T.copy(tile, B[bid, kv_start:kv_end, :])
            for w in T.serial(2):
                tile_id = w * 2 + block
                bid = tile_id % 2
                B[bid, 0, 0] = B[bid, 0, 0] * 1.0

    a = np.random.default_rng(1).standard_normal((2, 64, 4)).astype("float32")
    b = np.zeros_like(a)
    tilelang.compile(waves, target="cpu")(a, b)
    np.testing.assert_array_equal(b, a + 1.0)
    assert tilelang.lower(waves, target={"kind": "cuda", "arch": "sm_90"}).device_source


def test_a_scalar_stored_again_between_its_store_and_the_copy_is_not_read_as_its_value():
    @T.prim_func
    def moved(A: T.Tensor((64,), T.float32), B: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=32):
            tile = T.alloc_shared((8,), T.float32)
            start = A[0]  # a value that reads memory: a scalar
            start = 0
            end = start + 8
            start = 4
            T.copy(A[start:end], tile)
            T.copy(tile, B)

    with pytest.raises(tilelang.LanguageError, match=r"source tile \[end - start\] and destination tile \[8\]"):
        tilelang.compile(moved, target="cpu")


def _one_step_per_block(static_start: bool):
    num = T.dynamic("num")

    @T.prim_func
    def main(A: T.Tensor[(num,), T.float32], B: T.Tensor[(num,), T.float32]):
        with T.Kernel(num, threads=1) as b:
            stop = b + 1
            for i in T.serial(b, stop):  # upstream's issue 1728: one trip from a block index
                B[i] = A[i] * 2 + i
            for j in T.serial(0 if static_start else b, 1 if static_start else b + 1):
                B[b] = B[b] + j

    return main


def test_a_loop_of_one_trip_from_a_block_index_runs_once():
    # TVM's simplifier stopped on `for i in T.serial(b, b + 1)` ("Trying to update var 'i'
    # with a different maximum value"); such a loop is its body with i = b
    a = np.arange(6, dtype="float32")
    for static_start in (True, False):
        b = np.zeros(6, "float32")
        tilelang.compile(_one_step_per_block(static_start), target="c")(a, b)
        np.testing.assert_array_equal(b, a * 2 + np.arange(6) + (0 if static_start else np.arange(6)))
