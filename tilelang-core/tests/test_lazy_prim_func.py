"""Upstream's lazy T.prim_func: parameters declared in the body, T.empty outputs returned,
T.annotate_pass_configs / T.annotate_compile_flags among the declarations; all recorded as
attributes (tilelang_out_idx, tilelang_pass_configs, tilelang_compile_flags) that
tilelang.compile reads."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang import PassConfigKey
from tilelang.errors import LanguageError


@T.prim_func
def doubled(A):
    A: T.Tensor[[64, 64], T.float32]
    T.annotate_pass_configs({PassConfigKey.TL_ENABLE_FAST_MATH: True})
    T.annotate_compile_flags(["-O2"])
    B = T.empty([64, 64], T.float32)
    with T.Kernel(1):
        for i in T.serial(64):
            for j in T.serial(64):
                B[i, j] = A[i, j] * 2.0
    return B


@T.prim_func
def shifted(A, B):
    m = T.dynamic("m")
    A: T.Tensor[[m], T.float32]
    B: T.Tensor[[m], T.float32]
    with T.Kernel(1, threads=1):
        for i in T.serial(m):
            B[i] = A[i] + 1.0


def test_declarations_become_attributes():
    attrs = doubled.attrs
    assert list(attrs["tilelang_out_idx"]) == [-1]
    assert bool(attrs["tilelang_pass_configs"]["tl.enable_fast_math"])
    assert list(attrs["tilelang_compile_flags"]) == ["-O2"]
    assert "tilelang_out_idx" not in shifted.attrs


@pytest.mark.parametrize("backend", [("cpu", "tvm_ffi"), ("c", "cython")])
def test_a_returned_empty_is_the_output(backend):
    kernel = tilelang.compile(doubled, target=backend[0], execution_backend=backend[1])
    a = np.random.default_rng(0).random((64, 64), dtype=np.float32)
    np.testing.assert_array_equal(kernel(a), a * 2)


def test_body_annotations_with_a_dynamic_size():
    kernel = tilelang.compile(shifted, out_idx=[1], target="cpu")
    np.testing.assert_array_equal(kernel(np.arange(5, dtype=np.float32)), np.arange(1, 6, dtype=np.float32))
    np.testing.assert_array_equal(kernel(np.zeros(9, np.float32)), np.ones(9, np.float32))


def test_out_idx_given_twice_is_a_conflict():
    with pytest.raises(ValueError, match=r"Out index conflict: kernel 'doubled' returns its T.empty outputs "
                                         r"\(out_idx \[-1\]\) and the compile was given out_idx=\[-1\]"):
        tilelang.compile(doubled, out_idx=[-1], target="cpu")


def test_a_const_size_needs_the_jit():
    with pytest.raises(LanguageError, match=r"T.prim_func 'sized': T.const \['N'\] takes its values from a "
                                            r"call's tensors; decorate the function with @tilelang.jit"):
        @T.prim_func
        def sized(A):
            N = T.const("N")
            A: T.Tensor[[N], T.float32]
            with T.Kernel(1):
                A[0] = 1.0


def test_an_undeclared_parameter_is_named():
    with pytest.raises(LanguageError, match=r"T.prim_func 'half': parameter\(s\) \['n'\] are declared neither"):
        @T.prim_func
        def half(A, n):
            A: T.Tensor[[8], T.float32]
            with T.Kernel(1):
                A[0] = 1.0


def test_scalar_annotations_are_run_time_scalar_parameters():
    """`n: T.int32` in the signature and `bias: T.float32` in the body are scalar parameters
    of the PrimFunc, in signature order before the outputs, as upstream's lazy style makes them."""
    @T.prim_func
    def scaled(A, n: T.int32, bias):
        A: T.Tensor[[16], T.float32]
        bias: T.float32
        B = T.empty([16], T.float32)
        with T.Kernel(1, threads=16):
            for i in T.Parallel(16):
                B[i] = A[i] * n + bias
        return B

    assert [str(p.name) for p in scaled.params] == ["A", "n", "bias", "B"]
    assert [str(scaled.params[i].ty.dtype) for i in (1, 2)] == ["int32", "float32"]
    kernel = tilelang.compile(scaled, target="cpu")
    a = np.arange(16, dtype=np.float32)
    np.testing.assert_array_equal(kernel(a, 3, 0.5), a * 3 + 0.5)
    np.testing.assert_array_equal(kernel(a, -2, 1.0), a * -2 + 1.0)


def test_the_annotations_outside_declarations_say_where_they_belong():
    with pytest.raises(LanguageError, match=r"T.annotate_pass_configs is only valid in the body of an eager "
                                            r"@tilelang.jit function, or of a T.prim_func whose parameters"):
        T.annotate_pass_configs({"tl.enable_fast_math": True})
