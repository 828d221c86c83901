"""``T.vectorized(n)`` on CUDA (core's transform/gpu/vectorized_loops.py): vectors of at most
16 bytes whose first element is aligned to their size, a serial loop over them; n = 1 is a
serial loop. Before, T.vectorized(128) over float32 and T.vectorized(1) did not compile, and
an unaligned start would fault at run time. Checked in the source, with nvcc, in the
lowered-IR emulator (each access's alignment is checked there too: lowered_emulator.py) and
on a GPU against torch."""

from __future__ import annotations

import re

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from lowered_instructions import lowered_kernel
from tilelang.cuda import toolchain

SM90 = {"kind": "cuda", "arch": "sm_90"}


def strided_copy(n: int, m: int, stride_a: int, stride_b: int):
    @T.prim_func
    def main(A: T.StridedTensor[(n, m), (1, stride_a), T.float32], B: T.StridedTensor[(n, m), (1, stride_b), T.float32]):
        with T.Kernel(m // 32, threads=32) as bx:
            col = bx * 32 + T.get_thread_binding(0)
            for row in T.vectorized(n):
                B[row, col] = A[row, col] * 2.0

    return main


def device_code(func) -> str:
    source = tilelang.lower(func, target=SM90).device_source
    if toolchain.nvcc_path() is not None:
        assert toolchain._compile_nvcc(source, "sm_90", "vectorized")[:4] == b"\x7fELF"
    return source[source.index('extern "C" __global__'):]


@pytest.mark.parametrize("stride_a,stride_b,vector", [(128, 128, "float4"), (130, 132, "float2"),
                                                       (132, 136, "float4"), (129, 128, None)])
def test_a_long_vectorized_loop_becomes_aligned_vectors(stride_a, stride_b, vector):
    code = device_code(strided_copy(128, 64, stride_a, stride_b))
    if vector is None:  # a column starts at an odd float: one element at a time
        assert "float2" not in code and "float4" not in code
    else:
        assert f"*({vector}*)(B_ptr" in code and ("float4" not in code if vector == "float2" else True)
    a = np.arange(stride_a * 64, dtype="float32")
    b = np.zeros(stride_b * 64, "float32")
    lowered_kernel(tilelang.lower(strided_copy(128, 64, stride_a, stride_b), target=SM90).device_mod)(a, b)
    expected = np.zeros((64, stride_b), "float32")
    expected[:, :128] = a.reshape(64, stride_a)[:, :128] * 2
    np.testing.assert_array_equal(b.reshape(64, stride_b), expected)


def parallel_strided_copy(row_stride):
    """Upstream's test_tilelang_copy_with_stride: a T.Parallel copy out of a tensor whose
    rows are ``row_stride`` apart (an int, or a run-time symbol)."""

    @T.prim_func
    def main(A: T.StridedTensor((64, 64), (row_stride, 1), T.float16), B: T.Tensor((64, 64), T.float16)):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            for i, j in T.Parallel(32, 32):
                B[by * 32 + i, bx * 32 + j] = A[by * 32 + i, bx * 32 + j]

    return main


@pytest.mark.parametrize("row_stride,vector", [(128, "uint4"), (T.dynamic("NN"), None), (68, "half4")])
def test_a_parallel_copy_is_as_wide_as_the_row_stride_keeps_it_aligned(row_stride, vector):
    # the width follows the tensor's strides, not its shape: with a run-time row stride no
    # width is proven aligned (8 halves were gathered into a make_uint4 nvcc refused)
    code = device_code(parallel_strided_copy(row_stride))
    loads = re.findall(r"\*\((\w+)\*\)\(A_ptr", code)
    assert (loads == []) if vector is None else (set(loads) == {vector}), loads
    stride = 96 if vector is None else row_stride  # the run-time stride's value in the emulated call
    a = np.arange(64 * stride, dtype="float16")
    b = np.zeros((64, 64), "float16")
    scalars = {"NN": stride} if vector is None else None
    lowered_kernel(tilelang.lower(parallel_strided_copy(row_stride), target=SM90).device_mod)(a, b, scalars=scalars)
    np.testing.assert_array_equal(b, a.reshape(64, stride)[:, :64])


def filled(dtype: str, n: int):
    @T.prim_func
    def main(A: T.Tensor[(64,), dtype]):
        with T.Kernel(1, threads=32):
            for i in T.vectorized(n):
                A[i] = T.cast(i + 1, dtype)

    return main


@pytest.mark.parametrize("dtype,n", [("uint8", 1), ("int8", 2), ("int8", 8), ("int64", 1), ("int64", 4),
                                     ("uint64", 8), ("float8_e4m3fn", 1), ("float8_e4m3fn", 4),
                                     ("float8_e5m2", 2), ("float32", 64)])
def test_every_width_compiles(dtype, n):
    code = device_code(filled(dtype, n))
    if n == 1:
        assert "A_ptr[0] = " in code
    if dtype.endswith("64") and n > 2:
        assert "longlong2*)(A_ptr + (i_o * 2))" in code  # 16 bytes a vector, a loop over them


@pytest.mark.gpu
@pytest.mark.parametrize("stride_a,stride_b", [(128, 128), (130, 132), (129, 136)])
def test_strided_vectorized_copy_on_the_gpu(stride_a, stride_b):
    torch = pytest.importorskip("torch")
    kernel = tilelang.compile(strided_copy(128, 64, stride_a, stride_b), target="cuda")
    base_a = torch.randn(64, stride_a, device="cuda")
    base_b = torch.zeros(64, stride_b, device="cuda")
    a = torch.as_strided(base_a, (128, 64), (1, stride_a))
    b = torch.as_strided(base_b, (128, 64), (1, stride_b))
    kernel(a, b)
    torch.testing.assert_close(b, a * 2, rtol=0, atol=0)


def test_an_offset_with_a_symbolic_size_keeps_its_vectors():
    """``A[row, 4 * t + j]`` on an (m, n) tensor: the row's start depends on n, whose
    alignment the caller answers for (as before); the width stays 4."""
    n = T.symbolic("n")

    @T.prim_func
    def main(A: T.Tensor((8, n), "float32"), B: T.Tensor((8, n), "float32")):
        with T.Kernel(8, threads=32) as row:
            for j in T.vectorized(4):
                B[row, T.get_thread_binding(0) * 4 + j] = A[row, T.get_thread_binding(0) * 4 + j]

    assert "*(float4*)(B_ptr" in device_code(main)


def raw_ramp_store(shift: int, step: int):
    """``A[T.Ramp(t * step + shift, 1, 4)] = B[t, T.Ramp(0, 1, 4)] * 2``: a vector store
    written by hand, aligned to 16 bytes only where step and shift are multiples of 4."""
    @T.prim_func
    def main(B: T.Tensor((4, 4), T.float32), A: T.Tensor((32,), T.float32)):
        with T.Kernel(1, threads=1):
            for t in T.serial(4):
                A[T.Ramp(t * step + shift, 1, 4)] = B[t, T.Ramp(0, 1, 4)] * T.Broadcast(T.float32(2), 4)

    return main


@pytest.mark.parametrize("shift,step,stores", [(2, 1, "A_ptr[(t + 2)] ="), (2, 4, "*(float2*)(A_ptr"),
                                               (8, 4, "*(float4*)(A_ptr")])
def test_a_hand_written_vector_store_is_split_where_it_is_not_aligned(shift, step, stores):
    """TVM prints a global vector store as one vector whatever its address (a misaligned
    address fault on the GPU, upstream's issue 2554); it is split into aligned vectors, down
    to elements, and the interpreter (which faults on a misaligned vector) agrees with numpy."""
    code = device_code(raw_ramp_store(shift, step))
    assert stores in code
    if shift % 4:
        assert "*(float4*)(A_ptr" not in code
    b = np.arange(16, dtype="float32")
    a = np.full(32, -1, "float32")
    lowered_kernel(tilelang.lower(raw_ramp_store(shift, step), target=SM90).device_mod)(b, a)
    expected = np.full(32, -1, "float32")
    for t in range(4):
        expected[t * step + shift:t * step + shift + 4] = b[4 * t:4 * t + 4] * 2
    np.testing.assert_array_equal(a, expected)


@pytest.mark.gpu
def test_a_hand_written_unaligned_vector_store_on_the_gpu():
    torch = pytest.importorskip("torch")
    kernel = tilelang.compile(raw_ramp_store(2, 1), target="cuda")
    b = torch.arange(16, dtype=torch.float32, device="cuda").reshape(4, 4)
    a = torch.full((32,), -1.0, device="cuda")
    kernel(b, a)
    expected = torch.full((32,), -1.0)
    for t in range(4):
        expected[t + 2:t + 6] = b[t].cpu() * 2
    torch.testing.assert_close(a.cpu(), expected, rtol=0, atol=0)


def byte_broadcast(dtype: str, lanes: int, runtime: bool):
    """``packed[0:lanes] = T.Broadcast(x, lanes)`` of a byte type (upstream's issue 2480)."""
    @T.prim_func
    def main(src: T.Tensor((1,), dtype), out: T.Tensor((lanes,), dtype)):
        with T.Kernel(1, threads=1):
            packed = T.alloc_local((lanes,), dtype)
            packed[0:lanes] = T.Broadcast(src[0] if runtime else T.cast(-37 if dtype == "int8" else 213, dtype), lanes)
            for i in T.serial(lanes):
                out[i] = packed[i]

    return main


@pytest.mark.parametrize("dtype,value", [("int8", -37), ("uint8", 213)])
@pytest.mark.parametrize("lanes", [4, 16, 32])
@pytest.mark.parametrize("runtime", [True, False])
def test_a_byte_broadcast_wider_than_a_vector(dtype, value, lanes, runtime):
    """TVM's CUDA codegen broadcast bytes only as constants, and had no type for 32 lanes
    ("Cannot convert type T.int8x32 to CUDA type"): the store is split into 16-byte vectors
    and a runtime byte is packed into words; nvcc compiles it and the interpreter agrees."""
    code = device_code(byte_broadcast(dtype, lanes, runtime))
    assert re.search(r"\*\(u?int4\*\)\(packed_ptr" if lanes >= 16 else r"\*\(u?int\*\)\(packed_ptr", code)
    out = np.zeros(lanes, dtype)
    lowered_kernel(tilelang.lower(byte_broadcast(dtype, lanes, runtime), target=SM90).device_mod)(
        np.array([value], dtype), out)
    np.testing.assert_array_equal(out, np.full(lanes, value, dtype))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,value", [("int8", -37), ("uint8", 213)])
def test_a_byte_broadcast_on_the_gpu(dtype, value):
    torch = pytest.importorskip("torch")
    kernel = tilelang.compile(byte_broadcast(dtype, 32, True), target="cuda")
    out = torch.zeros(32, dtype=getattr(torch, dtype), device="cuda")
    kernel(torch.tensor([value], dtype=getattr(torch, dtype), device="cuda"), out)
    torch.testing.assert_close(out.cpu(), torch.full((32,), value, dtype=getattr(torch, dtype)), rtol=0, atol=0)


@pytest.mark.parametrize("dtype,n", [("float8_e4m3fn", 8), ("float8_e5m2", 16)])
def test_fp8_made_from_integers_is_stored_four_lanes_at_a_time(dtype, n):
    """fp8 from an int32 goes through float32 vectors (CUDA converts fp8 vectors from float4
    at most): 8 lanes printed a float32x8 cast to ``uint2`` that nvcc refused; the loop is now
    cut to 16-byte float32 vectors (upstream's test_vectorize_all_dtypes), each converted a
    pair of lanes at a time (transform/conversions.py)."""
    code = device_code(filled(dtype, n))
    kind = "e4m3" if "e4m3" in dtype else "e5m2"
    assert code.count(f"*(__nv_fp8x4_{kind}*)(A_ptr + (i_o * 4)) = ") == 1, code
    assert code.count(f"__tl_cvt_float4_to_fp8x4<__NV_{kind.upper()}>(") == 1, code
    assert "uint2" not in code


def zeroed(dtype: str, n: int):
    @T.prim_func
    def main(A: T.Tensor((64,), dtype)):
        with T.Kernel(1, threads=32):
            for i in T.vectorized(n):
                A[i] = 0

    return main


@pytest.mark.parametrize("dtype,lanes", [("int8", 4), ("uint8", 4), ("int8", 16)])
def test_vectorized_byte_ramps_compile_and_count(dtype, lanes):
    """int8 ramps of 4 lanes printed as make_int (no such function)."""
    code = device_code(filled(dtype, lanes))
    assert "make_int(" not in code and "make_uint(" not in code
    out = np.zeros(64, dtype)
    lowered_kernel(tilelang.lower(filled(dtype, lanes), target=SM90).device_mod)(out)
    np.testing.assert_array_equal(out[:lanes], np.arange(1, lanes + 1))
    np.testing.assert_array_equal(out[lanes:], 0)


@pytest.mark.parametrize("dtype,lanes", [("float8_e4m3fn", 8), ("float8_e5m2", 16), ("int8", 32)])
def test_a_vectorized_zero_fill_of_bytes_compiles(dtype, lanes):
    """fp8 broadcasts of 8 or 16 lanes stopped TVM's code generator on "lanes == 1 || lanes
    == 2 || lanes == 4" (upstream's issue 1601): the byte is packed into words."""
    code = device_code(zeroed(dtype, lanes))
    assert "16843009" in code  # 0x01010101: one byte spread over a word


def half_selected():
    @T.prim_func
    def main(A: T.Tensor((1024,), T.float32), B: T.Tensor((1024,), T.float32)):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(1024):
                B[i] = T.Select(i < 512, A[i], 0.0)

    return main


def test_a_select_whose_condition_is_the_same_in_every_lane():
    """TVM kept a broadcast condition in a temporary of the values' type (`float4 v_ =
    make_ushort4(...)`: no conversion); a scalar branch picks the vector instead."""
    code = device_code(half_selected())
    assert "make_ushort4" not in code
    a, b = np.arange(1024, dtype="float32") + 1, np.full(1024, -1, "float32")
    lowered_kernel(tilelang.lower(half_selected(), target=SM90).device_mod)(a, b)
    np.testing.assert_array_equal(b, np.where(np.arange(1024) < 512, a, 0))


def scaled_by_groups(n: int, m: int, k: int):
    @T.prim_func
    def main(A: T.Tensor((n, m), T.float32), B: T.Tensor((n, m), T.float32), C: T.Tensor((n, m // k), T.float32)):
        with T.Kernel(n // 32, threads=32) as bx:
            row = bx * 32 + T.get_thread_binding(0)
            for col in T.vectorized(m):
                B[row, col] = A[row, col] * C[row, col // k]

    return main


@pytest.mark.parametrize("m,k,vector", [(128, 2, "float2"), (128, 4, "float4"), (384, 6, "float2"),
                                        (896, 14, "float2"), (128, 8, "float4")])
def test_an_element_shared_by_several_lanes_limits_the_vector_to_them(m, k, vector):
    """``C[row, col // k]`` is the same element for k consecutive lanes: a vector is as wide
    as the element stays one (upstream's test_vectorize_invariant_index). Before, the first
    two lanes' equal offsets counted as an access that never moves, and 4 lanes read
    ``col // 2`` as a gather of two elements."""
    code = device_code(scaled_by_groups(32, m, k))
    assert f"*({vector}*)(B_ptr" in code
    assert "float4" not in code if vector == "float2" else True
    rng = np.random.default_rng(3)
    a, c = rng.standard_normal((32, m)).astype(np.float32), rng.standard_normal((32, m // k)).astype(np.float32)
    b = np.zeros((32, m), np.float32)
    lowered_kernel(tilelang.lower(scaled_by_groups(32, m, k), target=SM90).device_mod)(a, b, c)
    np.testing.assert_array_equal(b, a * np.repeat(c, k, axis=1))
