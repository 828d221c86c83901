"""Upstream TileLang's other spellings of a @tilelang.jit kernel: the kernel inside a
T.macro the body calls last (upstream's test_tilelang_language_eager_jit many_annot and
return cases), ``**kwargs`` compile-time constants with canonical cache keys (its
test_tilelang_jit_argument_binding), and a kernel named test_* at module level (its
test_tilelang_language_let), which pytest must not collect. Results are compared with
numpy; compilations are counted through tilelang.jit.compile."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang import ArgumentError, LanguageError

BLOCK = 8


def rand(*shape):
    return np.random.default_rng(sum(shape)).random(shape).astype("float32")


@T.macro
def scale_into(A, B):
    """upstream's copy_impl shape: sizes read from the tensors, checked, then the kernel."""
    M, N = A.shape
    M_, N_ = B.shape
    assert M == M_, f"M mismatch {M} {M_}"
    assert N == N_, f"N mismatch {N} {N_}"
    with T.Kernel(T.ceildiv(M, BLOCK), threads=32) as bx:
        for i, j in T.Parallel(BLOCK, N):
            if bx * BLOCK + i < M:
                B[bx * BLOCK + i, j] = A[bx * BLOCK + i, j] * 2.0


@T.macro
def scaled(A):
    """A macro that makes its output and returns it."""
    M, N = A.shape
    B = T.empty(M, N, dtype=A.dtype)
    with T.Kernel(T.ceildiv(M, BLOCK), threads=32) as bx:
        for i, j in T.Parallel(BLOCK, N):
            if bx * BLOCK + i < M:
                B[bx * BLOCK + i, j] = A[bx * BLOCK + i, j] * 2.0
    return B


class TestKernelInAMacro:
    def test_the_macro_writes_the_callers_tensors(self, compiles):
        @tilelang.jit(target="cpu")
        def by_consts(A, B):
            N, M = T.const("N, M")  # the macro names them the other way round
            A: T.Tensor[[N, M], T.float32]
            B: T.Tensor[[N, M], T.float32]
            scale_into(A, B)

        @tilelang.jit(target="cpu")
        def in_signature(A: T.Tensor[[16, 4], T.float32], B: T.Tensor[[16, 4], T.float32]):
            scale_into(A, B)

        @tilelang.jit(target="cpu")
        def dynamic_rows(A, B):
            N = T.dynamic("N")
            M = T.const("M")
            A: T.Tensor[[N, M], T.float32]
            B: T.Tensor[[N, M], T.float32]
            scale_into(A, B)

        assert by_consts.is_eager and in_signature.is_eager and dynamic_rows.is_eager
        for kernel, shapes in ((by_consts, [(16, 4), (20, 3)]), (in_signature, [(16, 4)]),
                               (dynamic_rows, [(16, 4), (21, 4)])):
            for shape in shapes:
                a, b = rand(*shape), np.zeros(shape, "float32")
                kernel(a, b)
                np.testing.assert_allclose(b, a * 2.0, rtol=1e-6, atol=0)
        assert len(compiles) == 4  # T.dynamic rows: one kernel for both shapes
        tir = by_consts.get_tir(T.Tensor((16, 4)), T.Tensor((16, 4)))
        assert [p.name for p in tir.params] == ["A", "B"]

    def test_a_macro_whose_names_are_the_callers_the_other_way_round(self):
        @T.macro
        def swapped(B, A):  # its B is the caller's A
            M, N = B.shape
            with T.Kernel(T.ceildiv(M, BLOCK), threads=32) as bx:
                for i, j in T.Parallel(BLOCK, N):
                    if bx * BLOCK + i < M:
                        A[bx * BLOCK + i, j] = B[bx * BLOCK + i, j] + 1.0

        @tilelang.jit(target="cpu")
        def add_one(A, B):
            M, N = T.const("M, N")
            A: T.Tensor[[M, N], T.float32]
            B: T.Tensor[[M, N], T.float32]
            swapped(A, B)

        a, b = rand(9, 5), np.zeros((9, 5), "float32")
        add_one(a, b)
        np.testing.assert_allclose(b, a + 1.0, rtol=1e-6, atol=0)
        np.testing.assert_array_equal(a, rand(9, 5))  # the input is left alone

    def test_the_macro_returns_its_output(self, compiles):
        @tilelang.jit(target="cpu")
        def returned(A):
            M, N = T.const("M, N")
            A: T.Tensor[[M, N], T.float32]
            return scaled(A)

        @tilelang.jit(target="cpu")
        def assigned(A):
            N = T.dynamic("N")
            M = T.const("M")
            A: T.Tensor[[N, M], T.float32]
            out = scaled(A)
            return out

        for kernel in (returned, assigned):
            for shape in ((16, 4), (11, 4)):
                a = rand(*shape)
                np.testing.assert_allclose(kernel(a), a * 2.0, rtol=1e-6, atol=0)
        assert len(compiles) == 3  # `assigned` is one kernel for both row counts

    def test_a_macro_calling_the_macro_with_the_kernel(self):
        @T.macro
        def outer(X):
            rows = X.shape[0]
            assert rows % 2 == 0, "even rows only"
            return scaled(X)

        @tilelang.jit(target="cpu")
        def twice(A):
            M, N = T.const("M, N")
            A: T.Tensor[[M, N], T.float32]
            return outer(A)

        a = rand(12, 3)
        np.testing.assert_allclose(twice(a), a * 2.0, rtol=1e-6, atol=0)

    def test_the_last_call_must_be_a_macro(self):
        def not_a_macro(A):
            return A

        @tilelang.jit(target="cpu")
        def k(A):
            A: T.Tensor((4,), T.float32)
            return not_a_macro(A)

        with pytest.raises(LanguageError, match=r"eager kernel 'k' \(.*test_eager_upstream_forms.py:\d+\): "
                                                r"its body has no top-level `with T.Kernel\(...\)` and ends "
                                                r"in a call of 'not_a_macro', a function, not a T.macro"):
            k(rand(4))

    def test_a_macro_without_a_kernel(self):
        @T.macro
        def nothing(A):
            _ = A.shape[0]

        @tilelang.jit(target="cpu")
        def k(A):
            A: T.Tensor((4,), T.float32)
            nothing(A)

        with pytest.raises(LanguageError, match=r"T.macro 'nothing' \(called by eager kernel 'k'\) "
                                                r"\(.*:\d+\) has no top-level `with T.Kernel\(...\)`"):
            k(rand(4))


def make_scale():
    @tilelang.jit(target="cpu")
    def scale(A, block: int = BLOCK, **options):
        M, N = T.const("M, N")
        A: T.Tensor[[M, N], T.float32]
        B = T.empty((M, N), T.float32)
        factor = options.get("factor", 1.0) * len(options.get("axes", ()) or [1])
        with T.Kernel(T.ceildiv(M, block), threads=32) as bx:
            for i, j in T.Parallel(block, N):
                if bx * block + i < M:
                    B[bx * block + i, j] = A[bx * block + i, j] * factor
        return B

    return scale


@dataclasses.dataclass
class Unhashable:  # eq=True without frozen=True: __hash__ is None
    axis: int


class TestKeywordArguments:
    def test_an_eager_kernel_takes_extra_keywords_as_constants(self, compiles):
        scale = make_scale()
        a = rand(10, 3)
        np.testing.assert_allclose(scale(a), a, rtol=1e-6, atol=0)
        np.testing.assert_allclose(scale(a, factor=3.0), a * 3.0, rtol=1e-6, atol=0)
        np.testing.assert_allclose(scale(a, factor=3.0, axes=[1, 2]), a * 6.0, rtol=1e-6, atol=0)
        scale(a, axes=[1, 2], factor=3.0)  # a list, and keywords in another order: the same kernel
        scale(a, block=BLOCK, factor=3.0)  # a default spelt out
        assert len(compiles) == 3
        np.testing.assert_allclose(scale(a, factor=3.0, axes={"x": [1]}), a * 3.0, rtol=1e-6, atol=0)
        assert len(compiles) == 4
        # a T.const given by keyword is one of them, and a constant too
        assert scale.compile(M=10, N=3, factor=3.0).from_cache

    def test_an_eager_keyword_that_cannot_be_a_key(self):
        with pytest.raises(ArgumentError, match=r"eager kernel 'scale': argument config=Unhashable\(axis=0\) "
                                                r"is an unhashable Unhashable, which cannot be normalised "
                                                r"into a compile-time cache key"):
            make_scale()(rand(4, 4), config=Unhashable(axis=0))
        assert issubclass(ArgumentError, TypeError)

    def test_a_builder_compiles_once_per_set_of_values_whatever_the_call_form(self, compiles):
        @tilelang.jit(out_idx=[-1], target="cpu")
        def fill(M: int, value: float = 1.0, twice: bool = False, **options):
            factor = 2.0 if twice else 1.0

            @T.prim_func
            def main(C: T.Tensor((M, 4), "float32")):
                with T.Kernel(1, threads=32):
                    for i, j in T.Parallel(M, 4):
                        C[i, j] = value * factor + len(options.get("axes", ()))

            return main

        kernel = fill(8)
        for same in (fill(8, 1.0), fill(8, 1.0, False), fill(M=8), fill(twice=False, value=1.0, M=8)):
            assert same is kernel
        assert len(compiles) == 1
        np.testing.assert_array_equal(kernel(), np.ones((8, 4), "float32"))
        with_axes = fill(8, axes=[0, 1])
        assert with_axes is fill(8, axes=[0, 1]) and with_axes is not kernel
        np.testing.assert_array_equal(with_axes(), np.full((8, 4), 3.0, "float32"))
        np.testing.assert_array_equal(fill(8, opts={"axis": [1, 2]})(), np.ones((8, 4), "float32"))
        assert fill(8, True) is not fill(8, 1)  # equal as Python values, different constants
        assert len(compiles) == 5

    def test_a_builders_call_errors(self):
        @tilelang.jit(out_idx=[-1], target="cpu")
        def fill(M: int, value: float = 1.0, **options):
            raise AssertionError("not built: the call is refused first")

        with pytest.raises(ArgumentError, match=r"@tilelang.jit function 'fill': argument "
                                                r"config=Unhashable\(axis=0\) is an unhashable Unhashable"):
            fill(8, config=Unhashable(axis=0))
        with pytest.raises(ArgumentError, match=r"'fill': multiple values for argument 'M'"):
            fill(8, M=8)
        with pytest.raises(ArgumentError, match=r"'fill': missing a required argument: 'M'"):
            fill(value=2.0)


def test_a_module_level_kernel_named_test_is_not_collected(tmp_path: Path):
    """upstream's let test defines `@tilelang.jit def test_kernel(A: T.Tensor(...))` at module
    level; pytest would collect it (a callable named test_* wrapping a function) and ask for
    a fixture `A`."""
    (tmp_path / "test_named.py").write_text(textwrap.dedent("""
        import tilelang
        import tilelang.language as T


        @tilelang.jit(target="cpu")
        def test_kernel(A: T.Tensor((4,), T.float32)):
            with T.Kernel(1, threads=32):
                for i in T.Parallel(4):
                    A[i] = 1.0


        def test_it_runs():
            assert test_kernel.is_eager
    """))
    # a pytest of its own: without this run's xdist worker variables, which would make it a worker
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "XDIST_"))}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-W",
                             "error::pytest.PytestCollectionWarning", str(tmp_path / "test_named.py")],
                            check=False, capture_output=True, text=True, cwd=tmp_path, timeout=300, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout and "fixture 'A' not found" not in result.stdout


def test_a_kernel_of_bare_launch_loops():
    """upstream's let test: an eager kernel whose body is `for _ in T.thread_binding(...)`
    loops, with no `with T.Kernel` (it compiles with no arguments, its tensors are static)."""
    @tilelang.jit(target="cpu")
    def shift(A: T.Tensor((4, 8), T.float32), step: int = 4):
        for bx in T.thread_binding(4, thread="blockIdx.x"):
            for tx in T.thread_binding(4, thread="threadIdx.x"):
                A[bx, step + tx] = A[bx, tx] * 2.0

    assert shift.is_eager
    a = rand(4, 8)
    expected = a.copy()
    expected[:, 4:] = a[:, :4] * 2.0
    shift(a)
    np.testing.assert_allclose(a, expected, rtol=1e-6)
    assert "shift(A: Tensor([4, 8], float32))" in shift.get_kernel_source()  # no arguments needed


def test_a_slice_bound_to_a_name_is_a_vector_value():
    """Upstream's test_tilelang_language_let: ``b = A[0, 0:4]`` then ``A[0, 4:8] = b``. The
    store handed the slice (a region) to TVM's BufferStore, a TypeError ("Expected ir.Expr
    but got ir.TensorRegion"); now it is the 4-lane load, and a slice over two axes says what
    to write instead."""

    @T.prim_func
    def shift(A: T.Tensor((4, 16), "float32")):
        with T.Kernel(1, threads=1):
            b = A[0, 0:4]
            A[1, 4:8] = b
            c = A[2, 3:4]
            A[3, 0] = c

    a = rand(4, 16)
    expected = a.copy()
    expected[1, 4:8] = a[0, 0:4]
    expected[3, 0] = a[2, 3]
    tilelang.compile(shift, target="cpu")(a)
    np.testing.assert_array_equal(a, expected)

    with pytest.raises(LanguageError, match=r"the value stored into A is a slice of A over 2 axes .* copy tiles "
                                            r"with T\.copy"):
        @T.prim_func
        def square(A: T.Tensor((4, 16), "float32")):
            with T.Kernel(1, threads=1):
                b = A[0:2, 0:2]
                A[2:4, 0:2] = b


@tilelang.jit
def through_a_workspace(A, block_N, dtype):
    N = T.const("N")
    A: T.Tensor[[N], dtype]
    B = T.empty([N], dtype=dtype)
    C = T.alloc_global([N], dtype)
    unused = T.alloc_global([4], dtype)  # noqa: F841  (declared, never used by the kernel)
    with T.Kernel(T.ceildiv(N, block_N), threads=block_N) as bx:
        for i in T.Parallel(block_N):
            C[bx * block_N + i] = A[bx * block_N + i] * 2
        T.copy(C[bx * block_N : (bx + 1) * block_N], B[bx * block_N : (bx + 1) * block_N])
    return B


def test_a_global_workspace_among_the_declarations():
    """Upstream's test_tilelang_language_alloc.py (alloc_global_eagerjit): T.alloc_global
    before the kernel of an eager function is a workspace the host allocates per call, as
    in a T.prim_func. It failed: "No builder in current scope"."""
    a = rand(96)
    np.testing.assert_array_equal(through_a_workspace(a, 32, "float32"), a * 2)
    b = rand(64)  # another size: another kernel, its own workspace
    np.testing.assert_array_equal(through_a_workspace(b, 32, "float32"), b * 2)
