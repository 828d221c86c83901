"""Rows reduced by thread groups at once (core's block_reduce.py, grouped form): a tile of
R > 1 rows whose block splits into R groups of a power-of-two number of warps is reduced
by every group at once (thread t on row t // G), butterfly shuffles within warps and one
shared stage across a group's warps. Checked by running the device IR the CUDA pipeline
hands to codegen in the numpy interpreter (lowered_emulator.py), by what the lowering
emits, and by nvcc.

TVM's own lowerings emit ``tirx.cuda.__shfl_*_sync`` / ``__activemask`` ops (not extern
calls, which is what the interpreter's instruction table serves); ShuffleKernel runs them
as the PTX ISA defines shfl.sync (bfly and down modes) and activemask.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from lowered_emulator import LoweredKernel
from lowered_instructions import EXTERNS, extern_for
from tilelang.cuda import toolchain

SM90 = {"kind": "cuda", "arch": "sm_90"}


CUDA_OPS = {name: EXTERNS[name] for name in ("__shfl_xor_sync", "__shfl_down_sync", "__activemask")}


def _rsqrtf(kernel: LoweredKernel, args: list, call) -> np.ndarray:
    return (1 / np.sqrt(args[0].astype(np.float64))).astype(np.float32)


class ShuffleKernel(LoweredKernel):
    """The interpreter, with TVM's CUDA warp ops run like the extern instructions."""

    def __init__(self, device_mod) -> None:
        super().__init__(device_mod, lambda name: _rsqrtf if name == "rsqrtf" else extern_for(name))

    def _eval_Call(self, expr):
        name = str(expr.op.name).removeprefix("tirx.cuda.")
        if name not in CUDA_OPS:
            return super()._eval_Call(expr)
        self.calls[name] = self.calls.get(name, 0) + 1
        return CUDA_OPS[name](self, [self.eval(a) for a in expr.args], expr)


def run(func, *arrays) -> dict[str, int]:
    kernel = ShuffleKernel(tilelang.lower(func, target=SM90).device_mod)
    kernel(*arrays)
    return kernel.calls


def row_reduce(blocks, shape, threads, kind, dtype="float32", staged=False):
    """Each block reduces a ``shape`` tile (rows..., N) over its last axis into a fragment,
    then stores it. The tile is a fragment, or with ``staged`` a shared tile: a fragment
    in registers has its rows reduced where they lie (test_register_row_reduce.py), a
    shared tile in groups of threads."""
    rows = shape[:-1]

    @T.prim_func
    def main(X: T.Tensor((blocks, *shape), "float32"), O: T.Tensor((blocks, *rows), dtype)):
        with T.Kernel(blocks, threads=threads) as bx:
            x = T.alloc_shared(shape, "float32") if staged else T.alloc_fragment(shape, "float32")
            r = T.alloc_fragment(rows, dtype)
            T.copy(X[(bx, *[0] * len(shape))], x)
            getattr(T, f"reduce_{kind}")(x, r, dim=len(shape) - 1)
            T.copy(r, O[(bx, *[0] * len(rows))])

    return main


NUMPY = {"sum": lambda x: x.sum(-1), "max": lambda x: x.max(-1), "min": lambda x: x.min(-1),
         "abssum": lambda x: np.abs(x).sum(-1), "absmax": lambda x: np.abs(x).max(-1)}


def small_ints(shape, seed):
    """Integers in [-8, 8]: every partial sum is exact in fp32, in any order."""
    return np.random.default_rng(seed).integers(-8, 9, shape).astype(np.float32)


@pytest.mark.parametrize("rows,threads,n", [(2, 128, 256), (4, 128, 512), (2, 256, 512), (4, 256, 256),
                                            (8, 256, 1024), (8, 256, 40), (2, 128, 200)])
@pytest.mark.parametrize("kind", ["sum", "max"])
def test_grouped_rows_as_lowered_equal_numpy(rows, threads, n, kind):
    """Groups of one warp (8 x 32), two (4 x 64) and four (2 x 128); rows whose length is
    no multiple of the group (200, 40: the guarded last step)."""
    x = small_ints((2, rows, n), rows * threads + n)
    out = np.full((2, rows), np.nan, np.float32)
    calls = run(row_reduce(2, (rows, n), threads, kind, staged=True), x, out)
    assert calls["__shfl_xor_sync"] == 2 * 5 and "__shfl_down_sync" not in calls  # 5 steps per block
    np.testing.assert_array_equal(out, NUMPY[kind](x))


@pytest.mark.parametrize("kind", ["min", "abssum", "absmax"])
def test_the_other_kinds_and_a_tile_of_several_row_axes(kind):
    """A (2, 4, N) tile: 8 rows over two kept axes, each group finds its row on both."""
    x = small_ints((3, 2, 4, 64), 3)
    out = np.full((3, 2, 4), np.nan, np.float32)
    run(row_reduce(3, (2, 4, 64), 256, kind, staged=True), x, out)
    np.testing.assert_array_equal(out, NUMPY[kind](x))


@pytest.mark.parametrize("kind,dtype", [("max", "float16"), ("sum", "int32"), ("min", "float64")])
def test_destinations_of_other_types_are_shuffled_in_their_type(kind, dtype):
    x = small_ints((2, 4, 256), 5)
    out = np.full((2, 4), -1, dtype)
    calls = run(row_reduce(2, (4, 256), 256, kind, dtype, staged=True), x, out)
    assert calls["__shfl_xor_sync"] == 2 * 5
    np.testing.assert_array_equal(out, NUMPY[kind](x).astype(dtype))


def test_a_single_long_row_still_goes_through_the_thread_allreduce():
    """A row of more than 64 elements per thread (a shorter one stays in registers:
    test_register_row_reduce.py)."""
    x = small_ints((2, 1, 4096), 9)
    out = np.full((2, 1), np.nan, np.float32)
    calls = run(row_reduce(2, (1, 4096), 32, "sum"), x, out)
    assert calls["__shfl_down_sync"] > 0 and "__shfl_xor_sync" not in calls
    np.testing.assert_array_equal(out, NUMPY["sum"](x))


def softmax(m, n, rows, threads):
    """The benchmark family's kernel (benchmarks/families/softmax.py): max, exp2, sum and
    the division, the T.Parallel nests reading the reduced rows."""
    log2e = 1.44269504

    @T.prim_func
    def main(X: T.Tensor((m, n), "float16"), Y: T.Tensor((m, n), "float16")):
        with T.Kernel(T.ceildiv(m, rows), threads=threads) as bx:
            x = T.alloc_fragment((rows, n), "float32")
            row_max = T.alloc_fragment((rows,), "float32")
            row_sum = T.alloc_fragment((rows,), "float32")
            for i, j in T.Parallel(rows, n):
                x[i, j] = T.cast(X[bx * rows + i, j], "float32")
            T.reduce_max(x, row_max, dim=1)
            for i, j in T.Parallel(rows, n):
                x[i, j] = T.exp2(x[i, j] * log2e - row_max[i] * log2e)
            T.reduce_sum(x, row_sum, dim=1)
            for i, j in T.Parallel(rows, n):
                Y[bx * rows + i, j] = T.cast(x[i, j] / row_sum[i], "float16")

    return main


def in_registers(func, name: str) -> bool:
    """Whether fragment ``name`` of ``func`` stays in registers (a per-thread array)."""
    return re.search(rf"float {name}_ptr\[\d+\];", kernel_body(func)) is not None


@pytest.mark.parametrize("rows,threads", [(4, 128), (8, 256), (4, 256)])
def test_softmax_of_several_rows_as_lowered_matches_numpy(rows, threads):
    """The nests around the reductions read every row's max and sum, which every thread
    ends with. The rows of ``x`` are reduced where they lie, so it stays in registers (the
    grouped form would read it by rows, from shared memory)."""
    m, n = 2 * rows, 256
    x = (np.random.default_rng(rows + threads).standard_normal((m, n)) * 3).astype(np.float16)
    y = np.full((m, n), np.nan, np.float16)
    func = softmax(m, n, rows, threads)
    assert in_registers(func, "x")
    calls = run(func, x, y)
    assert calls["__shfl_xor_sync"] > 0 and "__shfl_down_sync" not in calls
    xf = x.astype(np.float64)
    e = np.exp(xf - xf.max(1, keepdims=True))
    np.testing.assert_allclose(y.astype(np.float64), e / e.sum(1, keepdims=True), rtol=2e-3, atol=1e-6)


def rmsnorm(m, n, rows, threads, eps=1e-6):
    """The benchmark family's kernel (benchmarks/families/rmsnorm.py): a T.Parallel nest over
    the reduced rows alone, then one that scales every element by its row's factor."""

    @T.prim_func
    def main(X: T.Tensor((m, n), "float16"), W: T.Tensor((n,), "float16"), Y: T.Tensor((m, n), "float16")):
        with T.Kernel(T.ceildiv(m, rows), threads=threads) as bx:
            x = T.alloc_fragment((rows, n), "float32")
            sq = T.alloc_fragment((rows, n), "float32")
            inv = T.alloc_fragment((rows,), "float32")
            for i, j in T.Parallel(rows, n):
                x[i, j] = T.cast(X[bx * rows + i, j], "float32")
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, inv, dim=1)
            for i in T.Parallel(rows):
                inv[i] = T.rsqrt(inv[i] / n + eps)
            for i, j in T.Parallel(rows, n):
                Y[bx * rows + i, j] = T.cast(x[i, j] * inv[i] * T.cast(W[j], "float32"), "float16")

    return main


@pytest.mark.parametrize("rows,threads", [(4, 128), (2, 256)])
def test_rmsnorm_of_several_rows_as_lowered_matches_numpy(rows, threads):
    m, n = 2 * rows, 256
    rng = np.random.default_rng(rows * threads)
    x = rng.standard_normal((m, n)).astype(np.float16)
    w = (rng.random(n) + 0.5).astype(np.float16)
    y = np.full((m, n), np.nan, np.float16)
    func = rmsnorm(m, n, rows, threads)
    assert in_registers(func, "x") and in_registers(func, "sq")
    calls = run(func, x, w, y)
    assert calls["__shfl_xor_sync"] > 0 and "__shfl_down_sync" not in calls
    xf = x.astype(np.float64)
    expected = xf / np.sqrt((xf * xf).mean(1, keepdims=True) + 1e-6) * w.astype(np.float64)
    np.testing.assert_allclose(y.astype(np.float64), expected, rtol=2e-3, atol=2e-3)


def kernel_body(func) -> str:
    source = tilelang.lower(func, target=SM90).device_source
    return source[source.index('extern "C" __global__'):]


def test_one_reduction_for_all_rows_and_one_barrier_across_warps():
    """8 rows x 32 threads: five shuffles, no staging, no barrier inside the reduction, no
    loop over the rows; 2 rows x 128: one shared stage of four values per row."""
    code = kernel_body(row_reduce(1, (8, 1024), 256, "sum", staged=True))
    assert code.count("__shfl_xor_sync(") == 5 and "__shfl_down_sync" not in code
    assert "red_buf" not in code and "row_partials" not in code
    assert re.search(r"for \(int r\d+ = 0; r\d+ < 32; \+\+r\d+\)", code)  # 1024 / 32 per thread
    reduction = code[code.index("__shfl_xor_sync(") - 400:code.rindex("__shfl_xor_sync(")]
    assert "__syncthreads" not in reduction[reduction.index("__activemask"):]

    code = kernel_body(row_reduce(1, (2, 1024), 256, "max", staged=True))
    assert code.count("__shfl_xor_sync(") == 5 and "__shfl_down_sync" not in code
    # lane 0 of each warp writes its warp's value, a barrier, every thread reads its row's four
    write = re.search(r"row_partials\d+_ptr\[\(\(\(int\)threadIdx.x\) >> 5\)\] = ", code).start()
    read = re.search(r"= max\(max\(max\(row_partials", code).start()
    assert write < code.index("__syncthreads()", write) < read
    assert re.search(r"for \(int r\d+ = 0; r\d+ < 8; \+\+r\d+\)", code)  # 1024 / 128 per thread


def test_rows_that_do_not_split_the_block_go_one_after_another():
    # 3 rows of more than 64 elements per thread: the block does not split into equal warp groups
    assert "__shfl_down_sync" in kernel_body(row_reduce(1, (3, 4096), 128, "sum"))
    # rows shorter than their group of 32 keep one thread per row
    assert "__shfl" not in kernel_body(row_reduce(1, (4, 16), 128, "sum"))


def test_a_local_destination_gets_every_rows_total_in_every_thread():

    @T.prim_func
    def local_destination(X: T.Tensor((4, 256), "float32"), O: T.Tensor((4, 4), "float32")):
        with T.Kernel(1, threads=128) as _:
            x = T.alloc_fragment((4, 256), "float32")
            r = T.alloc_local((4,), "float32")
            T.copy(X, x)
            T.reduce_sum(x, r, dim=1)
            for i in T.Parallel(4):  # every thread reads every row's total from its own copy
                for j in T.serial(4):  # (indexed by a T.Parallel variable, r would be a fragment)
                    O[i, j] = r[j]

    x = small_ints((4, 256), 4)
    out = np.full((4, 4), np.nan, np.float32)
    calls = run(local_destination, x, out)  # in registers (8 elements a thread): all four rows at once
    assert calls["__shfl_xor_sync"] == 4 * 5 and "__shfl_down_sync" not in calls
    np.testing.assert_array_equal(out, np.broadcast_to(x.sum(1), (4, 4)))


@pytest.mark.skipif(toolchain.nvcc_path() is None, reason="nvcc is not installed")
@pytest.mark.parametrize("rows,threads", [(4, 128), (8, 256)])
def test_nvcc_compiles_the_families_softmax(rows, threads):
    source = tilelang.lower(softmax(65536, 1024, rows, threads), target=SM90).device_source
    assert "__shfl_xor_sync" in source
    assert toolchain._compile_nvcc(source, "sm_90", f"softmax_r{rows}_t{threads}")[:4] == b"\x7fELF"


def nan_rows(rows, n, threads, kind, nan_propagate, dtype="float32", shared=False):
    @T.prim_func
    def main(X: T.Tensor((2, rows, n), dtype), O: T.Tensor((2, rows), dtype)):
        with T.Kernel(2, threads=threads) as bx:
            x = T.alloc_shared((rows, n), dtype) if shared else T.alloc_fragment((rows, n), dtype)
            r = T.alloc_fragment((rows,), dtype)
            T.copy(X[bx, 0, 0], x)
            getattr(T, f"reduce_{kind}")(x, r, dim=1, nan_propagate=nan_propagate)
            T.copy(r, O[bx, 0])

    return main


NAN_SKIPPING = {"max": lambda x: np.fmax.reduce(x, -1, initial=-np.inf),
                "min": lambda x: np.fmin.reduce(x, -1, initial=np.inf),
                "absmax": lambda x: np.fmax.reduce(np.abs(x), -1, initial=0)}
NAN_PROPAGATING = {"max": lambda x: x.max(-1), "min": lambda x: x.min(-1), "absmax": lambda x: np.abs(x).max(-1)}


# warp groups with shuffles (4 x 256 by 256 threads), one row by the thread all-reduce
# (1 x 1024 by 128), one thread per row (64 x 64)
@pytest.mark.parametrize("rows,n,threads", [(4, 256, 256), (1, 1024, 128), (64, 64, 128)])
@pytest.mark.parametrize("kind", ["max", "min", "absmax"])
@pytest.mark.parametrize("nan_propagate", [True, False])
def test_nan_propagate_as_lowered_on_every_reduction_path(rows, n, threads, kind, nan_propagate):
    """Upstream's nan_propagate: a NaN anywhere in a row is the row's result; without it max
    and min skip NaNs (CUDA's fmaxf / __hmax). The shuffled values are stored before they
    are combined: the NaN-propagating combine reads an operand under a select, whose
    branches CUDA evaluates only when taken, and every lane has to execute a shuffle (the
    interpreter faults on a shuffle that some lanes of its mask skip)."""
    x = np.random.default_rng(rows + n).standard_normal((2, rows, n)).astype(np.float32)
    x[0, 0, 5] = x[1, rows - 1, n - 1] = np.nan
    out = np.zeros((2, rows), np.float32)
    run(nan_rows(rows, n, threads, kind, nan_propagate), x, out)
    expected = (NAN_PROPAGATING if nan_propagate else NAN_SKIPPING)[kind](x)
    np.testing.assert_array_equal(out, expected)
    assert np.isnan(out).sum() == (2 if nan_propagate else 0)


# a fragment in registers (rows in its own layout: 8 warps' values a row) and a shared tile
# (grouped: 2 groups of 256 threads)
@pytest.mark.parametrize("rows,n,threads,shared", [(4, 256, 256, False), (2, 256, 512, True)])
def test_the_nan_propagating_totals_of_many_warps_stay_linear(rows, n, threads, shared):
    """A row's warp values are combined a statement at a time through a local: nested, the
    NaN-propagating combine (a select reading each operand twice) held 3^7 copies of the
    first of 8 (2.5 MB of CUDA for 4 rows of 256 halves on 256 threads, a minute to lower
    and another for nvcc; on 1024 threads it would never finish)."""
    func = nan_rows(rows, n, threads, "max", True, "float16", shared)
    code = kernel_body(func)
    assert len(code) < 40_000
    x = np.random.default_rng(rows).standard_normal((2, rows, n)).astype(np.float32)
    x[0, rows - 1, 3] = np.nan
    out = np.zeros((2, rows), np.float32)
    run(nan_rows(rows, n, threads, "max", True, "float32", shared), x, out)
    np.testing.assert_array_equal(out, x.max(-1))


@pytest.mark.skipif(toolchain.nvcc_path() is None, reason="nvcc is not installed")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_nvcc_compiles_nan_propagating_half_reductions(dtype):
    # upstream's own shape (64 elements, one warp) and a grouped one
    for rows, n, threads in [(1, 64, 32), (4, 256, 256)]:
        source = tilelang.lower(nan_rows(rows, n, threads, "max", True, dtype), target=SM90).device_source
        assert toolchain._compile_nvcc(source, "sm_90", f"nan_{dtype}_{rows}")[:4] == b"\x7fELF"
