"""Upstream's reduction and scan surface on the CPU, against numpy: T.cumsum / T.cummax /
T.cummin in both directions, reduce_* with upstream's tuning keywords, and reducer v2
(T.reducer_init / T.reducer_update / T.finalize_reducer(r, dst)) with sum, max and the
bitwise combines."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang import LanguageError


def _scan_kernel(kind: str, reverse: bool):
    scan = {"sum": T.cumsum, "max": T.cummax, "min": T.cummin}[kind]

    @T.prim_func
    def scan_rows(A: T.Tensor((4, 16), T.float32), B: T.Tensor((4, 16), T.float32)):
        with T.Kernel(threads=32):  # no grid extents: one block, as upstream
            tile = T.alloc_fragment((4, 16), T.float32)
            T.copy(A, tile)
            scan(tile, dim=1, reverse=reverse)
            T.copy(tile, B)

    return scan_rows


@pytest.mark.parametrize("kind", ["sum", "max", "min"])
@pytest.mark.parametrize("reverse", [False, True])
def test_running_sums_maxima_and_minima_along_a_tile(kind, reverse):
    kernel = tilelang.compile(_scan_kernel(kind, reverse), target="cpu")
    a = np.random.default_rng(5).standard_normal((4, 16)).astype("float32")
    out = np.zeros_like(a)
    kernel(a, out)
    ufunc = {"sum": np.add, "max": np.maximum, "min": np.minimum}[kind]
    src = a[:, ::-1] if reverse else a
    expected = ufunc.accumulate(src, axis=1)
    np.testing.assert_allclose(out, expected[:, ::-1] if reverse else expected, rtol=1e-5, atol=1e-5)


def test_reduce_takes_upstreams_tuning_keywords():
    @T.prim_func
    def row_max(A: T.Tensor((8, 32), T.float32), B: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=32):
            tile = T.alloc_fragment((8, 32), T.float32)
            out = T.alloc_fragment((8,), T.float32)
            T.copy(A, tile)
            T.reduce_max(tile, out, dim=1, batch=2, annotations={"enable_fadd2": False})
            T.copy(out, B)

    a = np.random.default_rng(6).standard_normal((8, 32)).astype("float32")
    out = np.zeros(8, "float32")
    tilelang.compile(row_max, target="cpu")(a, out)
    np.testing.assert_allclose(out, a.max(axis=1))


def _nan_rows(kind: str, nan_propagate: bool, clear: bool = True, dtype: str = "float32"):
    @T.prim_func
    def rows(A: T.Tensor((8, 32), dtype), B: T.Tensor((8,), dtype)):
        with T.Kernel(1, threads=32):
            tile = T.alloc_fragment((8, 32), dtype)
            out = T.alloc_fragment((8,), dtype)
            T.copy(A, tile)
            if not clear:
                T.fill(out, -1.0)
            getattr(T, f"reduce_{kind}")(tile, out, dim=1, clear=clear, nan_propagate=nan_propagate)
            T.copy(out, B)

    return rows


def _rows_with_nans(dtype: str = "float32") -> np.ndarray:
    a = np.random.default_rng(7).standard_normal((8, 32)).astype(dtype)
    a[1, 0] = a[2, 31] = a[3, 17] = np.nan  # first, last and a middle element of a row
    a[4, :] = np.nan  # a row of NaNs
    return a


# NaN-skipping, from the reduction's start value: a row of NaNs gives -inf / +inf / 0 (CUDA's too)
PLAIN = {"max": lambda x, axis: np.fmax.reduce(x, axis, initial=-np.inf),
         "min": lambda x, axis: np.fmin.reduce(x, axis, initial=np.inf),
         "absmax": lambda x, axis: np.fmax.reduce(np.abs(x), axis, initial=0)}
PROPAGATING = {"max": np.max, "min": np.min, "absmax": lambda x, axis: np.abs(x).max(axis)}


@pytest.mark.parametrize("kind", ["max", "min", "absmax"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_nan_propagate_makes_a_nan_anywhere_in_a_row_its_result(kind, dtype):
    a, out = _rows_with_nans(dtype), np.zeros(8, dtype)
    tilelang.compile(_nan_rows(kind, True, dtype=dtype), target="cpu")(a, out)
    np.testing.assert_array_equal(out, PROPAGATING[kind](a, axis=1))  # equal: NaN where numpy's is
    assert np.isnan(out[1:5]).all() and not np.isnan(out[[0, 5, 6, 7]]).any()


@pytest.mark.parametrize("kind", ["max", "min", "absmax"])
def test_by_default_max_and_min_skip_nans_as_upstreams_do(kind):
    a, out = _rows_with_nans(), np.zeros(8, "float32")
    tilelang.compile(_nan_rows(kind, False), target="cpu")(a, out)
    np.testing.assert_array_equal(out, PLAIN[kind](a, axis=1))
    assert not np.isnan(out).any()


def test_nan_propagate_holds_when_accumulating_into_the_destination():
    # clear=False: the destination (-1) takes part, as upstream's GH-2697 asks
    a, out = _rows_with_nans(), np.zeros(8, "float32")
    tilelang.compile(_nan_rows("max", True, clear=False), target="cpu")(a, out)
    np.testing.assert_array_equal(out, np.maximum(np.max(a, axis=1), -1))
    tilelang.compile(_nan_rows("max", False, clear=False), target="cpu")(a, out)
    np.testing.assert_array_equal(out, np.fmax.reduce(a, axis=1, initial=-1))


def test_nan_propagate_changes_nothing_for_sums_and_integers():
    a, out = _rows_with_nans(), np.zeros(8, "float32")
    tilelang.compile(_nan_rows("sum", True), target="cpu")(a, out)
    np.testing.assert_allclose(out, a.sum(axis=1), rtol=1e-5)

    @T.prim_func
    def int_rows(A: T.Tensor((8, 32), T.int32), B: T.Tensor((8,), T.int32)):
        with T.Kernel(1, threads=32):
            tile = T.alloc_fragment((8, 32), T.int32)
            out = T.alloc_fragment((8,), T.int32)
            T.copy(A, tile)
            T.reduce_max(tile, out, dim=1, nan_propagate=True)
            T.copy(out, B)

    ints, int_out = np.arange(256, dtype="int32").reshape(8, 32), np.zeros(8, "int32")
    tilelang.compile(int_rows, target="cpu")(ints, int_out)
    np.testing.assert_array_equal(int_out, ints.max(axis=1))


def test_reducer_v2_epoch_sums_each_contribution_once():
    # upstream's reducer v2 (its issue 2408: 128 threads over 8 elements must give 36)
    M, K, block_K = 8, 64, 16

    @T.prim_func
    def row_sums(A: T.Tensor((M, K), T.float32), B: T.Tensor((M,), T.float32), C: T.Tensor((1,), T.float32)):
        with T.Kernel(1, threads=128):
            acc = T.alloc_reducer((M,), T.float32, op="sum")
            T.reducer_init(acc)
            tile = T.alloc_fragment((M, block_K), T.float32)
            for k in T.serial(K // block_K):
                T.copy(A[0, k * block_K], tile)
                for i, j in T.Parallel(M, block_K):
                    T.reducer_update(acc[i], tile[i, j])
            result = T.alloc_fragment((M,), T.float32)
            T.finalize_reducer(acc, result)
            T.copy(result, B)
            peak = T.alloc_reducer((1,), T.float32, op="max")
            T.reducer_init(peak, init=100.0)
            for i in T.Parallel(M):
                T.reducer_update(peak[0], result[i])
            top = T.alloc_fragment((1,), T.float32)
            T.finalize_reducer(peak, top, batch=1)
            T.copy(top, C)

    a = np.random.default_rng(7).standard_normal((M, K)).astype("float32")
    a[3, :] += 10.0  # row 3's sum passes the init of 100 for max: 640 +- noise
    b, c = np.zeros(M, "float32"), np.zeros(1, "float32")
    tilelang.compile(row_sums, target="cpu")(a, b, c)
    np.testing.assert_allclose(b, a.sum(axis=1), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(c, [max(100.0, a.sum(axis=1).max())], rtol=1e-5)


def test_reducer_update_names_what_it_takes():
    with pytest.raises(LanguageError, match=r"T.reducer_update: 'plain' was not allocated with T.alloc_reducer"):
        @T.prim_func
        def bad(A: T.Tensor((8,), T.float32)):
            with T.Kernel(1, threads=32):
                plain = T.alloc_fragment((8,), T.float32)
                for i in T.Parallel(8):
                    T.reducer_update(plain[i], A[i])


@pytest.mark.parametrize("op", ["bitand", "bitor", "bitxor"])
def test_bitwise_reducers_combine_rows(op):
    M, K = 4, 32

    @T.prim_func
    def rows(A: T.Tensor((M, K), T.int32), B: T.Tensor((M,), T.int32)):
        with T.Kernel(1, threads=64):
            acc = T.alloc_reducer((M,), T.int32, op=op)
            T.reducer_init(acc)
            for i, k in T.Parallel(M, K):
                T.reducer_update(acc[i], A[i, k])
            out = T.alloc_fragment((M,), T.int32)
            T.finalize_reducer(acc, out)
            T.copy(out, B)

    a = np.random.default_rng(12).integers(0, 2**31 - 1, (M, K)).astype("int32")
    b = np.zeros(M, "int32")
    tilelang.compile(rows, target="cpu")(a, b)
    ufunc = {"bitand": np.bitwise_and, "bitor": np.bitwise_or, "bitxor": np.bitwise_xor}[op]
    np.testing.assert_array_equal(b, ufunc.reduce(a, axis=1))


def test_a_bitwise_reducer_needs_integers():
    # upstream asserts here (its test expects AssertionError); the LanguageError is one too
    with pytest.raises(AssertionError, match=r"T.alloc_reducer\(op='bitand'\) combines bits, so needs an integer dtype") as info:
        @T.prim_func
        def bad(A: T.Tensor((8,), T.float32)):
            with T.Kernel(1, threads=32):
                acc = T.alloc_reducer((1,), T.float32, op="bitand")
                T.reducer_init(acc)

    assert isinstance(info.value, LanguageError)


def test_elementwise_max_and_min_skip_a_nan_in_either_operand_on_the_cpu():
    # T.max / T.min of floats are fmax / fmin, as CUDA's: the non-NaN operand
    @T.prim_func
    def minmax(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32), C: T.Tensor((64,), T.float32),
               D: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                C[i] = T.max(A[i], B[i])
                D[i] = T.min(A[i], B[i])

    rng = np.random.default_rng(8)
    a, b = rng.standard_normal(64).astype("float32"), rng.standard_normal(64).astype("float32")
    a[::3], b[1::4] = np.nan, np.nan  # NaNs in either operand, and in both (every 12th from 9)
    c, d = np.zeros(64, "float32"), np.zeros(64, "float32")
    tilelang.compile(minmax, target="cpu")(a, b, c, d)
    np.testing.assert_array_equal(c, np.fmax(a, b))
    np.testing.assert_array_equal(d, np.fmin(a, b))
