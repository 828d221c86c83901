"""Upstream's ``T.macro`` forms (its eager-jit tutorial and ``test_tilelang_language_frontend_v2.py``):
a macro's ``return`` value (an expression, a tuple, a variable), a macro passed to a kernel as an
argument, recursion that ends while parsing, and ``T.Ref`` parameters that store into the
caller's variable or buffer element. Run on the CPU backend against numpy (exact: integer
arithmetic, or float32 within 1e-6)."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T


def cpu(func):
    return tilelang.compile(func, target="c")


@T.macro
def add_one(x):
    return x + 1


def test_a_macros_return_value_is_the_calls_value_in_a_store():
    """``A[i] = add_one(A[i])``: TVMScript 0.27 emitted the macro's ``return`` as a statement and
    gave the call None, which the store handed to TVM (the process crashed)."""

    @T.prim_func
    def main(A: T.Tensor((32,), T.int32)):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(32):
                A[i] = add_one(A[i]) * 2

    a = np.arange(32, dtype=np.int32)
    cpu(main)(a)
    np.testing.assert_array_equal(a, (np.arange(32) + 1) * 2)


def test_a_macro_passed_to_a_jit_kernel_as_an_argument():
    """The tutorial's ``element_wise(A, add_one)``: the kernel calls ``fn(A[idx])``."""

    @tilelang.jit(target="c")
    def element_wise(A, fn):
        N = T.dynamic("N")
        A: T.Tensor[[N], T.float32]
        B = T.empty((N,), dtype=A.dtype)
        with T.Kernel(T.ceildiv(N, 64), threads=64) as bx:
            for i in T.Parallel(64):
                idx = bx * 64 + i
                if idx < N:
                    B[idx] = fn(A[idx])
        return B

    a = np.random.default_rng(0).standard_normal(200).astype(np.float32)
    b = element_wise(a, add_one)
    np.testing.assert_allclose(np.asarray(b), a + 1, rtol=0, atol=1e-6)


def test_a_macro_returns_several_values_a_variable_and_a_constant():
    @T.macro
    def sincos(x):
        return T.sin(x), T.cos(x)

    @T.macro
    def counter(start):
        return T.alloc_var(T.float32, init=start)

    @T.macro
    def zero():
        return 0

    @T.macro
    def apply(x, fn):
        return fn(x)

    @T.prim_func
    def main(X: T.Tensor((8,), T.float32), Y: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=1):
            total = counter(3.0)
            for i in T.serial(8):
                s, c = sincos(X[i])
                total += s * s + c * c
                Y[i] = apply(s - c, lambda v: v * 2.0) + zero()
            Y[0] = total

    x = np.linspace(-2, 2, 8).astype(np.float32)
    y = np.zeros(8, np.float32)
    cpu(main)(x, y)
    expected = (np.sin(x) - np.cos(x)) * 2
    expected[0] = 3.0 + 8.0
    np.testing.assert_allclose(y, expected, rtol=0, atol=1e-5)


@T.macro
def collatz(x, var: T.Ref):
    if x == 1:
        pass
    elif x % 2 == 0:
        var = var // 2
        collatz(x // 2, var)
    else:
        var = var * 3 + 1
        collatz(x * 3 + 1, var)


def collatz_reference(n: int, value: int) -> int:
    while n != 1:
        n, value = (n // 2, value // 2) if n % 2 == 0 else (3 * n + 1, 3 * value + 1)
    return value


@pytest.mark.parametrize("shape,index", [((1,), 0), ((4,), 2)], ids=["one-element", "element-of-four"])
def test_a_recursive_macro_updates_a_buffer_element_through_a_reference(shape, index):
    """The tutorial's Collatz macro: recursion decided while parsing (``x`` is a Python int),
    ``var = var // 2`` stores into ``A[index]``. An element of a larger buffer was rebound as
    a local of the macro before, leaving A unchanged."""

    @T.prim_func
    def main(A: T.Tensor(shape, T.int32)):
        with T.Kernel(1, threads=1):
            collatz(5, A[index])

    a = np.full(shape, 100, np.int32)
    cpu(main)(a)
    expected = np.full(shape, 100, np.int32)
    expected[index] = collatz_reference(5, 100)
    np.testing.assert_array_equal(a, expected)


def test_a_reference_to_a_variable_and_to_an_element_at_a_variable_index():
    @T.macro
    def set_to(x: T.Ref, value):
        x = value  # noqa: F841 - a store through the reference

    @T.prim_func
    def main(A: T.Tensor((4,), T.int32)):
        with T.Kernel(1, threads=1):
            idx = T.alloc_var(T.int32, 3)
            count = T.alloc_var(T.int32, 0)
            set_to(A[1], 7)
            set_to(A[idx], 9)
            set_to(count, 5)
            A[0] = count

    a = np.zeros(4, np.int32)
    cpu(main)(a)
    np.testing.assert_array_equal(a, [5, 7, 0, 9])


@pytest.mark.parametrize("annotation", ["Ref", "Var"])
def test_a_reference_parameter_refuses_a_plain_value(annotation):
    """Upstream refuses it with a ValueError that names the parameter (``T.Var`` is its older
    spelling of ``T.Ref``)."""
    @T.macro
    def set_one_ref(x: T.Ref):
        x = 1  # noqa: F841

    @T.macro
    def set_one_var(x: T.Var):
        x = 1  # noqa: F841

    chosen = set_one_ref if annotation == "Ref" else set_one_var
    with pytest.raises(ValueError, match=r"argument `x` is expected to be a variable \(T.alloc_var\) or a buffer "
                                         r"element or region, but got 1 \(int\)"):

        @T.prim_func
        def main():
            with T.Kernel(1):
                x = 1
                chosen(x)


def test_a_return_inside_a_kernel_branch_is_refused_with_its_line():
    @T.macro
    def clipped(x):
        if x > 0:
            return x
        return 0

    with pytest.raises(Exception, match="a T.macro returns its value from its own body, not from inside a T.If"):

        @T.prim_func
        def main(A: T.Tensor((4,), T.int32)):
            with T.Kernel(1, threads=1):
                A[0] = clipped(A[1])


def test_storing_the_value_of_a_macro_without_return_is_an_error_not_a_crash():
    @T.macro
    def nothing(x):
        T.evaluate(x)

    with pytest.raises(Exception, match=r"the value stored into A is None: a function or T.macro without `return` "
                                        r"gives None; return the value from it"):

        @T.prim_func
        def main(A: T.Tensor((4,), T.int32)):
            with T.Kernel(1, threads=1):
                A[0] = nothing(A[1])
