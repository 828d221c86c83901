"""Property tests over tile-op shapes (issue 15, item 7): T.copy / T.gemm / T.reduce_* /
T.fill kernels built from hypothesis-drawn extents, some mismatched, most with edge tiles
(extents that the tiles do not divide). Each must either compile and give numpy's result
on the CPU, or be refused at compile time with a LanguageError/CompileError that points at
the user's line (`` --> file:line``); never another exception, never a wrong result.

Every example is a fresh compile (about a second), so the counts are small: the ``ci``
profile compiles 40 kernels in all (10 per test), ``nightly`` 240 (see
test_fuzz_arguments.py for the profiles and TILELANG_FUZZ_PROFILE).
"""

from __future__ import annotations

import collections
import os
import re

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")  # the [test] extra; wheel_tests' venv lacks it
import tilelang
import tilelang.language as T
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from tilelang.errors import CompileError, LanguageError, TileLangError

PROFILE = os.environ.get("TILELANG_FUZZ_PROFILE", "ci")
if PROFILE not in ("ci", "nightly"):
    raise ValueError(f"TILELANG_FUZZ_PROFILE={PROFILE!r}: use 'ci' or 'nightly'")
COMPILES = {"ci": 10, "nightly": 60}[PROFILE]  # per test
# no shrinking: each step is a compile, and hypothesis spent five minutes shrinking one
# failure here; the failing example is printed as found
BASE = settings(deadline=None, database=None, derandomize=PROFILE == "ci", print_blob=True,
                max_examples=COMPILES, phases=[Phase.explicit, Phase.reuse, Phase.generate],
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                       HealthCheck.filter_too_much])
BACKENDS = st.sampled_from([("cpu", "tvm_ffi"), ("c", "cython")])
HERE = re.escape(__file__)
extent = st.integers(1, 40)
TALLY: collections.Counter[tuple[str, str]] = collections.Counter()


@pytest.fixture(scope="module", autouse=True)
def report():
    yield
    if TALLY:
        print("\ntile-shape fuzz, kernels per op:", dict(sorted(TALLY.items())))
tile = st.sampled_from([1, 2, 4, 8, 16, 32])


def compile_or_refuse(make, backend: tuple[str, str], out_idx=(-1,)):
    """The kernel ``make()`` builds (parse errors arise there), compiled, or None after
    checking that the refusal points at this file."""
    target, execution = backend
    op = make.__code__.co_names[0] if make.__name__ == "<lambda>" else make.__name__
    try:
        kernel = tilelang.compile(make(), out_idx=list(out_idx), target=target, execution_backend=execution)
        TALLY[op, f"compiled ({execution})"] += 1
        return kernel
    except (LanguageError, CompileError) as e:
        TALLY[op, f"refused ({execution})"] += 1
        message = str(e)
        assert re.search(r" --> " + HERE + r":\d+", message), f"{type(e).__name__} without the user's line: {message}"
        return None
    except TileLangError as e:
        raise AssertionError(f"refused with {type(e).__name__}, not a LanguageError/CompileError: {e}") from e


# -- T.copy ----------------------------------------------------------------------------------

def copy_tiles(M: int, N: int, bm: int, bn: int, sm: int, sn: int, point: bool):
    """B = A through a shared (sm, sn) tile per (bm, bn) block; ``point``: the regions take
    their extent from the tile (A[y, x]), else slices of (bm, bn) (a mismatch when the
    tile's shape differs)."""

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=32) as (bx, by):
            S = T.alloc_shared((sm, sn), "float32")
            if point:
                T.copy(A[by * bm, bx * bn], S)
                T.copy(S, B[by * bm, bx * bn])
            else:
                T.copy(A[by * bm:by * bm + bm, bx * bn:bx * bn + bn], S)
                T.copy(S, B[by * bm:by * bm + bm, bx * bn:bx * bn + bn])

    return main


@settings(BASE)
@given(M=extent, N=extent, bm=tile, bn=tile, mismatch=st.booleans(), point=st.booleans(), backend=BACKENDS,
       other=tile, data=st.data())
def test_copy(M, N, bm, bn, mismatch, point, backend, other, data) -> None:
    sm, sn = (bm, bn) if point else (other, bn) if mismatch else (bm, bn)
    kernel = compile_or_refuse(lambda: copy_tiles(M, N, bm, bn, sm, sn, point), backend)
    if (sm, sn) != (bm, bn):
        assert kernel is None, f"a ({bm}, {bn}) region copied into a ({sm}, {sn}) tile compiled"
        return
    if kernel is None:
        pytest.fail(f"copy_tiles({M}, {N}, {bm}, {bn}) with matching tiles was refused")
    a = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1))).standard_normal((M, N)).astype("float32")
    np.testing.assert_array_equal(kernel(a), a)


# -- T.gemm ----------------------------------------------------------------------------------

def gemm_tiles(M: int, N: int, K: int, bm: int, bn: int, bk: int, bk_b: int):
    """C = A @ B with (bm, bk) and (bk_b, bn) shared tiles: a mismatch when bk_b != bk."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=32) as (bx, by):
            As = T.alloc_shared((bm, bk), "float32")
            Bs = T.alloc_shared((bk_b, bn), "float32")
            Cl = T.alloc_fragment((bm, bn), "float32")
            T.clear(Cl)
            for ko in T.serial(T.ceildiv(K, bk)):
                T.copy(A[by * bm, ko * bk], As)
                T.copy(B[ko * bk, bx * bn], Bs)
                T.gemm(As, Bs, Cl)
            T.copy(Cl, C[by * bm, bx * bn])

    return main


@settings(BASE)
@given(M=extent, N=extent, K=extent, bm=tile, bn=tile, bk=tile, bk_b=tile, mismatch=st.booleans(),
       backend=BACKENDS, data=st.data())
def test_gemm(M, N, K, bm, bn, bk, bk_b, mismatch, backend, data) -> None:
    bk_b = bk_b if mismatch else bk
    kernel = compile_or_refuse(lambda: gemm_tiles(M, N, K, bm, bn, bk, bk_b), backend)
    if bk_b != bk:
        assert kernel is None, f"T.gemm of ({bm}, {bk}) x ({bk_b}, {bn}) tiles compiled"
        return
    if kernel is None:
        pytest.fail(f"gemm_tiles({M}, {N}, {K}, {bm}, {bn}, {bk}) with matching tiles was refused")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    a = rng.standard_normal((M, K)).astype("float32")
    b = rng.standard_normal((K, N)).astype("float32")
    np.testing.assert_allclose(kernel(a, b), a @ b, rtol=1e-4, atol=1e-4)


# -- T.reduce_* --------------------------------------------------------------------------------

REDUCERS = {
    "sum": (lambda x, r, dim: T.reduce_sum(x, r, dim=dim), lambda x, d: x.sum(axis=d)),
    "max": (lambda x, r, dim: T.reduce_max(x, r, dim=dim), lambda x, d: x.max(axis=d)),
    "min": (lambda x, r, dim: T.reduce_min(x, r, dim=dim), lambda x, d: x.min(axis=d)),
    "abssum": (lambda x, r, dim: T.reduce_abssum(x, r, dim=dim), lambda x, d: np.abs(x).sum(axis=d)),
    "absmax": (lambda x, r, dim: T.reduce_absmax(x, r, dim=dim), lambda x, d: np.abs(x).max(axis=d)),
}


def reduce_tile(M: int, N: int, kind: str, dim: int, out: int):
    """R = reduce(X, dim) through fragments; a mismatch when ``out`` is not the kept extent."""
    reduce = REDUCERS[kind][0]

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), R: T.Tensor((out,), "float32")):
        with T.Kernel(1, threads=32) as _:
            x = T.alloc_fragment((M, N), "float32")
            r = T.alloc_fragment((out,), "float32")
            T.copy(X, x)
            reduce(x, r, dim)
            T.copy(r, R)

    return main


@settings(BASE)
@given(M=extent, N=extent, kind=st.sampled_from(sorted(REDUCERS)), dim=st.sampled_from([0, 1, -1, 2, -3]),
       backend=BACKENDS, data=st.data())
def test_reduce(M, N, kind, dim, backend, data) -> None:
    kept = {0: N, 1: M, -1: M}.get(dim)
    kernel = compile_or_refuse(lambda: reduce_tile(M, N, kind, dim, kept or M), backend)
    if kept is None:
        assert kernel is None, f"reduce_{kind} of a ({M}, {N}) tile over dim {dim} compiled"
        return
    if kernel is None:
        pytest.fail(f"reduce_{kind} of a ({M}, {N}) tile over dim {dim} into ({kept},) was refused")
    x = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1))).standard_normal((M, N)).astype("float32")
    np.testing.assert_allclose(kernel(x), REDUCERS[kind][1](x, dim), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("out", [2, 8])
def test_reduce_into_a_destination_of_another_extent_is_refused(out: int) -> None:
    kernel = compile_or_refuse(lambda: reduce_tile(4, 4, "sum", 0, out), ("cpu", "tvm_ffi"))
    assert kernel is None, f"reduce_sum of a (4, 4) tile over dim 0 into ({out},) compiled"


# -- T.fill ----------------------------------------------------------------------------------

def fill_region(M: int, N: int, r0: int, r1: int, c0: int, c1: int, value: float):
    @T.prim_func
    def main(Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=32) as _:
            T.fill(Y[r0:r1, c0:c1], value)

    return main


@settings(BASE)
@given(M=extent, N=extent, r=st.tuples(st.integers(0, 44), st.integers(1, 44)),
       c=st.tuples(st.integers(0, 44), st.integers(1, 44)), value=st.floats(width=32, allow_nan=False),
       backend=BACKENDS)
def test_fill(M, N, r, c, value, backend) -> None:
    (r0, rlen), (c0, clen) = r, c
    r1, c1 = r0 + rlen, c0 + clen
    kernel = compile_or_refuse(lambda: fill_region(M, N, r0, r1, c0, c1, value), backend, out_idx=())
    inside = r1 <= M and c1 <= N
    if kernel is None:
        # a region past the tensor may be refused (with the line: checked above) ...
        assert not inside, f"T.fill of Y[{r0}:{r1}, {c0}:{c1}] on a ({M}, {N}) tensor was refused"
        return
    # ... or clipped at its edge, as tile ops treat edge tiles: nothing written past it
    memory = np.full(M * N + 64, -1.0, "float32")
    y = memory[:M * N].reshape(M, N)
    kernel(y)
    expected = np.full(M * N + 64, -1.0, "float32")
    expected[:M * N].reshape(M, N)[r0:r1, c0:c1] = np.float32(value)
    np.testing.assert_array_equal(memory, expected)


def test_a_float32_constant_survives_the_c_target() -> None:
    # TVM's C codegen printed 100.34375f as 1.003438e+02f (7 significant digits; found by
    # this fuzz test on cython): such constants are now written as their bits
    kernel = compile_or_refuse(lambda: fill_region(1, 1, 0, 1, 0, 1, 100.34375), ("c", "cython"), out_idx=())
    y = np.zeros((1, 1), "float32")
    kernel(y)
    assert y[0, 0] == np.float32(100.34375)


def _double_constants():
    @T.prim_func
    def main(Y: T.Tensor((3,), "float64")):
        with T.Kernel(1, threads=1) as _:
            Y[0] = T.float64(1.0 / 3.0)  # %e would print 3.333333e-01
            Y[1] = T.float64(0.5)  # printed as it is
            Y[2] = T.float64(2.0**-30 + 1.0)

    return main


def test_float64_constants_survive_the_c_target() -> None:
    kernel = compile_or_refuse(_double_constants, ("c", "cython"), out_idx=())
    y = np.zeros(3, "float64")
    kernel(y)
    np.testing.assert_array_equal(y, [1.0 / 3.0, 0.5, 2.0**-30 + 1.0])
