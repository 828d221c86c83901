"""Atomics (T.atomic_* on elements and tiles, return_prev, vector adds, loads/stores),
bitwise reductions and T.transpose on the CPU, against numpy; and the errors they raise."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang import LanguageError
from tvm import tirx

rng = np.random.default_rng(7)


def cpu(func, out_idx=(-1,), target="cpu"):
    return tilelang.compile(func, out_idx=list(out_idx) if out_idx is not None else None, target=target)


_NP_COMBINE = {"add": np.add, "max": np.maximum, "min": np.minimum, "or": np.bitwise_or,
               "and": np.bitwise_and, "xor": np.bitwise_xor}


# -- element atomics ---------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["add", "max", "min", "or", "and", "xor"])
def test_element_atomics_from_every_block_and_lane_all_land(kind):
    """4 blocks x 64 lanes update 5 cells (the CPU runs such a kernel on one thread)."""
    n, cells, block = 256, 5, 64
    emit = getattr(T, f"atomic_{kind}")

    @T.prim_func
    def main(X: T.Tensor((n,), "int32"), H: T.Tensor((cells,), "int32")):
        with T.Kernel(n // block, threads=block) as bx:
            for i in T.Parallel(block):
                emit(H[(bx * block + i) % cells], X[bx * block + i])

    x = rng.integers(-1000, 1000, n).astype("int32")
    h = rng.integers(-1000, 1000, cells).astype("int32")
    expected = h.copy()
    for c in range(cells):
        expected[c] = _NP_COMBINE[kind].reduce(np.concatenate([h[c:c + 1], x[c::cells]]))
    cpu(main, out_idx=None)(x, h)
    np.testing.assert_array_equal(h, expected)


def test_return_prev_hands_out_distinct_slots_in_a_bind_and_an_index():
    """Stream compaction: `pos = T.atomic_add(count[0], 1, return_prev=True)` then
    `out[pos] = ...`, and the same with the atomic inside the store's index."""
    n = 200

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Out: T.Tensor((n,), "float32"), Idx: T.Tensor((n,), "int32"),
             Count: T.Tensor((2,), "int32")):
        with T.Kernel(4, threads=50) as bx:
            for i in T.Parallel(50):
                if X[bx * 50 + i] > 0:
                    pos = T.atomic_add(Count[0], 1, return_prev=True)
                    Out[pos] = X[bx * 50 + i]
                else:
                    Idx[T.atomic_add(Count[1], 1, return_prev=True)] = bx * 50 + i

    x = rng.standard_normal(n).astype("float32")
    out, idx, count = np.zeros(n, "float32"), np.full(n, -1, "int32"), np.zeros(2, "int32")
    cpu(main, out_idx=None)(x, out, idx, count)
    positive = int((x > 0).sum())
    np.testing.assert_array_equal(count, [positive, n - positive])
    np.testing.assert_array_equal(np.sort(out[:positive]), np.sort(x[x > 0]))
    np.testing.assert_array_equal(np.sort(idx[:n - positive]), np.flatnonzero(x <= 0))


def test_two_return_prev_updates_in_one_expression_apply_left_to_right():
    n = 6

    @T.prim_func
    def main(A: T.Tensor((n,), "int32"), B: T.Tensor((1,), "int32"), P: T.Tensor((n,), "int32")):
        with T.Kernel(1):
            for i in T.serial(n):
                # the second update of B sees the first: prev + (prev + A[i])
                P[i] = T.atomic_add(B[0], A[i], return_prev=True) * 10 + T.atomic_max(B[0], 0, return_prev=True)

    a = np.arange(1, n + 1, dtype="int32")
    b, p = np.zeros(1, "int32"), np.zeros(n, "int32")
    cpu(main, out_idx=None)(a, b, p)
    before = np.concatenate([[0], np.cumsum(a)[:-1]])
    np.testing.assert_array_equal(p, before * 10 + before + a)
    assert b[0] == a.sum()


@pytest.mark.parametrize("target", ["llvm", "c"])
def test_atomic_load_store_and_memory_orders(target):
    @T.prim_func
    def main(Flag: T.Tensor((2,), "float32"), Out: T.Tensor((2,), "float32")):
        with T.Kernel(1):
            x = T.atomic_load(Flag[0], memory_order="acquire")
            T.atomic_store(Out[0], x * 2, memory_order="release")
            Out[1] = T.atomic_add(Flag[1], x, memory_order="seq_cst", return_prev=True)

    flag = np.array([1.5, 4.0], "float32")
    out = cpu(main, target=target)(flag)
    np.testing.assert_array_equal(out, [3.0, 4.0])


# -- tile and vector atomics ---------------------------------------------------------------
@pytest.mark.parametrize("kind", ["max", "min", "xor"])
def test_tile_atomics_at_a_tensor_edge_skip_the_outside(kind):
    """Each block combines its 16x16 tile into C at a corner; C is 40x24, so edge tiles
    are partly outside and those elements are skipped."""
    M, N, bm = 40, 24, 16
    dtype = "int32"
    emit = getattr(T, f"atomic_{kind}")

    @T.prim_func
    def main(A: T.Tensor((3, bm, bm), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(2, 3) as (bx, by):
            tile = T.alloc_shared((bm, bm), dtype)
            T.copy(A[by, 0:bm, 0:bm], tile)
            emit(C[by * bm, bx * bm], tile)

    a = rng.integers(-100, 100, (3, bm, bm)).astype(dtype)
    c = rng.integers(-100, 100, (M, N)).astype(dtype)
    expected = c.copy()
    for by in range(3):
        for bx in range(2):
            rows, cols = slice(by * bm, min(M, by * bm + bm)), slice(bx * bm, min(N, bx * bm + bm))
            part = expected[rows, cols]
            expected[rows, cols] = _NP_COMBINE[kind](part, a[by][:part.shape[0], :part.shape[1]])
    cpu(main, out_idx=None)(a, c)
    np.testing.assert_array_equal(c, expected)


def test_tile_atomic_add_of_a_scalar_and_a_converted_tile():
    @T.prim_func
    def main(A: T.Tensor((4, 8), "float16"), C: T.Tensor((6, 8), "float32")):
        with T.Kernel(1):
            T.atomic_add(C[1:5, :], A)
            T.atomic_add(C, 0.5)

    a = rng.standard_normal((4, 8)).astype("float16")
    c = np.ones((6, 8), "float32")
    cpu(main, out_idx=None)(a, c)
    expected = np.full((6, 8), 1.5, "float32")
    expected[1:5] += a.astype("float32")
    np.testing.assert_allclose(c, expected, rtol=1e-6, atol=1e-6)


def test_atomic_addx4_from_element_corners_in_a_parallel_loop():
    """upstream's sparse-MLA backward writes `T.atomic_addx4(dKV[r, d * 4], acc[r, d * 4])`."""
    R, D = 3, 16

    @T.prim_func
    def main(V: T.Tensor((R, D), "float32"), Dst: T.Tensor((R, D), "float32")):
        with T.Kernel(2):
            for r, d in T.Parallel(R, D // 4):
                T.atomic_addx4(Dst[r, d * 4], V[r, d * 4])
            T.atomic_addx2(Dst[0, 0:2], V[0, 0:2])

    v = rng.standard_normal((R, D)).astype("float32")
    dst = np.zeros((R, D), "float32")
    cpu(main, out_idx=None)(v, dst)
    expected = 2 * v
    expected[0, :2] += 2 * v[0, :2]
    np.testing.assert_allclose(dst, expected, rtol=1e-6, atol=1e-6)


# -- errors ------------------------------------------------------------------------------------
def _buffer(shape=(4,), dtype="float32", name="B"):
    return tirx.decl_buffer(shape, dtype, name=name)


def test_bitwise_atomics_need_integer_elements():
    with pytest.raises(LanguageError, match=r"T.atomic_or: combines bits, so needs an integer destination; "
                                            r"'B' holds float32"):
        T.atomic_or(tirx.BufferLoad(_buffer(), [0]), 1)


def test_memory_orders_are_checked_against_the_operation():
    element = tirx.BufferLoad(_buffer(), [0])
    with pytest.raises(LanguageError, match=r"T.atomic_load does not support memory_order='release'; use "
                                            r"one of \['relaxed', 'consume', 'acquire', 'seq_cst'\]"):
        T.atomic_load(element, memory_order="release")
    with pytest.raises(LanguageError, match=r"T.atomic_add does not support memory_order='strong'"):
        T.atomic_add(element, 1.0, memory_order="strong")


def test_vector_atomics_take_a_run_of_the_last_axis():
    with pytest.raises(LanguageError, match=r"T.atomic_addx4 destination: 'B' gives a tile of \[2, 4\]; a "
                                            r"4-wide atomic takes 4 consecutive elements of the last axis"):
        T.atomic_addx4(_buffer((2, 4)), tirx.BufferLoad(_buffer((8,), name="V"), [0]))


def test_use_tma_is_refused_on_the_cpu_when_compiled():
    @T.prim_func
    def main(A: T.Tensor((4, 8), "float32"), B: T.Tensor((4, 8), "float32")):
        with T.Kernel(1):
            T.atomic_add(B, A, use_tma=True)

    with pytest.raises(LanguageError, match=r"use_tma=True\) asks for a TMA bulk reduction, which GPUs have "
                                            r"\(sm_90\+\) and the CPU backend does not; drop use_tma"):
        cpu(main, out_idx=None)


def test_return_prev_under_a_condition_is_refused():
    @T.prim_func
    def main(A: T.Tensor((4,), "int32"), B: T.Tensor((1,), "int32"), P: T.Tensor((4,), "int32")):
        with T.Kernel(1):
            for i in T.serial(4):
                P[i] = T.if_then_else(A[i] > 0, T.atomic_add(B[0], 1, return_prev=True), -1)

    with pytest.raises(LanguageError, match=r"an atomic update with return_prev inside a conditional expression "
                                            r".* assign it in an `if` statement instead"):
        cpu(main, out_idx=None)


def test_tile_atomic_shapes_must_agree():
    @T.prim_func
    def main(A: T.Tensor((4, 8), "float32"), B: T.Tensor((4, 8), "float32")):
        with T.Kernel(1):
            T.atomic_max(B[0:4, 0:4], A[0:4, 0:8])

    with pytest.raises(LanguageError, match=r"T.atomic_max: destination tile \[4, 4\] and value tile \[4, 8\] "
                                            r"differ in shape"):
        cpu(main, out_idx=None)


# -- bitwise reductions ------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["bitand", "bitor", "bitxor"])
@pytest.mark.parametrize("dtype", ["int32", "uint8"])
def test_bitwise_reductions_of_fragments_and_of_a_given_start(kind, dtype):
    """dim 1 into a fresh row vector (identity: all ones / 0 / 0) and dim 0 onto the
    values already in a second vector (clear=False)."""
    M, N = 8, 16
    ufunc = {"bitand": np.bitwise_and, "bitor": np.bitwise_or, "bitxor": np.bitwise_xor}[kind]
    emit = getattr(T, f"reduce_{kind}")

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), Start: T.Tensor((N,), dtype), R: T.Tensor((M,), dtype),
             C: T.Tensor((N,), dtype)):
        with T.Kernel(1, threads=32):
            tile = T.alloc_fragment((M, N), dtype)
            rows = T.alloc_fragment((M,), dtype)
            cols = T.alloc_fragment((N,), dtype)
            T.copy(A, tile)
            T.copy(Start, cols)
            emit(tile, rows, dim=1)
            emit(tile, cols, dim=0, clear=False)
            T.copy(rows, R)
            T.copy(cols, C)

    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, (M, N), endpoint=True).astype(dtype)
    start = rng.integers(info.min, info.max, N, endpoint=True).astype(dtype)
    r, c = cpu(main, out_idx=[2, 3])(a, start)
    np.testing.assert_array_equal(r, ufunc.reduce(a, axis=1))
    np.testing.assert_array_equal(c, functools.reduce(ufunc, list(a), start))


def test_bitwise_reductions_need_integer_tiles():
    with pytest.raises(LanguageError, match=r"T.reduce_bitor: combines bits, so needs integer tiles; 'S' holds "
                                            r"float16"):
        T.reduce_bitor(_buffer((4, 4), "float16", "S"), _buffer((4,), "int32", "D"), dim=1)


@pytest.mark.parametrize("target", ["llvm", "c"])
def test_max_of_a_row_of_minus_infinity_is_minus_infinity(target):
    """A cleared reduce_max starts from -inf (upstream's identity), not the lowest finite
    value; on the C target the constant must be printed as C99's INFINITY."""

    @T.prim_func
    def main(A: T.Tensor((2, 8), "float32"), B: T.Tensor((2,), "float32"), C: T.Tensor((2,), "float32")):
        with T.Kernel(1):
            t = T.alloc_fragment((2, 8), "float32")
            mx = T.alloc_fragment((2,), "float32")
            mn = T.alloc_fragment((2,), "float32")
            T.copy(A, t)
            T.reduce_max(t, mx, dim=1)
            T.reduce_min(t, mn, dim=1)
            T.copy(mx, B)
            T.copy(mn, C)

    a = np.full((2, 8), -np.inf, "float32")
    a[1] = np.inf
    b, c = cpu(main, out_idx=[1, 2], target=target)(a)
    np.testing.assert_array_equal(b, [-np.inf, np.inf])
    np.testing.assert_array_equal(c, [-np.inf, np.inf])


# -- T.transpose ---------------------------------------------------------------------------------
def test_transpose_of_shared_tiles_in_blocks_converts_the_dtype():
    M, N, bm = 64, 48, 16

    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), B: T.Tensor((N, M), "float32")):
        with T.Kernel(N // bm, M // bm, threads=64) as (bx, by):
            s = T.alloc_shared((bm, bm), "float16")
            t = T.alloc_shared((bm, bm), "float32")
            T.copy(A[by * bm, bx * bm], s)
            T.transpose(s, t)
            T.copy(t, B[bx * bm, by * bm])

    a = rng.standard_normal((M, N)).astype("float16")
    np.testing.assert_array_equal(cpu(main)(a), a.T.astype("float32"))


def test_transpose_shapes_must_be_the_swapped_source():
    @T.prim_func
    def main(A: T.Tensor((4, 8), "float32"), B: T.Tensor((4, 8), "float32")):
        with T.Kernel(1):
            T.transpose(A, B)

    with pytest.raises(LanguageError, match=r"T.transpose: destination \[4, 8\] is not the source \[4, 8\] "
                                            r"with its last two axes swapped"):
        cpu(main)
    with pytest.raises(LanguageError, match=r"T.transpose: source and destination must have one rank of at "
                                            r"least 2, got 1-d 'S' and 1-d 'D'"):
        T.transpose(_buffer((4,), name="S"), _buffer((4,), name="D"))
