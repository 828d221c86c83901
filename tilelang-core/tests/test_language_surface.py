"""The rest of upstream's language surface: T.alloc_var, T.alloc_global, T.clamp, T.print,
T.device_assert, T.view/T.reshape, T.make_tensor, T.access_ptr, T.StridedTensor, T.im2col,
T.GemmWarpPolicy and the errors for upstream names not
provided (barriers, T.thread_binding and T.import_source: test_language_device_code.py). CPU runs compare with numpy (exact unless a tolerance is stated); CUDA
lowering is checked on the generated source (no GPU needed)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang import LanguageError

rng = np.random.default_rng(7)
SM90 = {"kind": "cuda", "arch": "sm_90"}


def cpu(func, out_idx=None, execution_backend="tvm_ffi"):
    return tilelang.compile(func, out_idx=out_idx, target="c", execution_backend=execution_backend)


def cuda_source(func) -> str:
    pytest.importorskip("tilelang.cuda")
    return tilelang.lower(func, target=SM90).device_source


# -- T.alloc_var -----------------------------------------------------------------------------
def var_kernel(n):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), S: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=1) as _:
            total = T.alloc_var("float32")          # zero
            count = T.alloc_var("int32", init=3)
            peak = T.alloc_var("float32", -1e30)
            for i in T.serial(n):
                total += A[i]
                peak = T.max(peak, A[i])
            count = count + 2
            S[0] = total
            S[1] = peak
            S[2] = T.Cast("float32", count) * 2.0
            T.clear(total)
            S[3] = total[0] + 1.0
    return main


@pytest.mark.parametrize("execution_backend", ["tvm_ffi", "cython"])
def test_alloc_var_reads_assigns_updates_and_clears(execution_backend):
    a = rng.standard_normal(37).astype("float32")
    s = np.zeros(4, "float32")
    cpu(var_kernel(37), execution_backend=execution_backend)(a, s)
    np.testing.assert_allclose(s, [a.sum(), a.max(), 10.0, 1.0], rtol=1e-5, atol=1e-5)


def test_alloc_var_on_cuda_is_a_register_scalar():
    src = cuda_source(var_kernel(8))
    assert len(re.findall(r"float \w*\[1\];", src)) == 2 and re.search(r"int \w*\[1\];", src)
    assert re.search(r"_ptr\[0\] = 0x0p\+0f", src) and re.search(r"_ptr\w*\[0\] = 3;", src)  # zero unless init=


def test_alloc_var_errors():
    with pytest.raises(LanguageError, match=r"holds one value: index it as \[0\]"):
        @T.prim_func
        def bad_index(S: T.Tensor((1,), "float32")):
            with T.Kernel(1, threads=1) as _:
                x = T.alloc_var("float32")
                S[0] = x[1]
    with pytest.raises(LanguageError, match="initial value is given twice"):
        @T.prim_func
        def twice(S: T.Tensor((1,), "float32")):
            with T.Kernel(1, threads=1) as _:
                x = T.alloc_var("float32", 1.0, init=2.0)
                S[0] = x
    with pytest.raises(ValueError, match=r"T.alloc_var\(float32, init=1e\+300\): Literal value 1e\+300 exceeds "
                                         r"maximum of float32; give a value the type holds"):  # upstream's type
        @T.prim_func
        def too_large(S: T.Tensor((1,), "float32")):
            with T.Kernel(1, threads=1) as _:
                x = T.alloc_var(T.float32, init=1e300)
                S[0] = x


# -- T.alloc_global --------------------------------------------------------------------------
def two_phase(n, block=16):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        partial = T.alloc_global((n,), "float32")
        with T.Kernel(T.ceildiv(n, block), threads=32) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    partial[bx * block + i] = A[bx * block + i] * 2.0
        with T.Kernel(T.ceildiv(n, block), threads=32) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    B[bx * block + i] = partial[bx * block + i] + 1.0
    return main


def test_alloc_global_is_a_workspace_shared_by_the_kernels_of_a_call():
    a = rng.standard_normal(40).astype("float32")
    b = np.zeros(40, "float32")
    cpu(two_phase(40))(a, b)
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)


def test_alloc_global_inside_a_kernel_is_refused():
    with pytest.raises(LanguageError, match="device code cannot allocate global memory"):
        @T.prim_func
        def main(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1) as _:
                w = T.alloc_global((4,), "float32")
                A[0] = w[0]


# -- T.clamp, T.GemmWarpPolicy ---------------------------------------------------------------
@pytest.mark.parametrize("execution_backend", ["tvm_ffi", "cython"])
def test_clamp(execution_backend):
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as _:
            for i in T.Parallel(64):
                B[i] = T.clamp(A[i], -0.5, 0.75)

    a = rng.standard_normal(64).astype("float32")
    b = np.zeros(64, "float32")
    cpu(main, execution_backend=execution_backend)(a, b)
    np.testing.assert_array_equal(b, np.clip(a, -0.5, 0.75))


def test_clamp_takes_upstreams_keywords_and_an_open_bound():
    @T.prim_func
    def main(A: T.Tensor((64,), "float16"), B: T.Tensor((3, 64), "float16")):
        with T.Kernel(1, threads=64) as _:
            for i in T.Parallel(64):
                B[0, i] = T.clamp(A[i], min_val=-0.05, max_val=0.05)
                B[1, i] = T.clamp(A[i], max_val=0.0)
                B[2, i] = T.clamp(A[i], min_val=0.25)

    a = (rng.standard_normal(64) * 0.1).astype("float16")
    b = np.zeros((3, 64), "float16")
    cpu(main)(a, b)
    lo, hi = np.float16(-0.05), np.float16(0.05)
    np.testing.assert_array_equal(b, [np.clip(a, lo, hi), np.minimum(a, 0), np.maximum(a, np.float16(0.25))])


def test_round_takes_upstreams_rounding_modes():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), H: T.Tensor((64,), "float16"), B: T.Tensor((3, 64), "float32"),
             C: T.Tensor((64,), "float16")):
        with T.Kernel(1, threads=64) as _:
            for i in T.Parallel(64):
                B[0, i] = T.round(A[i])
                B[1, i] = T.round(A[i], "ties-to-even")
                B[2, i] = T.round(A[i], rounding_mode="ties-away-from-zero")
                C[i] = T.round(H[i], "ties-away-from-zero")

    # ties of both signs, their neighbours (0.49999997 rounds down: floor(|x| + 0.5) would
    # not), and larger values
    a = np.array([0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999997, -0.49999997, 1e7 + 0.5, 3.2, -3.7, 0.0]
                 * 6)[:64].astype("float32")
    a[60:] = rng.standard_normal(4) * 10
    h = np.clip(a * 0.25, -1000, 1000).astype("float16")
    b, c = np.zeros((3, 64), "float32"), np.zeros(64, "float16")
    cpu(main)(a, h, b, c)

    def away(x):  # in float64, where |x| + 0.5 is exact for these values
        wide = x.astype("float64")
        return np.copysign(np.floor(np.abs(wide) + 0.5), wide).astype(x.dtype)

    np.testing.assert_array_equal(b, [np.round(a), np.round(a), away(a)])
    np.testing.assert_array_equal(c, away(h))
    with pytest.raises(LanguageError, match=r"T.round: rounding_mode must be one of \['ties-to-even', "
                                            r"'ties-away-from-zero'\], got 'up'"):
        T.round(T.float32(1.5), "up")


def test_gemm_warp_policy_is_accepted_and_results_do_not_depend_on_it():
    assert [int(p) for p in T.GemmWarpPolicy] == [0, 1, 2]
    assert T.GemmWarpPolicy.FullRow.is_full_row() and not T.GemmWarpPolicy.Square.is_full_col()

    @T.prim_func
    def main(A: T.Tensor((32, 16), "float32"), B: T.Tensor((16, 24), "float32"), C: T.Tensor((32, 24), "float32")):
        with T.Kernel(1, threads=64) as _:
            a = T.alloc_shared((32, 16), "float32")
            b = T.alloc_shared((16, 24), "float32")
            c = T.alloc_fragment((32, 24), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.gemm(a, b, c, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
            T.copy(c, C)

    a = rng.standard_normal((32, 16)).astype("float32")
    b = rng.standard_normal((16, 24)).astype("float32")
    c = np.zeros((32, 24), "float32")
    cpu(main)(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


# -- T.view / T.reshape ----------------------------------------------------------------------
def view_kernel():
    @T.prim_func
    def main(A: T.Tensor((4, 8), "float32"), B: T.Tensor((8, 4), "float32"), C: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=32) as _:
            s = T.alloc_shared((4, 8), "float32")
            T.copy(A, s)
            T.copy(T.reshape(s, (8, 4)), B)
            bits = T.view(s, (32,), dtype="int32")
            for i in T.Parallel(32):
                C[i] = bits[i]
    return main


@pytest.mark.parametrize("execution_backend", ["tvm_ffi", "cython"])
def test_view_and_reshape_share_the_data(execution_backend):
    a = rng.standard_normal((4, 8)).astype("float32")
    b, c = np.zeros((8, 4), "float32"), np.zeros(32, "int32")
    cpu(view_kernel(), execution_backend=execution_backend)(a, b, c)
    np.testing.assert_array_equal(b, a.reshape(8, 4))
    np.testing.assert_array_equal(c, a.reshape(-1).view("int32"))


def test_view_lowers_for_cuda_as_a_cast_of_the_same_shared_array():
    src = cuda_source(view_kernel())
    assert "((int*)s_ptr)" in src


def test_view_of_another_size_is_refused():
    # upstream asserts the sizes (its view and reshape tests expect AssertionError)
    with pytest.raises(AssertionError, match=r"is 512 bits but .* is 1024") as info:
        @T.prim_func
        def main(A: T.Tensor((4, 8), "float32")):
            with T.Kernel(1, threads=1) as _:
                s = T.alloc_shared((4, 8), "float32")
                v = T.view(s, (32,), dtype="float16")
                A[0, 0] = v[0]
    assert isinstance(info.value, LanguageError)


# -- T.access_ptr ----------------------------------------------------------------------------
def test_access_ptr_addresses_an_element():
    @T.prim_func
    def main(A: T.Tensor((4, 8), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=1) as _:
            T.evaluate(T.call_extern("handle", "memcpy", T.access_ptr(B, "w"), T.access_ptr(A[2, 0], "r", 8), 32))

    a = rng.standard_normal((4, 8)).astype("float32")
    b = np.zeros(8, "float32")
    kernel = tilelang.compile(main, target="llvm")
    kernel(a, b)
    np.testing.assert_array_equal(b, a[2])
    with pytest.raises(LanguageError, match="access_type 'x' is not one of"):
        T.access_ptr(main.params[0], "x")


# -- T.StridedTensor -------------------------------------------------------------------------
@pytest.mark.parametrize("execution_backend", ["tvm_ffi"])
def test_strided_tensor_reads_a_column_slice(execution_backend):
    @T.prim_func
    def main(A: T.StridedTensor((16, 4), (8, 1), "float32"), B: T.Tensor((16, 4), "float32")):
        with T.Kernel(1, threads=16) as _:
            for i, j in T.Parallel(16, 4):
                B[i, j] = A[i, j] * 3.0

    base = rng.standard_normal((16, 8)).astype("float32")
    b = np.zeros((16, 4), "float32")
    cpu(main, execution_backend=execution_backend)(base[:, 2:6], b)
    np.testing.assert_allclose(b, base[:, 2:6] * 3.0, rtol=1e-6)


# -- T.im2col --------------------------------------------------------------------------------
def conv_kernel(N, C, H, W, F, K, S, D, P, bM=32, bN=32, bK=16):
    OH = (H + 2 * P - D * (K - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (K - 1) - 1) // S + 1

    @T.prim_func
    def main(data: T.Tensor((N, H, W, C), "float32"), kernel: T.Tensor((K, K, C, F), "float32"),
             out: T.Tensor((N, OH, OW, F), "float32")):
        with T.Kernel(T.ceildiv(F, bN), T.ceildiv(N * OH * OW, bM), threads=64) as (bx, by):
            data_shared = T.alloc_shared((bM, bK), "float32")
            kernel_shared = T.alloc_shared((bK, bN), "float32")
            acc = T.alloc_fragment((bM, bN), "float32")
            kernel_flat = T.reshape(kernel, (K * K * C, F))
            out_flat = T.reshape(out, (N * OH * OW, F))
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K * K * C, bK), num_stages=2):
                T.im2col(data, data_shared, by, k, K, S, D, P)
                T.copy(kernel_flat[k * bK, bx * bN], kernel_shared)
                T.gemm(data_shared, kernel_shared, acc)
            T.copy(acc, out_flat[by * bM, bx * bN])

    return main, (OH, OW)


def conv_reference(x, w, S, D, P):
    N, H, W, C = x.shape
    K, _, _, F = w.shape
    xp = np.pad(x, ((0, 0), (P, P), (P, P), (0, 0)))
    OH = (H + 2 * P - D * (K - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (K - 1) - 1) // S + 1
    out = np.zeros((N, OH, OW, F), "float64")
    for kh in range(K):
        for kw in range(K):
            patch = xp[:, kh * D: kh * D + S * (OH - 1) + 1: S, kw * D: kw * D + S * (OW - 1) + 1: S, :]
            out += patch @ w[kh, kw]
    return out


@pytest.mark.parametrize("S,D,P", [(1, 1, 1), (2, 2, 0)])
def test_im2col_convolution_matches_numpy(S, D, P):
    N, C, H, W, F, K = 2, 6, 9, 7, 20, 3
    func, (OH, OW) = conv_kernel(N, C, H, W, F, K, S, D, P)
    x = rng.standard_normal((N, H, W, C)).astype("float32")
    w = rng.standard_normal((K, K, C, F)).astype("float32")
    out = np.zeros((N, OH, OW, F), "float32")
    cpu(func)(x, w, out)
    np.testing.assert_allclose(out, conv_reference(x, w, S, D, P), rtol=1e-4, atol=1e-4)
    assert T.c2d_im2col is T.im2col


def test_im2col_lowers_for_cuda():
    func, _ = conv_kernel(1, 8, 8, 8, 32, 3, 1, 1, 1)
    assert "condval = data_ptr[" in cuda_source(func)  # the guarded (padding-aware) image read


# -- T.print / T.device_assert ---------------------------------------------------------------
def print_kernel():
    @T.prim_func
    def main(A: T.Tensor((2, 3), "float32"), N: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=1) as _:
            T.print(A, msg="A is")
            T.print(N[0] * 2, msg="twice N %")
            T.print(msg="done")
            T.device_assert(N[0] < 5, "N below 5")
    return main


def test_print_and_device_assert_on_the_cpu(capfd):
    a = np.arange(6, dtype="float32").reshape(2, 3)
    tilelang.compile(print_kernel(), target="llvm")(a, np.array([7], "int32"))
    out = capfd.readouterr().out.splitlines()
    assert out[:6] == [f"A is A[{i}, {j}] = {a[i, j]:f}" for i in range(2) for j in range(3)]
    assert out[6:] == ["twice N %: 14", "done", "device_assert failed: N below 5"]


def test_print_on_cuda_is_device_printf():
    src = cuda_source(print_kernel())
    assert 'printf("twice N %%: %lld%c"' in src and 'printf("device_assert failed: N below 5%c"' in src


def test_print_refuses_messages_it_cannot_quote():
    with pytest.raises(LanguageError, match="without quotes, backslashes or newlines"):
        T.print(msg='say "hi"')


# -- upstream names not provided -------------------------------------------------------------
@pytest.mark.parametrize("name,advice", [
    ("tma_load", r"Hopper .* use T.copy inside T.Pipelined|T.copy inside a T.Pipelined"),
    ("ptx_arrive_cluster_barrier", r"use T.cluster_sync\(\) for a cluster-wide barrier or T.sync_threads\(\)"),
    ("clc_try_cancel", r"Blackwell \(sm_100\) primitive .* \(cluster launch control\)"),
    ("alloc_tmem", "Blackwell"),
])
def test_upstream_only_names_raise_a_language_error(name, advice):
    with pytest.raises(LanguageError, match=advice):
        getattr(T, name)
    assert not hasattr(T, "surely_not_a_tilelang_name")


def test_upstream_only_name_in_a_kernel_names_itself():
    with pytest.raises(LanguageError, match=r"T.tma_load is a Hopper"):
        @T.prim_func
        def main(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32) as _:
                T.tma_load()


def test_nvcc_compiles_the_cuda_of_these_primitives():
    pytest.importorskip("tilelang.cuda")
    from tilelang.cuda import toolchain

    if toolchain.nvcc_path() is None:
        pytest.skip("nvcc is not installed")
    for name, func in [("prints", print_kernel()), ("views", view_kernel()), ("vars", var_kernel(8)),
                       ("im2col", conv_kernel(1, 8, 8, 8, 32, 3, 1, 1, 1)[0])]:
        assert toolchain._compile_nvcc(cuda_source(func), "sm_90", name)[:4] == b"\x7fELF"


def _fast_math_kernel(mode: str):
    @T.prim_func
    def fast(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32), C: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=1):
            for i in T.serial(64):
                B[i] = T.__exp(A[i]) + T.__log2(T.abs(A[i]) + 1.0) + T.__sin(A[i])
                C[i] = T.ieee_fmaf(A[i], A[i], T.ieee_add(A[i], 1.0, mode)) + T.ieee_frsqrt(T.abs(A[i]) + 1.0) + \
                    T.fast_rcp(T.abs(A[i]) + 2.0)

    return fast


def test_fast_and_ieee_math_are_the_precise_functions_on_the_cpu():
    a = np.random.default_rng(8).standard_normal(64).astype("float32")
    b, c = np.zeros_like(a), np.zeros_like(a)
    tilelang.compile(_fast_math_kernel("rn"), target="cpu")(a, b, c)
    np.testing.assert_allclose(b, np.exp(a) + np.log2(np.abs(a) + 1) + np.sin(a), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(c, a * a + (a + 1) + 1 / np.sqrt(np.abs(a) + 1) + 1 / (np.abs(a) + 2), rtol=1e-5,
                               atol=1e-5)


def test_an_ieee_rounding_mode_the_backend_lacks_is_a_compile_error():
    with pytest.raises(tilelang.CompileError, match=r"T.ieee_add\(\.\.\., rounding_mode=.rz.\): the backend compiling "
                                                    r"this kernel has no arithmetic in that rounding mode"):
        tilelang.compile(_fast_math_kernel("rz"), target="cpu")
    with pytest.raises(LanguageError, match=r"T.ieee_add: Invalid rounding mode 'up'; rounding_mode must be one of \['rn', 'rz', 'ru', 'rd'\]"):
        _fast_math_kernel("up")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_ieee_arithmetic_is_round_to_nearest_only(dtype):
    @T.prim_func
    def half(A: T.Tensor((8,), dtype), B: T.Tensor((8,), dtype)):
        with T.Kernel(1, threads=8):
            for i in T.Parallel(8):
                B[i] = T.ieee_add(A[i], A[i], "rz")

    with pytest.raises(tilelang.CompileError, match=rf"T.ieee_add\(\.\.\., rounding_mode='rz'\) on {dtype}: Only "
                       r"rounding mode 'rn' is available for half precision; compute in float32"):
        tilelang.lower(half, target={"kind": "cuda", "arch": "sm_90"})
    # the CPU computes bfloat16 in float32 by the time the rule runs: its general message
    with pytest.raises(tilelang.CompileError, match=r"rounding_mode='rz'\).*'rn'"):
        tilelang.compile(half, target="cpu")



def test_a_copy_between_two_elements_stores_one_element():
    # upstream's T.copy(A[i], B[i]) with neither side a tile: a plain element store
    @T.prim_func
    def element_copy(A: T.Tensor((8,), T.int32), B: T.Tensor((8,), T.float32)):
        with T.Kernel(8, threads=1) as bx:
            T.copy(A[bx], B[7 - bx])

    a = np.arange(8, dtype="int32")
    b = np.zeros(8, "float32")
    tilelang.compile(element_copy, target="cpu")(a, b)
    np.testing.assert_array_equal(b, a[::-1].astype("float32"))


def test_a_kernel_body_may_name_a_tile_op():
    # upstream's scan tests: `scan = T.cumsum if op == "cumsum" else T.cummax` in the body
    def running(op: str):
        @T.prim_func
        def scan_rows(A: T.Tensor((4, 8), T.float32), B: T.Tensor((4, 8), T.float32)):
            with T.Kernel(1, threads=32):
                tile = T.alloc_fragment((4, 8), T.float32)
                T.copy(A, tile)
                scan = T.cumsum if op == "cumsum" else T.cummax
                scan(src=tile, dim=1)
                T.copy(tile, B)

        return scan_rows

    a = np.random.default_rng(9).standard_normal((4, 8)).astype("float32")
    for op, ufunc in (("cumsum", np.add), ("cummax", np.maximum)):
        out = np.zeros_like(a)
        tilelang.compile(running(op), target="cpu")(a, out)
        np.testing.assert_allclose(out, ufunc.accumulate(a, axis=1), rtol=1e-5, atol=1e-5)


def test_fast_math_takes_floating_point_values_only():
    from tvm import tirx

    for dtype in ("int8", "bool", "float8_e4m3fn"):
        with pytest.raises(TypeError, match=rf"T.__exp only supports floating-point inputs, but got {dtype}"):
            T.__exp(tirx.Var("value", dtype))
    assert str(T.__sin(tirx.Var("value", "bfloat16")).ty.dtype) == "bfloat16"


def test_a_one_dimensional_kernel_unpacks_into_a_one_element_tuple():
    @T.prim_func
    def ids(B: T.Tensor((4,), T.int32)):
        with T.Kernel(4, threads=1) as (bx,):
            B[bx] = bx * 10

    out = np.zeros(4, "int32")
    tilelang.compile(ids, target="cpu")(out)
    np.testing.assert_array_equal(out, [0, 10, 20, 30])


# -- T.any_of / T.all_of / T.align_up -------------------------------------------------------------
def test_any_of_and_all_of_test_a_constant_region():
    @T.prim_func
    def main(M: T.Tensor((4, 3), "bool"), V: T.Tensor((4, 2), "int32"), B: T.Tensor((4, 4), "int32")):
        with T.Kernel(1, threads=4) as _:
            for i in T.Parallel(4):
                B[i, 0] = T.if_then_else(T.any_of(M[i, :]), 1, 0)
                B[i, 1] = T.if_then_else(T.all_of(M[i, 0:3]), 1, 0)
                B[i, 2] = T.if_then_else(T.any_of(V[i, :]), 1, 0)  # integers: non-zero is true
                B[i, 3] = T.if_then_else(T.all_of(M), 1, 0)  # the whole buffer

    m = np.array([[0, 0, 0], [0, 1, 0], [1, 1, 1], [1, 0, 1]], dtype=bool)
    v = np.array([[0, 0], [0, 3], [-1, 0], [2, 2]], dtype="int32")
    b = np.zeros((4, 4), "int32")
    cpu(main)(m, v, b)
    np.testing.assert_array_equal(b[:, 0], m.any(axis=1))
    np.testing.assert_array_equal(b[:, 1], m.all(axis=1))
    np.testing.assert_array_equal(b[:, 2], (v != 0).any(axis=1))
    np.testing.assert_array_equal(b[:, 3], [m.all()] * 4)


def test_any_of_refuses_a_symbolic_range_with_the_fix():
    with pytest.raises(LanguageError, match=r"T.any_of: the extent n of M is not a constant; .*test a symbolic "
                                            r"range with a loop"):
        n = T.symbolic("n")

        @T.prim_func
        def main(M: T.Tensor((n,), "bool"), B: T.Tensor((1,), "int32")):
            with T.Kernel(1, threads=1) as _:
                B[0] = T.if_then_else(T.any_of(M), 1, 0)


def test_align_up_rounds_up_to_a_multiple():
    @T.prim_func
    def main(A: T.Tensor((5,), "int32"), B: T.Tensor((5,), "int32")):
        with T.Kernel(1, threads=5) as _:
            for i in T.Parallel(5):
                B[i] = T.align_up(A[i], 32)

    a = np.array([128, 1, -1, -2, 33], dtype="int32")
    b = np.zeros(5, "int32")
    cpu(main)(a, b)
    np.testing.assert_array_equal(b, -(-a // 32) * 32)  # ceil-divided, times 32: [128, 32, 0, 0, 64]


# -- vector dtypes, packing and T.extract_lane --------------------------------------------------
def _pack_and_extract(dtype, vector_dtype):
    @T.prim_func
    def kernel(A: T.Tensor((2,), dtype), B: T.Tensor((2,), dtype)):
        with T.Kernel(1, threads=1):
            packed = T.alloc_var(vector_dtype)
            packed = vector_dtype(A[0], A[1])  # upstream's packing form: a two-lane vector
            B[0] = T.extract_lane(packed, 1)
            B[1] = T.extract_lane(packed, 0)

    return kernel


def test_a_vector_packed_from_lanes_and_a_lane_extracted():
    from tvm import tirx

    assert T.bfloat16x2 == "bfloat16x2" and T.float32x4.lanes == 4
    lane = T.extract_lane(tirx.Var("v", "bfloat16x2"), tirx.IntImm("int32", 1))
    assert isinstance(lane, tirx.Shuffle) and str(lane.ty) == "bfloat16" and lane.indices[0].value == 1
    a, b = np.array([1.25, -2.5], "float32"), np.zeros(2, "float32")
    tilelang.compile(_pack_and_extract(T.float32, T.float32x2), target="cpu")(a, b)  # LLVM: C has no vectors
    np.testing.assert_array_equal(b, a[::-1])


def test_extract_lane_errors_are_upstreams_types():
    from tvm import tirx

    vector = tirx.Var("vector", "bfloat16x2")
    with pytest.raises(TypeError, match="expects a PrimExpr"):
        T.extract_lane(1, 0)
    with pytest.raises(ValueError, match="expects a vector expression"):
        T.extract_lane(tirx.Var("scalar", "bfloat16"), 0)
    with pytest.raises(TypeError, match="compile-time integer"):
        T.extract_lane(vector, tirx.Var("lane", "int32"))
    with pytest.raises(IndexError, match="lane 2 is out of bounds for a vector of 2 lanes"):
        T.extract_lane(vector, 2)
    with pytest.raises(LanguageError, match=r"T.float32x4\(...\) packs 4 lanes, got 2 values"):
        T.float32x4(T.float32(1), T.float32(2))


def test_half_vectors_packed_for_cuda():
    pytest.importorskip("tilelang.cuda")
    from tilelang.cuda import toolchain

    for dtype, vector_dtype, make in [(T.bfloat16, T.bfloat16x2, "make_nv_bfloat162"),
                                      (T.float16, T.float16x2, "make___half2")]:
        source = tilelang.lower(_pack_and_extract(dtype, vector_dtype),
                                target={"kind": "cuda", "arch": "sm_90"}).device_source
        assert ").y;" in source and ").x;" in source
        if toolchain.nvcc_path() is not None:
            assert toolchain._compile_nvcc(source, "sm_90", f"lanes_{dtype}")[:4] == b"\x7fELF"
