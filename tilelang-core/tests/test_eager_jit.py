"""Eager @tilelang.jit kernels (upstream TileLang's current style): tensors declared in the
body with annotations, sizes named by T.const (per-shape kernels) or T.dynamic (one kernel
for every size), outputs made by T.empty and returned by the call. Results are compared
with numpy/torch; compilations are counted through tilelang.jit.compile."""

from __future__ import annotations

import contextlib
import math

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang import ArgumentError, LanguageError

torch = pytest.importorskip("torch")


def rand(*shape, dtype="float32"):
    return np.random.default_rng(len(shape) + sum(shape)).random(shape).astype(dtype)


def make_add():
    @tilelang.jit(target="cpu")
    def add(A, B, block_M: int = 16, dtype=T.float32):
        M, N = T.const("M, N")
        A: T.Tensor((M, N), dtype)
        B: T.Tensor((M, N), dtype)
        C = T.empty((M, N), dtype)
        with T.Kernel(T.ceildiv(M, block_M), threads=32) as bx:
            for i, j in T.Parallel(block_M, N):
                if bx * block_M + i < M:
                    C[bx * block_M + i, j] = A[bx * block_M + i, j] + B[bx * block_M + i, j]
        return C

    return add


def test_call_runs_and_returns_the_output(compiles):
    add = make_add()
    assert add.is_eager
    a, b = rand(37, 12), rand(37, 12) * 2
    c = add(a, b)
    assert isinstance(c, np.ndarray)
    np.testing.assert_allclose(c, a + b, rtol=1e-6, atol=0)
    ta, tb = torch.randn(20, 8), torch.randn(20, 8)
    tc = add(ta, tb, block_M=8)
    assert isinstance(tc, torch.Tensor)
    torch.testing.assert_close(tc, ta + tb, rtol=1e-6, atol=0)
    assert len(compiles) == 2


def test_one_compile_per_shape_and_non_tensor_arguments(compiles):
    add = make_add()
    a = rand(10, 4)
    add(a, a)
    add(rand(10, 4), rand(10, 4))  # same shape: the kernel in memory
    assert len(compiles) == 1
    add(rand(11, 4), rand(11, 4))
    add(a, a, block_M=32)
    add(a, a, 32)
    assert len(compiles) == 3
    assert [int(f.params[0].shape[0]) for f in compiles] == [10, 11, 10]


def test_compile_without_tensors_is_the_kernel_the_call_uses(compiles):
    add = make_add()
    kernel = add.compile(M=24, N=6, block_M=8)
    assert isinstance(kernel, tilelang.JITKernel)
    a, b = rand(24, 6), rand(24, 6)
    np.testing.assert_allclose(kernel(a, b), a + b, rtol=1e-6, atol=0)
    np.testing.assert_allclose(add(a, b, block_M=8), a + b, rtol=1e-6, atol=0)
    assert add.compile(a, b, block_M=8) is kernel
    assert len(compiles) == 1
    assert "C: T.Buffer((24, 6), \"float32\")" in add.get_tir(M=24, N=6).script()


def test_dynamic_dimensions_do_not_recompile(compiles):
    @tilelang.jit(target="cpu")
    def scale(X, Y, factor: float = 2.0):
        N = T.dynamic("N")
        M = T.const("M")
        X: T.Tensor[[N, M], T.float32]
        Y: T.Tensor[[N, M], T.float32]
        with T.Kernel(T.ceildiv(N, 8), threads=32) as bx:
            for i, j in T.Parallel(8, M):
                if bx * 8 + i < N:
                    Y[bx * 8 + i, j] = X[bx * 8 + i, j] * factor

    for rows in (1, 9, 40):
        x, y = rand(rows, 5), np.zeros((rows, 5), "float32")
        assert scale(x, y) is None  # no return: the kernel wrote into y
        np.testing.assert_allclose(y, x * 2.0, rtol=1e-6, atol=0)
    assert len(compiles) == 1
    scale(rand(3, 7), np.zeros((3, 7), "float32"))  # M is a T.const: a new kernel
    assert len(compiles) == 2


def test_scalar_dtype_annotations_are_run_time_arguments(compiles):
    """`n: T.int32` (signature) and `bias: T.float32` (body) are scalars the kernel takes at
    run time, as upstream's eager builder makes them: one kernel for every value. A plain
    Python parameter (`times`) stays a compile-time value, one kernel each."""
    @tilelang.jit(target="cpu")
    def affine(A, n: T.int32, bias, times=1):
        M = T.const("M")
        A: T.Tensor((M,), T.float32)
        bias: T.float32
        B = T.empty((M,), T.float32)
        with T.Kernel(1, threads=32):
            for i in T.Parallel(M):
                B[i] = A[i] * n * times + bias
        return B

    a = rand(20)
    for n, bias in ((3, 0.5), (-7, 2.25), (0, 1.0)):
        np.testing.assert_allclose(affine(a, n, bias), a * n + bias, rtol=1e-6, atol=0)
    np.testing.assert_allclose(affine(a, bias=1.5, n=4), a * 4 + 1.5, rtol=1e-6, atol=0)
    assert len(compiles) == 1
    assert [str(p.name) for p in compiles[0].params] == ["A", "n", "bias", "B"]
    np.testing.assert_allclose(affine(a, 2, 0.0, times=3), a * 6, rtol=1e-6, atol=0)
    assert len(compiles) == 2
    assert affine.compile(a, 5, 0.0) is affine.compile(a, 6, 1.0)  # the values are no part of the key


@pytest.mark.parametrize("backend", [("cpu", "tvm_ffi"), ("c", "cython")])
def test_a_run_time_scalar_may_size_an_output(backend):
    """`B = T.empty((n,))` with `n: T.int32` a run-time scalar: the call's value sizes B."""
    @tilelang.jit(target=backend[0], execution_backend=backend[1])
    def head(A, n: T.int32):
        m = T.dynamic("m")
        A: T.Tensor((m,), T.float32)
        B = T.empty((n,), T.float32)
        with T.Kernel(1, threads=1):
            for i in T.serial(n):
                B[i] = A[i] * 2
        return B

    @tilelang.jit(target=backend[0], execution_backend=backend[1])
    def doubled(A, n: T.int32):
        A: T.Tensor((n,), T.float32)
        B = T.empty((n,), T.float32)
        with T.Kernel(1, threads=1):
            for i in T.serial(n):
                B[i] = A[i] * 2
        return B

    a = rand(40)
    for n in (3, 17, 0):
        np.testing.assert_array_equal(head(a, n), a[:n] * 2)
    # the symbols a bind hands on (launchers pass them by name) are the tensor-bound ones:
    # `n` is already in the call, as a positional argument
    from tilelang.jit.arguments import ArgumentBinder

    assert ArgumentBinder(head.compile(a, 3).artifact, 1).bind_checked((a, 5))[2] == {"m": 40}
    # torch tensors take the fast binder, which sizes the output from the scalar too
    from tilelang.jit.fastbind import build_fast_binder

    t = torch.from_numpy(a)
    torch.testing.assert_close(head(t, 7), t[:7] * 2, rtol=0, atol=0)
    fast = build_fast_binder(head.compile(a, 3).artifact, 1)
    _, outputs, symbols = fast(t, 7)
    assert outputs[0].shape == (7,) and symbols == {"m": 40}
    assert fast(t, -1) is None  # a miss: the full path words the error
    fast_doubled = build_fast_binder(doubled.compile(a, 40).artifact, 1)
    assert fast_doubled(t, 40)[2] == {"n": 40} and fast_doubled(t, 39) is None
    with pytest.raises(ArgumentError, match=r"kernel 'head', argument 'n' \(#1\): -1 is the dimension "
                                            r"n of a tensor, which cannot be negative"):
        head(a, -1)
    np.testing.assert_array_equal(doubled(a, 40), a * 2)
    with pytest.raises(ArgumentError, match=r"argument 'n' \(#1\): 39 differs from n = 40, the size an earlier "
                                            r"tensor's shape gives it; pass the same value"):
        doubled(a, 39)


@pytest.mark.parametrize("backend", [("cpu", "tvm_ffi"), ("c", "cython")])
def test_dimensions_may_be_arithmetic_over_a_run_time_scalar(backend):
    """`T.empty((n + 1,))` and an input of `(n * 2,)` with `n: T.int32` (upstream's
    `test_empty_dynamic_shape_from_scalar_uses_ffi_allocator_anchor`): refused before as
    "an expression of n"; an input's dimension over a scalar no output names raised a bare
    KeyError at the call."""
    @tilelang.jit(target=backend[0], execution_backend=backend[1])
    def ramp(n: T.int32):
        B = T.empty((n + 1,), T.float32)
        with T.Kernel(1, threads=1):
            for i in T.serial(n + 1):
                B[i] = T.cast(i, T.float32)
        return B

    @tilelang.jit(target=backend[0], execution_backend=backend[1])
    def evens(A, n: T.int32):
        A: T.Tensor((n * 2,), T.float32)
        B = T.empty((4,), T.float32)
        with T.Kernel(1, threads=1):
            for i in T.serial(4):
                B[i] = A[i * 2] + n
        return B

    for n in (23, 0):
        np.testing.assert_array_equal(ramp(n), np.arange(n + 1, dtype=np.float32))
    a = rand(10)
    np.testing.assert_array_equal(evens(a, 5), a[0:8:2] + 5)
    torch.testing.assert_close(evens(torch.from_numpy(a), 5), torch.from_numpy(a[0:8:2] + 5), rtol=0, atol=0)
    with pytest.raises(ArgumentError, match=r"kernel 'evens', argument 'A' \(#0\): expected shape \(n \* 2,\), "
                                            r"got \(10,\): dimension 0 must be n \* 2 = 8 \(n = 4\)"):
        evens(a, 4)


@pytest.mark.gpu
@pytest.mark.parametrize("execution_backend", ["tvm_ffi", "nvrtc", "cython"])
def test_a_run_time_scalar_sizes_an_output_on_the_gpu(execution_backend):
    @tilelang.jit(target="cuda", execution_backend=execution_backend)
    def head(A, n: T.int32, scale: T.float32):
        m = T.dynamic("m")
        A: T.Tensor((m,), T.float32)
        B = T.empty((n,), T.float32)
        with T.Kernel(T.ceildiv(n, 32), threads=32) as bx:
            for i in T.Parallel(32):
                if bx * 32 + i < n:
                    B[bx * 32 + i] = A[bx * 32 + i] * scale
        return B

    a = torch.randn(100, device="cuda")
    for n, scale in ((70, 2.0), (5, -1.5)):
        torch.testing.assert_close(head(a, n, scale), a[:n] * scale, rtol=1e-6, atol=0)


def test_signature_annotations_and_several_outputs_returned_in_order(compiles):
    @tilelang.jit(target="cpu")
    def stats(X: T.Tensor((6, 10), T.float32), shift: float = 1.0):
        Total = T.empty((6,), T.float32)
        Shifted = T.empty((6, 10), T.float32)
        with T.Kernel(6, threads=32) as row:
            Total[row] = 0.0
            for j in T.serial(10):
                Total[row] += X[row, j]
                Shifted[row, j] = X[row, j] + shift
        return Shifted, Total

    x = rand(6, 10)
    shifted, total = stats(x)
    np.testing.assert_allclose(shifted, x + 1.0, rtol=1e-6, atol=0)
    np.testing.assert_allclose(total, x.sum(axis=1), rtol=1e-5, atol=1e-6)
    with pytest.raises(ArgumentError, match=r"argument 'X' \(#0\): expected shape \(6, 10\)"):
        stats(rand(6, 11))  # a literal dimension is the kernel's own argument check


def test_gemm_tile_ops_torch_fp16():
    @tilelang.jit(target="cpu")
    def matmul(A, B, block_M, block_N, block_K, dtype=T.float16, accum_dtype=T.float32):
        M, N, K = T.const("M, N, K")
        A: T.Tensor((M, K), dtype)
        B: T.Tensor((K, N), dtype)
        C = T.empty((M, N), dtype)
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])
        return C

    a, b = torch.randn(48, 40).half(), torch.randn(40, 24).half()
    c = matmul(a, b, 32, 16, 16)
    # fp32 accumulation, fp16 output rounding
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=5e-2)


def test_classic_builders_keep_their_behaviour():
    @tilelang.jit(out_idx=[-1], target="cpu")
    def add(M, N):
        @T.prim_func
        def main(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
            with T.Kernel(M, threads=32) as bx:
                for j in T.Parallel(N):
                    C[bx, j] = A[bx, j] * 3.0

        return main

    assert not add.is_eager
    kernel = add(4, 8)

    @tilelang.jit(out_idx=[-1], target="cpu")
    def scaled(M, N):
        with contextlib.nullcontext():  # a `with` beside the T.prim_func keeps it classic
            factor = 3.0

        @T.prim_func
        def main(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
            with T.Kernel(M, threads=32) as bx:
                for j in T.Parallel(N):
                    C[bx, j] = A[bx, j] * factor

        return main

    assert not scaled.is_eager
    np.testing.assert_allclose(scaled(4, 8)(rand(4, 8)), rand(4, 8) * 3.0, rtol=1e-6, atol=0)
    assert kernel is add(4, 8) and kernel is add.compile(4, 8)
    a = rand(4, 8)
    np.testing.assert_allclose(kernel(a), a * 3.0, rtol=1e-6, atol=0)


def test_a_new_process_finds_eager_kernels_in_the_disk_cache():
    make_add()(rand(8, 8), rand(8, 8))
    assert make_add().compile(M=8, N=8).from_cache  # a fresh JITFunction: nothing in memory


class TestErrors:
    def test_mismatched_sizes_for_one_const(self):
        with pytest.raises(LanguageError, match=r"T.const 'N' is 4 in 'A' \(dimension 1\) but 5 "
                                                r"in 'B' \(dimension 1\); the tensors' shapes must agree"):
            make_add()(rand(3, 4), rand(3, 5))

    def test_rank_differs_from_the_annotation(self):
        with pytest.raises(LanguageError, match=r"argument 'B' is annotated with 2 dimension\(s\) "
                                                r"\(M, N\) but got a tensor of shape \(12,\)"):
            make_add()(rand(3, 4), rand(12))

    def test_missing_const_value(self):
        with pytest.raises(LanguageError, match=r"no value for T.const 'N'; pass 'A' or 'B', "
                                                r"whose shape has it, or give it as a keyword: N=\.\.\."):
            make_add().compile(M=8)

    def test_const_in_outputs_only_must_be_given(self):
        @tilelang.jit(target="cpu")
        def tile(A):
            M, R = T.const("M, R")
            A: T.Tensor((M,), T.float32)
            B = T.empty((R, M), T.float32)
            with T.Kernel(R, threads=32) as r:
                for i in T.Parallel(M):
                    B[r, i] = A[i]
            return B

        with pytest.raises(LanguageError, match=r"no value for T.const 'R'; it is no dimension of "
                                                r"an input tensor, so give it as a keyword: R=\.\.\."):
            tile(rand(4))
        np.testing.assert_array_equal(tile(rand(4), R=3), np.tile(rand(4), (3, 1)))

    def test_declarations_outside_an_eager_kernel(self):
        with pytest.raises(LanguageError, match=r"T.const is only valid in the body of an eager "
                                                r"@tilelang.jit function"):
            T.const("M")
        with pytest.raises(LanguageError, match=r"T.empty is only valid"):
            T.empty((4,), T.float32)

    def test_out_idx_on_an_eager_kernel(self):
        with pytest.raises(LanguageError, match=r"out_idx=\.\.\.\) on eager kernel 'k': out_idx is "
                                                r"for builders that return a T.prim_func"):
            @tilelang.jit(out_idx=[-1])
            def k(A):
                A: T.Tensor((4,), T.float32)
                with T.Kernel(1):
                    pass

    def test_annotating_a_name_that_is_not_a_parameter(self):
        with pytest.raises(LanguageError, match=r"'C' is annotated but is not a parameter; .* "
                                                r"`C = T.empty\(shape, dtype\)`"):
            @tilelang.jit
            def k(A):
                A: T.Tensor((4,), T.float32)
                C: T.Tensor((4,), T.float32)
                with T.Kernel(1):
                    pass

    def test_declarations_without_a_kernel_frame(self):
        with pytest.raises(LanguageError, match=r"eager kernel 'k' \(.*test_eager_jit.py:\d+\) "
                                                r"declares tensors .* but has no top-level "
                                                r"`with T.Kernel\(...\)`"):
            @tilelang.jit
            def k(A):
                A: T.Tensor((4,), T.float32)
                return A

    def test_returning_an_input(self):
        @tilelang.jit(target="cpu")
        def k(A):
            A: T.Tensor((4,), T.float32)
            with T.Kernel(1, threads=32):
                for i in T.Parallel(4):
                    A[i] = 1.0
            return A

        with pytest.raises(LanguageError, match=r"`return` names \['A'\], which T.empty did not "
                                                r"make; the outputs are none"):
            k(rand(4))

    def test_unannotated_tensor_argument(self):
        @tilelang.jit(target="cpu")
        def k(A, B):
            A: T.Tensor((4,), T.float32)
            with T.Kernel(1, threads=32):
                for i in T.Parallel(4):
                    A[i] = 1.0

        with pytest.raises(LanguageError, match=r"argument 'B' is a tensor but has no tensor "
                                                r"annotation; annotate it"):
            k(rand(4), rand(4))

    def test_unknown_keyword_and_non_tensor_for_a_tensor(self):
        add = make_add()
        with pytest.raises(ArgumentError, match=r"unexpected keyword\(s\) \['Q'\]; it takes its "
                                                r"parameters \['A', 'B', 'block_M', 'dtype'\] and "
                                                r"its T.const names \['M', 'N'\]"):
            add(rand(2, 2), rand(2, 2), Q=1)
        with pytest.raises(ArgumentError, match=r"argument 'B' is a tensor parameter; expected a "
                                                r"torch.Tensor or numpy.ndarray, got int"):
            add(rand(2, 2), 3)
        with pytest.raises(ArgumentError, match=r"tensor argument\(s\) \['B'\] missing; to compile "
                                                r"without tensors, call add.compile"):
            add(rand(2, 2), None)

    def test_declarations_that_fail_without_the_sizes(self):
        @tilelang.jit(target="cpu")
        def k(A):
            n = T.const("n")
            A: T.Tensor((n,), T.float32)
            if n > 4096:  # neither a variable nor a placeholder number (~1e6) passes
                raise ValueError("n must be at most 4096")
            with T.Kernel(1, threads=32):
                for i in T.Parallel(n):
                    A[i] = A[i] * 2.0

        with pytest.raises(LanguageError, match=r"declarations \(the statements before the first "
                                                r"`with`\) failed with ValueError: .* The JIT "
                                                r"runs them once with the T.const names \['n'\] "
                                                r"standing for unknown sizes"):
            k(rand(4))


def test_declarations_may_compute_with_the_sizes(compiles):
    @tilelang.jit(target="cpu")
    def normalize(X, eps=0.0):
        rows, n = T.const("rows, n")
        X: T.Tensor((rows, n), T.float32)
        Y = T.empty((rows, n), T.float32)
        scale = 1.0 / math.sqrt(n) + eps  # needs the number: the first run uses placeholders
        with T.Kernel(rows, threads=32) as r:
            for j in T.Parallel(n):
                Y[r, j] = X[r, j] * scale
        return Y

    x = rand(3, 16)
    np.testing.assert_allclose(normalize(x), x / 4.0, rtol=1e-6, atol=0)
    np.testing.assert_allclose(normalize(rand(3, 25)), rand(3, 25) / 5.0, rtol=1e-6, atol=0)
    assert len(compiles) == 2
    assert "0.25" in compiles[0].script()  # the scale is a constant of the kernel
