"""Out-of-range indices (issue 15, item 3).

Before: a constant out-of-range index segfaulted, ``C[-65, 0]`` wrote before the tensor
silently, ``T.Parallel(640)`` over a 64-row tile corrupted the heap (SIGABRT), and no
bounds check could be turned on (TVM's InstrumentBoundCheckers, which the tirx key enables,
is not in this pipeline and reads annotations nothing writes). Now accesses certain to leave
their buffer are LanguageErrors at parse time with the source line, and ``tl.bounds_check``
(or ``tirx.instrument_bound_checkers`` / upstream's ``tir.`` spelling) checks every access
at run time on both CPU execution backends.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.errors import LanguageError, LaunchError
from tilelang.testing.kernels import tiled_matmul
from tilelang.testing.upstream_kernels import ramp_of_either_sign

BACKENDS = [pytest.param(("cpu", "tvm_ffi"), id="tvm_ffi"), pytest.param(("c", "cython"), id="cython")]
HERE = re.escape(__file__)


def negative_row():
    n = T.symbolic("n")

    @T.prim_func
    def main(A: T.Tensor((64, n), "float32"), C: T.Tensor((64, n), "float32")):
        with T.Kernel(1) as _:
            C[-65, 0] = A[0, 0]

    return main


def row_past_the_end():
    n = T.symbolic("n")

    @T.prim_func
    def main(A: T.Tensor((64, n), "float32"), C: T.Tensor((64, n), "float32")):
        with T.Kernel(1) as _:
            C[0, 0] = A[64, 0]

    return main


def parallel_past_the_tile(guarded: bool = False):
    @T.prim_func
    def main(A: T.Tensor((64, 8), "float32"), C: T.Tensor((64, 8), "float32")):
        with T.Kernel(1) as _:
            S = T.alloc_shared((64, 8), "float32")
            T.copy(A, S)
            for i, j in T.Parallel(640, 8):
                if guarded:
                    if i < 64:
                        S[i, j] = S[i, j] * 2.0
                else:
                    S[i, j] = S[i, j] * 2.0
            T.copy(S, C)

    return main


def offset_read():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), C: T.Tensor((8,), "float32")):
        with T.Kernel(1) as _:
            for i in T.Parallel(8):
                C[i] = A[i + 64]

    return main


@pytest.mark.parametrize("make,message", [
    (negative_row, r"out-of-range index: write C\[-65, 0\] uses index -65 on axis 0 of C, whose extent is 64 "
                   r"\(shape \(64, n\)\); fix the index\n --> " + HERE + r":\d+:\d+\n \d+ \|\s+C\[-65, 0\] = A\[0, 0\]"),
    (row_past_the_end, r"read A\[64, 0\] uses index 64 on axis 0 of A, whose extent is 64 \(shape \(64, n\)\); "
                       r"fix the index\n --> " + HERE + r":\d+:\d+\n \d+ \|\s+C\[0, 0\] = A\[64, 0\]"),
    (parallel_past_the_tile, r"write S\[i, j\] uses index i \(from 0 to 639\) on axis 0 of S, whose extent is "
                             r"64 \(shape \(64, 8\)\); shrink the loop to the buffer's extent or guard the access"
                             r".*\n --> " + HERE + r":\d+:\d+\n \d+ \|\s+S\[i, j\] = S\[i, j\] \* 2.0"),
    (offset_read, r"read A\[i \+ 64\] uses index i \+ 64 \(from 64 to 71\) on axis 0 of A, whose extent is 64"),
])
def test_an_access_certain_to_leave_its_buffer_is_refused_with_its_line(make, message) -> None:
    with pytest.raises(LanguageError, match=message):
        make()


@pytest.mark.parametrize("backend", BACKENDS)
def test_guarded_accesses_are_not_refused(backend: tuple[str, str]) -> None:
    """Edge tiles are guarded (if / T.if_then_else): no compile-time error, right results."""
    target, execution = backend
    kernel = tilelang.compile(parallel_past_the_tile(guarded=True), out_idx=[-1], target=target,
                              execution_backend=execution)
    a = np.arange(64 * 8, dtype="float32").reshape(64, 8)
    np.testing.assert_array_equal(kernel(a), 2 * a)
    matmul = tilelang.compile(tiled_matmul(40, 24, 20), out_idx=[-1], target=target, execution_backend=execution,
                              pass_configs={"tl.bounds_check": True})
    x = np.random.default_rng(0).standard_normal((40, 20)).astype("float32")
    y = np.random.default_rng(1).standard_normal((20, 24)).astype("float32")
    np.testing.assert_allclose(matmul(x, y), x @ y, rtol=1e-5, atol=1e-5)


def shifted_read():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), k: T.int32, C: T.Tensor((64,), "float32")):
        with T.Kernel(1) as _:
            for i in T.serial(64):
                C[i] = A[i + k]

    return main


def scattered_write():
    @T.prim_func
    def main(A: T.Tensor((16,), "int32"), C: T.Tensor((16,), "float32")):
        with T.Kernel(1) as _:
            for i in T.serial(16):
                C[A[i]] = 1.0

    return main


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("key", ["tl.bounds_check", "tirx.instrument_bound_checkers", "tir.instrument_bound_checkers"])
def test_the_runtime_bounds_check_names_the_access_and_its_line(backend: tuple[str, str], key: str) -> None:
    target, execution = backend
    kernel = tilelang.compile(shifted_read(), out_idx=[-1], target=target, execution_backend=execution,
                              pass_configs={key: True})
    a = np.arange(64, dtype="float32")
    np.testing.assert_array_equal(kernel(a, 0), a)
    with pytest.raises(LaunchError, match=r"kernel 'main' failed: .*tl.bounds_check: out-of-bounds read of "
                                          r"A\[i \+ k\] \(shape \(64\)\) at " + HERE + r":\d+"):
        kernel(a, 1000)
    with pytest.raises(LaunchError, match=r"out-of-bounds read of A\[i \+ k\]"):
        kernel(a, -1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_runtime_bounds_check_catches_a_write(backend: tuple[str, str]) -> None:
    target, execution = backend
    kernel = tilelang.compile(scattered_write(), target=target, execution_backend=execution,
                              pass_configs={"tl.bounds_check": True})
    out = np.zeros(16, dtype="float32")
    kernel(np.arange(16, dtype="int32")[::-1].copy(), out)
    np.testing.assert_array_equal(out, np.ones(16, dtype="float32"))
    with pytest.raises(LaunchError, match=r"out-of-bounds write to C\[A\[i\]\] \(shape \(16\)\)"):
        kernel(np.full(16, 16, dtype="int32"), out)


# -- negative indices count from the end, as upstream (and Python) read them ----------------
def from_the_end():
    n = T.symbolic("n")

    @T.prim_func
    def main(A: T.Tensor((16,), "float32"), B: T.Tensor((8, n), "float32")):
        with T.Kernel(1) as _:
            B[-1, -1] = A[-1]  # a symbolic extent counts too: B[7, n - 1]
            for i in T.serial(4):
                B[0, i] = A[-i - 1]  # certain to be negative for every i: A[15 - i]
            B[1, 0] = A[T.int32(-16)]

    return main


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_negative_index_counts_from_the_end(backend):
    target, execution = backend
    kernel = tilelang.compile(from_the_end(), target=target, execution_backend=execution)
    a, b = np.arange(1, 17, dtype="float32"), np.zeros((8, 5), "float32")
    kernel(a, b)
    expected = np.zeros((8, 5), "float32")
    expected[7, 4], expected[0, :4], expected[1, 0] = 16, [16, 15, 14, 13], 1
    np.testing.assert_array_equal(b, expected)
    assert "A[15 - i]" in from_the_end().script()


def either_sign():
    @T.prim_func
    def main(A: T.Tensor((16,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1) as _:
            for i in T.serial(8):
                B[i] = A[i - 2]

    return main


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_index_of_either_sign_is_not_wrapped_but_guarded(backend: tuple[str, str]) -> None:
    """``A[i - 2]`` is -2 and -1 for two of its iterations only: upstream leaves it as
    written (not a wrap from the end) and guards the read of a global tensor, which gives 0
    there (transform/safe_memory.py); before, the read took memory before the tensor."""
    target, execution = backend
    a, b = np.arange(1, 17, dtype="float32"), np.full(8, -1, "float32")
    tilelang.compile(either_sign(), target=target, execution_backend=execution)(a, b)
    np.testing.assert_array_equal(b, [0, 0, 1, 2, 3, 4, 5, 6])


# -- hand-written vectors (T.Ramp): every lane is an index -------------------------------------
def ramp_from_the_end():
    @T.prim_func
    def main(A: T.Tensor((16,), "float32"), B: T.Tensor((4, 4), "float32")):
        with T.Kernel(1) as _:
            for t in T.serial(4):
                B[t, T.Ramp(0, 1, 4)] = A[T.Ramp(t * 2 - 12, 1, 4)]  # lanes -12 .. -3: A[4 + 2t ..]

    return main


def test_a_ramp_negative_in_every_lane_counts_from_the_end():
    # (LLVM only: TVM's C code generator has no vector types for a T.Ramp)
    a, b = np.arange(16, dtype="float32"), np.zeros((4, 4), "float32")
    tilelang.compile(ramp_from_the_end(), target="cpu")(a, b)
    np.testing.assert_array_equal(b, np.stack([a[4 + 2 * t:8 + 2 * t] for t in range(4)]))


def test_a_ramp_whose_lanes_leave_the_buffer_is_refused_with_its_line():
    """A lane past an axis' end is refused (before, the lanes were not checked: a store past
    the row faulted on the GPU). Lanes below 0, and not below minus the extent, count from
    the end instead (test_a_ramp_of_either_sign_wraps_lane_by_lane)."""
    with pytest.raises(LanguageError, match=r"write B\[t, T.Ramp\(1, 1, 4\)\] uses index T.Ramp\(1, 1, 4\) "
                                            r"\(from 1 to 4\) on axis 1 of B"):
        @T.prim_func
        def past_the_row(A: T.Tensor((16,), T.float32), B: T.Tensor((4, 4), T.float32)):
            with T.Kernel(1, threads=1) as _:
                for t in T.serial(4):
                    B[t, T.Ramp(1, 1, 4)] = A[T.Ramp(t * 4, 1, 4)]


def test_bitwise_indices_are_bounded_by_their_operands():
    """``tx ^ 1`` for tx in [0, 1024) lies in [0, 1023] (TVM bounds bitwise operations by
    their type, so upstream's issue-1257 kernel was refused); past the extent it still is."""
    @T.prim_func
    def swap_pairs(A: T.Tensor((64,), "int32"), B: T.Tensor((64,), "int32"), C: T.Tensor((8,), "int32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding(0)
            A[tx ^ 1] = tx | 64
            C[tx & 7] = 7 & tx  # every thread t stores t & 7 there
            B[tx] = A[(tx >> 1) ^ 3] * 0 + tx

    a, b, c = np.zeros(64, "int32"), np.zeros(64, "int32"), np.zeros(8, "int32")
    tilelang.compile(swap_pairs, target="cpu")(a, b, c)
    np.testing.assert_array_equal(a, [(t ^ 1) | 64 for t in range(64)])
    np.testing.assert_array_equal(b, np.arange(64))
    np.testing.assert_array_equal(c, np.arange(8))
    with pytest.raises(LanguageError, match=r"write S\[tx \^ 1\] uses index tx \^ 1 \(from 0 to 1023\) on axis 0 "
                                            r"of S, whose extent is 512"):
        @T.prim_func
        def past_the_tile(A: T.Tensor((1024,), "int32")):
            with T.Kernel(1, threads=1024):
                S = T.alloc_shared((512,), "int32")
                tx = T.get_thread_binding(0)
                S[tx ^ 1] = 0
                A[tx] = S[tx & 511]


def test_a_fragment_its_loops_write_past_its_declaration_is_sized_by_them() -> None:
    """Upstream's attention-sink kernels: ``sinks = T.alloc_fragment([heads], dtype)`` filled
    and read by ``T.Parallel(block_M)``. Upstream sizes a fragment by the loops that write
    it; so does this TileLang, with a warning naming the declaration to fix."""

    def kernel(read_past: bool):
        @T.prim_func
        def main(A: T.Tensor((64,), "float32"), S: T.Tensor((1,), "float32"), C: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=32):
                sinks = T.alloc_fragment([1], "float32")
                for i in T.Parallel(64):
                    sinks[i] = S[0]
                for i in T.Parallel(64):
                    C[i] = A[i] + (sinks[i + 1] if read_past else sinks[i])

        return main

    with pytest.warns(UserWarning, match=r"T.alloc_fragment 'sinks' is declared \(1,\) but its loops write it up to "
                                         r"\(63,\): it is sized \(64,\).*declare it \(64,\)\n --> " + HERE):
        grown = kernel(read_past=False)
    a = np.arange(64, dtype="float32")
    c = np.zeros(64, "float32")
    tilelang.compile(grown, target="cpu")(a, np.array([0.5], "float32"), c)
    np.testing.assert_array_equal(c, a + 0.5)
    assert tilelang.lower(grown, target={"kind": "cuda", "arch": "sm_90"}).device_source
    # a read past what the loops wrote is still refused
    with pytest.raises(LanguageError, match=r"read sinks\[i \+ 1\] uses index i \+ 1 \(from 1 to 64\) on axis 0 of sinks"):
        kernel(read_past=True)


def test_a_ramp_of_either_sign_wraps_lane_by_lane() -> None:
    """Upstream's issue 2554: ``A[T.Ramp(t - 2, 1, 4)]`` has negative lanes for some ``t``;
    each negative lane counts from the end (it was refused as out of range). The C target
    has no vectors, so LLVM's (tilelang-cuda's tests run the CUDA lowering)."""
    target, execution = "cpu", "tvm_ffi"
    load, store = ramp_of_either_sign()
    b = tilelang.compile(load, out_idx=[1], target=target, execution_backend=execution)(np.arange(1024, dtype="float32"))
    np.testing.assert_array_equal(b, [[1022, 1023, 0, 1], [1023, 0, 1, 2], [0, 1, 2, 3], [1, 2, 3, 4]])
    rows = np.arange(16, dtype="float32").reshape(4, 4)
    a = tilelang.compile(store, out_idx=[1], target=target, execution_backend=execution)(rows)
    expected = np.full(1024, -1, "float32")
    for t in range(4):  # the later iteration's store wins, as in the loop
        for lane in range(4):
            expected[(t - 2 + lane) % 1024] = rows[t, lane]
    np.testing.assert_array_equal(a, expected)


def test_a_ramp_under_a_condition_is_not_wrapped():
    """The bounds ignore conditions: ``s[T.Ramp(8 * (tx - 8), 1, 8)]`` under ``if tx >= 8``
    is never negative and stays as written (the wrap made a bool vector there, which CUDA's
    code generator cannot print; tilelang-cuda's explicit-Hopper cp.async kernel has it)."""

    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=16):
            tx = T.get_thread_binding()
            if tx >= 8:
                B[T.Ramp((tx - 8) * 8, 1, 8)] = A[T.Ramp((tx - 8) * 8, 1, 8)]

    assert "Select" not in main.script()
    a, b = np.arange(64, dtype="float32"), np.zeros(64, "float32")
    tilelang.compile(main, target="cpu")(a, b)
    np.testing.assert_array_equal(b, a)
