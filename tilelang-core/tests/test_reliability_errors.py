"""Errors that point at the user's line (issue 15, item 6).

Before: T.copy / T.gemm shape errors carried no source line, TVMScript's internal checks
leaked (``Check failed: buffer->shape.size() == indices.size()``), and a float stored into
an int buffer compiled with only a C++ warning on stderr.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.errors import LanguageError

BACKENDS = [pytest.param(("cpu", "tvm_ffi"), id="tvm_ffi"), pytest.param(("c", "cython"), id="cython")]
HERE = re.escape(__file__)


def copy_mismatch():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1) as _:
            S = T.alloc_shared((32, 32), "float32")
            T.copy(A[0:64, 0:64], S)
            T.copy(S, B[0:32, 0:32])

    return main


def gemm_mismatch():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1) as _:
            As = T.alloc_shared((32, 16), "float32")
            Bs = T.alloc_shared((32, 32), "float32")
            Cl = T.alloc_fragment((32, 32), "float32")
            T.copy(A[0, 0], As)
            T.copy(A[0, 0], Bs)
            T.gemm(As, Bs, Cl)
            T.copy(Cl, B[0, 0])

    return main


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("make,message", [
    (copy_mismatch, r"kernel 'main', T.copy: source tile \[64, 64\] and destination tile \[32, 32\] differ in "
                    r"shape\n --> " + HERE + r":\d+:\d+\n \d+ \|\s+T.copy\(A\[0:64, 0:64\], S\)"),
    (gemm_mismatch, r"kernel 'main', T.gemm: shapes do not agree: A \[32, 16\], B \[32, 32\], C \[32, 32\]\n --> "
                    + HERE + r":\d+:\d+\n \d+ \|\s+T.gemm\(As, Bs, Cl\)"),
])
def test_tile_op_shape_errors_carry_the_line(backend: tuple[str, str], make, message: str) -> None:
    target, execution = backend
    with pytest.raises(LanguageError, match=message):
        tilelang.compile(make(), target=target, execution_backend=execution)


def store_with_too_few_indices():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1) as _:
            for i in T.serial(64):
                B[i] = A[i, 0]

    return main


def read_with_too_many_indices():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1) as _:
            for i in T.serial(64):
                B[i] = A[i, 0]

    return main


def read_of_a_row():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1) as _:
            for i in T.serial(64):
                B[i, 0] = A[i]

    return main


@pytest.mark.parametrize("make,message", [
    (store_with_too_few_indices,
     r"^B has 2 axes but is written with 1 index; index every axis \(B\[i0, ..., i1\]\) to store one element\n"
     r" --> " + HERE + r":\d+:\d+\n(.*\n)*\(TVMScript: Check failed: buffer->shape.size\(\) == indices.size\(\)"),
    (read_with_too_many_indices, r"^a tensor with 1 axis is indexed with 2 indices; use one index per axis\n --> " + HERE),
    (read_of_a_row, r"^a value is needed here, but the tensor access gives a region: .* index every axis "
                    r"\(A\[i, j\]\) to read one element\n --> " + HERE),
])
def test_tvmscript_checks_are_explained(make, message: str) -> None:
    with pytest.raises(LanguageError, match=message):
        make()


def float_into_int(explicit: bool):
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "int32")):
        with T.Kernel(1) as _:
            for i in T.serial(64):
                if explicit:
                    B[i] = T.cast(A[i] * 2.0, "int32")
                else:
                    B[i] = A[i] * 2.0

    return main


def test_a_float_stored_into_an_int_buffer_is_refused() -> None:
    with pytest.raises(LanguageError, match=r"^a float32 value is stored into B, a int32 buffer: the fraction would "
                                            r"be dropped silently; write T.cast\(value, 'int32'\) to truncate toward "
                                            r"zero .*\n --> " + HERE + r":\d+:\d+\n \d+ \|\s+B\[i\] = A\[i\] \* 2.0"):
        float_into_int(explicit=False)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_explicit_cast_truncates_toward_zero(backend: tuple[str, str]) -> None:
    target, execution = backend
    kernel = tilelang.compile(float_into_int(explicit=True), out_idx=[-1], target=target, execution_backend=execution)
    a = np.linspace(-3.3, 3.3, 64, dtype="float32")
    np.testing.assert_array_equal(kernel(a), np.trunc(a * 2).astype("int32"))


def zero_into_int():
    @T.prim_func
    def main(B: T.Tensor((64,), "int32")):
        with T.Kernel(1) as _:
            for i in T.serial(64):
                B[i] = 0.0

    return main


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_integral_float_literal_into_an_int_buffer_is_accepted(backend: tuple[str, str]) -> None:
    target, execution = backend
    kernel = tilelang.compile(zero_into_int(), target=target, execution_backend=execution)
    out = np.ones(64, dtype="int32")
    kernel(out)
    np.testing.assert_array_equal(out, np.zeros(64, dtype="int32"))


def prev_under_a_condition():
    @T.prim_func
    def main(A: T.Tensor((4,), "int32"), B: T.Tensor((1,), "int32"), P: T.Tensor((4,), "int32")):
        with T.Kernel(1) as _:
            for i in T.serial(4):
                P[i] = T.if_then_else(A[i] > 0, T.atomic_add(B[0], 1, return_prev=True), -1)

    return main


def atomic_shapes():
    @T.prim_func
    def main(A: T.Tensor((4, 8), "float32"), B: T.Tensor((4, 8), "float32")):
        with T.Kernel(1) as _:
            T.atomic_max(B[0:4, 0:4], A[0:4, 0:8])

    return main


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("make,message", [
    (prev_under_a_condition, r"return_prev inside a conditional expression .* assign it in an `if` statement "
                             r"instead\n --> " + HERE + r":\d+:\d+\n \d+ \|\s+P\[i\] = T.if_then_else"),
    (atomic_shapes, r"T.atomic_max: destination tile \[4, 4\] and value tile \[4, 8\] differ in shape\n --> "
                    + HERE + r":\d+:\d+\n \d+ \|\s+T.atomic_max\(B\[0:4, 0:4\], A\[0:4, 0:8\]\)"),
])
def test_atomic_errors_carry_the_line(backend: tuple[str, str], make, message: str) -> None:
    target, execution = backend
    with pytest.raises(LanguageError, match=message):
        tilelang.compile(make(), target=target, execution_backend=execution)


def fragment_over_a_run_time_range():
    n = T.dynamic("n")

    @T.prim_func
    def main(data: T.Tensor((4, n), "float32")):
        with T.Kernel(4, threads=128) as bx:
            frag = T.alloc_fragment((128,), "float32")
            for i in T.Parallel(128):
                if i < n:
                    frag[i] = data[bx, i]
            for i in T.Parallel(n):
                frag[i] = 0
            for i in T.Parallel(128):
                if i < n:
                    data[bx, i] = frag[i] + 1

    return main


@pytest.mark.parametrize("target", ["cpu", {"kind": "cuda", "arch": "sm_80"}], ids=["cpu", "cuda"])
def test_a_fragment_indexed_over_a_run_time_range_is_refused_at_its_line(target) -> None:
    """Upstream's FragmentLoopChecker rule: a fragment's elements are placed on threads at
    compile time, so a T.Parallel loop of run-time extent may run past it. Before, it
    compiled: with n = 5000 the CPU kernel wrote past the fragment and the process died."""
    with pytest.raises(LanguageError, match=r"fragment 'frag' is indexed by i, the variable of T.Parallel\(n\), "
                       r"whose range is known only at run time.*T.Parallel\(128\): if i < \.\.\.\)") as err:
        tilelang.lower(fragment_over_a_run_time_range(), target=target)
    assert f"{__file__}:" in str(err.value) and "frag[i] = 0" in str(err.value)
    # upstream's key turns the check off (the kernel is then the user's responsibility)
    tilelang.lower(fragment_over_a_run_time_range(), target=target,
                   pass_configs={"tl.disable_prelower_semantic_check": True})
