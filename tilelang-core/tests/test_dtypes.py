"""Dtypes as upstream TileLang writes them (T.float16 objects, C-style aliases, T.dtype)."""

import pickle

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.errors import LanguageError


def _scaled_row_max(M, N, dtype, accum=T.float):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M,), dtype), scale: T.float32):
        with T.Kernel(T.ceildiv(M, 16), threads=32) as bx:
            S = T.alloc_shared((16, N), dtype)
            F = T.alloc_fragment((16, N), accum)
            R = T.alloc_fragment((16,), accum)
            T.copy(A[bx * 16, 0], S)
            for i, j in T.Parallel(16, N):
                F[i, j] = S[i, j].astype(accum) * scale + T.cast(T.float16(0), T.float32)
            T.reduce_max(F, R, dim=1)
            for i in T.Parallel(16):
                B[bx * 16 + i] = T.max(R[i], -T.infinity(accum)).astype(dtype)

    return main


@pytest.mark.parametrize("dtype", [T.float16, T.float32, T.half, "float16"])
def test_dtype_objects_go_everywhere_a_dtype_string_goes(dtype):
    kernel = tilelang.compile(_scaled_row_max(48, 24, dtype), out_idx=[1], target="cpu")
    a = np.random.default_rng(0).standard_normal((48, 24)).astype(str(dtype))
    out = kernel(a, 2.0)
    # fp16 output: one rounding of a value up to ~8 in magnitude
    np.testing.assert_allclose(out.astype("float32"), (a.astype("float32") * 2).max(axis=1),
                               rtol=1e-3, atol=1e-3)


def test_dtype_equality_aliases_and_conversions():
    import torch

    assert T.float16 == "float16" and isinstance(T.float16, str)
    assert (T.float, T.int, T.half, T.double, T.long, T.short, T.uint) == (
        "float32", "int32", "float16", "float64", "int64", "int16", "uint32")
    assert T.dtype(torch.bfloat16) == T.bfloat16
    assert T.dtype(np.float32) == T.float32 and T.dtype(np.dtype("int8")) == T.int8
    assert T.dtype(float) == T.float32 and T.dtype(int) == T.int32 and T.dtype(bool) == T.bool
    assert T.float16.as_torch() is torch.float16 and T.float32.as_numpy() == np.float32
    assert T.float8_e4m3fn.bits == 8 and T.float16.bytes == 2 and T.int8x4.bytes == 4
    assert pickle.loads(pickle.dumps(T.bfloat16)) == T.bfloat16
    assert {T.float16: 1}["float16"] == 1


def test_dtype_call_form_keeps_tvmscript_meaning():
    from tvm import tirx

    const = T.float32(1.5)
    assert isinstance(const, tirx.FloatImm) and float(const.value) == 1.5
    var = T.int32()
    assert isinstance(var, tirx.Var) and str(var.ty) == "int32"


def test_unknown_dtype_is_a_language_error():
    with pytest.raises(LanguageError, match="'floot16' is not a dtype TVM knows"):
        T.dtype("floot16")
    with pytest.raises(LanguageError, match="is not a dtype; write T.float16"):
        T.dtype(3.5)


def test_dtype_objects_lower_for_cuda():
    art = tilelang.lower(_scaled_row_max(64, 32, T.bfloat16), target={"kind": "cuda", "arch": "sm_90"})
    assert "__nv_bfloat16" in art.device_source or "bfloat16" in art.device_source


def _fp8_cast(M=64, N=128):
    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float8_e4m3fn)):
        with T.Kernel(T.ceildiv(M, 16), threads=128) as bx:
            for i, j in T.Parallel(16, N):
                Y[bx * 16 + i, j] = T.clamp(X[bx * 16 + i, j], -448.0, 448.0).astype(T.float8_e4m3fn)

    return main


def test_an_fp8_cast_kernel_runs_on_the_cpu():
    """It was refused ("cannot compute with"); ComputeFp8 stores the bytes (test_cpu_fp8.py)."""
    torch = pytest.importorskip("torch")
    x = torch.randn(64, 128) * 100
    y = tilelang.compile(_fp8_cast(), out_idx=[1], target="cpu")(x)
    assert y.dtype == torch.float8_e4m3fn
    assert torch.equal(y.view(torch.uint8), x.clamp(-448, 448).to(torch.float8_e4m3fn).view(torch.uint8))


def test_upstreams_float8_e4m3_is_the_hardware_e4m3fn():
    """Upstream's T.float8_e4m3 names NVIDIA's e4m3 (its CUDA code and `.as_torch()` are
    e4m3fn's); ml_dtypes' IEEE-style float8_e4m3 (a different type: inf, max 240) keeps
    TVM's name for it, so an array of it does not pass for e4m3fn."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert T.float8_e4m3 == T.dtype("float8_e4m3") == T.float8_e4m3fn == "float8_e4m3fn"
    assert T.dtype(np.dtype(ml_dtypes.float8_e4m3)) == "float8_e4m3"
    assert T.dtype(np.dtype(ml_dtypes.float8_e4m3fn)) == "float8_e4m3fn"


def test_tensor_subscript_and_torch_dtypes_in_annotations():
    # upstream writes T.Tensor[(n,), dtype] / T.Tensor[n, dtype] and passes torch dtypes;
    # neither warns here
    import warnings

    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)

        @T.prim_func
        def fill(A: T.Tensor[16, torch.int8], B: T.StridedTensor[(4, 4), (8, 1), torch.float32]):
            with T.Kernel(1, threads=1):
                for i in T.serial(16):
                    A[i] = T.cast(i + 1, torch.int8)
                for i, j in T.grid(4, 4):
                    B[i, j] = T.float32(i * 4 + j)

    a = np.zeros(16, "int8")
    b = np.zeros((4, 8), "float32")
    tilelang.compile(fill, target="cpu")(a, b[:, :4])
    np.testing.assert_array_equal(a, np.arange(1, 17))
    np.testing.assert_array_equal(b[:, :4], np.arange(16, dtype="float32").reshape(4, 4))
    assert not b[:, 4:].any()


def test_tfloat32_is_float32_storage():
    # upstream's TF32 GEMM inputs: float32 tensors; this project computes their products
    # in float32 (at least TF32's precision)
    assert T.tfloat32 == "float32" and T.tfloat32.as_torch() is pytest.importorskip("torch").float32


def test_the_upper_half_of_uint64_is_a_constant():
    """T.uint64(0xFFFFFFFFFFFFFFFF): TVM's integer constants are int64 inside (it refused
    a Python int past 2**63); the value is its bit pattern, reinterpreted."""
    import tilelang
    import tilelang.language as T

    top = T.uint64(0xFFFFFFFFFFFFFFFF)
    assert str(top.ty.dtype) == "uint64"

    @T.prim_func
    def store(A: T.Tensor((2,), "uint64")):
        with T.Kernel(1, threads=1):
            A[0] = T.uint64(0xFFFFFFFFFFFFFFFF)
            A[1] = T.uint64(2 ** 63 + 5)

    a = np.zeros(2, np.uint64)
    tilelang.compile(store, target="cpu")(a)
    np.testing.assert_array_equal(a, np.array([2 ** 64 - 1, 2 ** 63 + 5], np.uint64))


def test_torch_dtypes_are_taken_wherever_a_dtype_is() -> None:
    """torch.float32 is a dtype in every allocation, as upstream's tests write it
    (test_tilelang_transform_verify_buffer_init.py's reducer): T.alloc_reducer,
    T.alloc_global, T.dynamic and T.empty had stored ``str(torch.float32)``."""
    torch = pytest.importorskip("torch")
    n = T.dynamic("n", torch.int64)
    assert str(n.dtype) == "int64"

    @T.prim_func
    def total(A: T.Tensor((64,), torch.float32), B: T.Tensor((1,), torch.float32)):
        with T.Kernel(1, threads=64) as _:
            src = T.alloc_fragment((64,), torch.float32)
            T.copy(A, src)
            acc = T.alloc_reducer((1,), torch.float32, op="sum")
            T.reducer_init(acc)
            for i in T.Parallel(64):
                T.reducer_update(acc[0], src[i])
            result = T.alloc_fragment((1,), torch.float32)
            T.finalize_reducer(acc, result)
            if T.get_thread_binding() == 0:
                B[0] = result[0]

    a = torch.arange(64, dtype=torch.float32)
    b = torch.zeros(1)
    tilelang.compile(total, target="cpu")(a, b)
    assert b.item() == a.sum().item()
