"""Sub-byte tensors (T.float4_e2m1fn, T.int4, T.uint4), two elements per byte, as upstream
and torch store them (transform/subbyte.py): parameters bound from their bytes (uint8,
int8 or torch.float4_e2m1fn_x2), element loads and stores as nibbles, T.Parallel stores
that give each thread whole bytes; and dimensions that are arithmetic over symbols
(``m * 4``), which the packed shapes need. Values are checked against ml_dtypes' e2m1 and
numpy, bit for bit."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.errors import ArgumentError, LanguageError

torch = pytest.importorskip("torch")

FP4 = ml_dtypes.float4_e2m1fn


def nibbles(packed: np.ndarray) -> np.ndarray:
    """The 4-bit codes of a byte array, element 2j in the low nibble of byte j."""
    packed = packed.astype(np.uint8)
    return np.stack([packed & 15, packed >> 4], axis=-1).reshape(*packed.shape[:-1], -1)


def decode_kernel(dtype, out_dtype):
    @T.prim_func
    def main(A: T.Tensor((16, 32), dtype), B: T.Tensor((16, 32), out_dtype)):
        with T.Kernel(1, threads=1):
            for i, j in T.grid(16, 32):
                B[i, j] = T.cast(A[i, j], out_dtype)

    return main


def encode_kernel(n, dtype, in_dtype):
    @T.prim_func
    def main(A: T.Tensor((n,), in_dtype), B: T.Tensor((n,), dtype)):
        with T.Kernel(1, threads=1):
            for i in T.serial(n):
                B[i] = A[i]

    return main


def test_every_fp4_byte_decodes_to_its_two_e2m1_values():
    kernel = tilelang.compile(decode_kernel("float4_e2m1fn", "float32"), target="cpu")
    a = torch.arange(256, dtype=torch.uint8).reshape(16, 16)
    b = torch.zeros(16, 32)
    kernel(a, b)
    expected = nibbles(a.numpy()).astype(np.uint8).view(FP4).astype(np.float32)
    np.testing.assert_array_equal(b.numpy(), expected)


def test_float32_to_fp4_rounds_to_nearest_even_and_saturates():
    ties = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]
    values = np.array([*ties, *(-t for t in ties), 0.24, 0.26, 2.4, 4.9, 5.1, 7.0, 100.0, -100.0, np.inf,
                       -np.inf, 0.0, -0.0, 1e-30, 6.0, -6.0, 0.5, 3.0, 4.0, 1.5, 2.0], np.float32)
    values = np.concatenate([values, np.random.default_rng(0).standard_normal(2) * 3]).astype(np.float32)
    kernel = tilelang.compile(encode_kernel(len(values), "float4_e2m1fn", "float32"), target="cpu")
    out = torch.zeros(len(values) // 2, dtype=torch.uint8)
    kernel(torch.from_numpy(values), out)
    codes = nibbles(out.numpy())
    np.testing.assert_array_equal(codes, values.astype(FP4).view(np.uint8))  # -0.0 keeps its sign


def test_nan_becomes_the_largest_fp4_code():
    kernel = tilelang.compile(encode_kernel(2, "float4_e2m1fn", "float32"), target="cpu")
    out = torch.zeros(1, dtype=torch.uint8)
    kernel(torch.tensor([np.nan, 1.0]), out)
    assert nibbles(out.numpy()).tolist() == [7, 2]  # no fp4 value is NaN; CUDA's cvt saturates too


@pytest.mark.parametrize("dtype", ["int4", "uint4"])
def test_int4_and_uint4_decode_and_wrap_like_c(dtype):
    kernel = tilelang.compile(decode_kernel(dtype, "int32"), target="cpu")
    a = torch.arange(256, dtype=torch.uint8).reshape(16, 16)
    b = torch.zeros(16, 32, dtype=torch.int32)
    kernel(a, b)
    codes = nibbles(a.numpy()).astype(np.int32)
    expected = np.where(codes >= 8, codes - 16, codes) if dtype == "int4" else codes
    np.testing.assert_array_equal(b.numpy(), expected)
    values = np.arange(-20, 20, dtype=np.int32)
    store = tilelang.compile(encode_kernel(len(values), dtype, "int32"), target="cpu")
    out = torch.zeros(len(values) // 2, dtype=torch.uint8)
    store(torch.from_numpy(values), out)
    np.testing.assert_array_equal(nibbles(out.numpy()), values & 15)


@pytest.mark.parametrize("storage", ["uint8", "int8", "float4_e2m1fn_x2"])
def test_a_permuted_copy_moves_nibbles_unchanged(storage):
    """Upstream's scatter: dst[perm[i], k] = src[i, k], one element at a time (each store
    keeps the other nibble of its byte)."""
    @tilelang.jit(out_idx=None, target="cpu")
    def scatter(src, dst, perm):
        n = T.dynamic("n")
        src: T.Tensor[(n, 128), T.float4_e2m1fn]
        dst: T.Tensor[(n, 128), T.float4_e2m1fn]
        perm: T.Tensor[(n,), T.int32]
        with T.Kernel(n, threads=1) as i:
            for k in T.serial(128):
                dst[perm[i], k] = src[i, k]

    rng = torch.Generator().manual_seed(0)
    src = torch.randint(0, 256, (8, 64), dtype=torch.uint8, generator=rng)
    dst = torch.zeros(8, 64, dtype=torch.uint8)
    perm = torch.randperm(8, dtype=torch.int32, generator=rng)
    scatter(src.view(getattr(torch, storage)), dst.view(getattr(torch, storage)), perm)
    assert torch.equal(dst[perm.long()], src)


def roundtrip(rows=64, cols=128, threads=64):
    @T.prim_func
    def main(A: T.Tensor((rows, cols), T.float16)):
        B = T.empty((rows, cols), T.float4_e2m1fn)
        C = T.empty((rows, cols), T.float16)
        with T.Kernel(rows, threads=threads) as bx:
            for j in T.Parallel(cols):
                B[bx, j] = A[bx, j]
            T.sync_threads()  # the second loop reads bytes other threads wrote
            for j in T.Parallel(cols):
                C[bx, j] = B[bx, j]
        return B, C

    return main


def test_a_parallel_store_gives_each_thread_whole_bytes_and_outputs_are_fp4_storage():
    kernel = tilelang.compile(roundtrip(), target="cpu")
    a = (torch.randn(64, 128, generator=torch.Generator().manual_seed(1)) * 3).half()
    outputs = kernel(a)
    assert isinstance(outputs, list)  # several outputs: a list, as upstream
    b, c = outputs
    assert b.dtype == torch.float4_e2m1fn_x2 and tuple(b.shape) == (64, 64)
    expected = a.float().numpy().astype(FP4)
    np.testing.assert_array_equal(nibbles(b.view(torch.uint8).numpy()), expected.view(np.uint8))
    np.testing.assert_array_equal(c.float().numpy(), expected.astype(np.float32))
    # on the GPU: each thread writes the low, then the high nibble of the same byte
    source = tilelang.lower(roundtrip(), target={"kind": "cuda", "arch": "sm_90"}).device_source
    stores = re.findall(r"B_bytes_ptr\[([^\]]*)\] = .*?& \((\d+) \^ 255\)", source)  # the nibble replaced
    assert [mask for _, mask in stores] == ["15", "240"]
    assert stores[0][0] == stores[1][0] and ">> 1" not in stores[0][0]


def test_the_last_dimension_and_strides_bind_in_elements():
    @tilelang.jit(out_idx=None, target="cpu")
    def widths(x, out):
        n = T.dynamic("n")
        s = T.dynamic("s")
        x: T.StridedTensor[[4, n], [s, 1], T.float4_e2m1fn]
        out: T.Tensor[(2,), T.int32]
        with T.Kernel(1, threads=1):
            out[0] = n
            out[1] = s

    out = torch.zeros(2, dtype=torch.int32)
    widths(torch.zeros(8, 16, dtype=torch.uint8)[::2], out)  # bytes (4, 16) with row stride 32
    assert out.tolist() == [32, 64]


def test_a_shared_symbol_and_a_dimension_expression_are_checked():
    @tilelang.jit(out_idx=None, target="cpu")
    def pair(x, y):
        m = T.dynamic("m")
        x: T.Tensor[(m, 16), T.float4_e2m1fn]
        y: T.Tensor[(m * 4, 16), T.float4_e2m1fn]
        with T.Kernel(1, threads=1):
            T.evaluate(0)

    pair(torch.zeros(2, 8, dtype=torch.uint8), torch.zeros(8, 8, dtype=torch.int8))
    with pytest.raises(ArgumentError, match=r"kernel 'pair', argument 'y' \(#1\): expected shape \(m \* 4, 8\), "
                                            r"got \(7, 8\): dimension 0 must be m \* 4 = 8 \(m = 2\)"):
        pair(torch.zeros(2, 8, dtype=torch.uint8), torch.zeros(7, 8, dtype=torch.uint8))


def test_a_tensor_that_is_not_bytes_is_refused():
    kernel = tilelang.compile(decode_kernel("float4_e2m1fn", "float32"), target="cpu")
    with pytest.raises(ArgumentError, match=r"argument 'A' \(#0\): expected the bytes of a float4_e2m1fn tensor "
                                            r"\(two elements per byte: uint8 or int8 or float4_e2m1fn_x2\), got "
                                            r"float16"):
        kernel(torch.zeros(16, 16, dtype=torch.float16), torch.zeros(16, 32))


def test_a_parallel_store_two_threads_could_share_a_byte_of_is_refused():
    @T.prim_func
    def transposed(A: T.Tensor((16, 16), T.float32), B: T.Tensor((16, 16), T.float4_e2m1fn)):
        with T.Kernel(1, threads=16):
            for i, j in T.Parallel(16, 16):
                B[j, i] = A[i, j]

    with pytest.raises(LanguageError, match=r"T.Parallel store to the sub-byte element B\[j, i\]: two threads "
                                            r"could write the two halves of one byte at once; index the last "
                                            r"axis by the innermost T.Parallel variable"):
        tilelang.compile(transposed, target="cpu")


def test_a_stride_of_half_a_byte_is_refused():
    @T.prim_func
    def odd(A: T.StridedTensor((4, 8), (9, 1), T.float4_e2m1fn)):
        with T.Kernel(1, threads=1):
            T.evaluate(0)

    with pytest.raises(LanguageError, match=r"kernel 'odd', parameter 'A' \(float4_e2m1fn, 2 per byte\): stride 0 "
                                            r"is 9, not a whole number of bytes \(2 elements each\); make it a "
                                            r"multiple of 2"):
        tilelang.compile(odd, target="cpu")


def test_an_output_dimension_expression_is_evaluated():
    @tilelang.jit(target="cpu")
    def doubled(A):
        m = T.dynamic("m")
        A: T.Tensor[(m,), T.float32]
        B = T.empty((m * 2 + 1,), T.float32)
        with T.Kernel(1, threads=1):
            for i in T.serial(m * 2 + 1):
                B[i] = T.cast(i, "float32")
            for i in T.serial(m):
                B[i] = A[i]
        return B

    out = doubled(torch.arange(3, dtype=torch.float32) + 10)
    assert out.tolist() == [10.0, 11.0, 12.0, 3.0, 4.0, 5.0, 6.0]


def test_a_dimension_over_symbols_no_tensor_gives_is_refused():
    # (one such symbol in a linear dimension is solved from the tensor: test_solved_dims.py)
    @T.prim_func
    def free(A: T.Tensor((T.dynamic("k") * T.dynamic("m"),), T.float32)):
        with T.Kernel(1, threads=1):
            T.evaluate(0)

    with pytest.raises(LanguageError, match=r"kernel 'free', parameter 'A': dimension k \* m is an expression of k, m; "
                                            r"use a constant, a symbolic dimension"):
        tilelang.compile(free, target="cpu")


@pytest.mark.parametrize("scope", ["local", "shared"])
def test_a_sub_byte_allocation_is_bytes_of_its_own(scope):
    @T.prim_func
    def staged(A: T.Tensor((32,), T.float32), B: T.Tensor((32,), T.float32)):
        with T.Kernel(1, threads=1):
            tile = T.alloc_local((32,), T.float4_e2m1fn) if scope == "local" else T.alloc_shared((32,), T.float4_e2m1fn)
            for i in T.serial(32):
                tile[i] = A[i]
            for i in T.serial(32):
                B[i] = tile[31 - i]

    kernel = tilelang.compile(staged, target="cpu")
    a = torch.linspace(-7, 7, 32)
    b = torch.zeros(32)
    kernel(a, b)
    np.testing.assert_array_equal(b.numpy(), a.numpy().astype(FP4).astype(np.float32)[::-1])


def test_a_two_dimensional_parallel_store_is_split_on_its_inner_axis():
    @T.prim_func
    def store(A: T.Tensor((4, 16), T.float32), B: T.Tensor((4, 16), T.float4_e2m1fn)):
        with T.Kernel(1, threads=32):
            for i, j in T.Parallel(4, 16):
                B[i, j] = A[i, j]

    kernel = tilelang.compile(store, target="cpu")
    a = torch.randn(4, 16, generator=torch.Generator().manual_seed(2)) * 3
    b = torch.zeros(4, 8, dtype=torch.uint8)
    kernel(a, b)
    np.testing.assert_array_equal(nibbles(b.numpy()), a.numpy().astype(FP4).view(np.uint8))


@pytest.mark.parametrize(("dtype", "values", "reference"), [
    (T.float4_e2m1fn, [0.0, 1.0, -6.0, 0.5, 2.7], lambda v: np.asarray(v, np.float32).astype(FP4).astype(np.float32)),
    (T.int4, [1, -8, 7, 0, -3], lambda v: np.asarray(v, np.float32)),
    (T.uint4, [1, 15, 0, 9, 4], lambda v: np.asarray(v, np.float32)),
])
def test_a_constant_of_the_sub_byte_type_is_stored(dtype, values, reference):
    """``tile[i] = T.cast(0.0, T.float4_e2m1fn)`` or ``T.int4(1)``: TVM folds the cast into a
    constant of the sub-byte type (upstream's shared-memory tests store these); its nibble
    is that of the same number, and the odd index keeps the even neighbour's nibble."""
    @T.prim_func
    def constants(O: T.Tensor((5,), T.float32)):
        with T.Kernel(1, threads=1):
            tile = T.alloc_shared((127,), dtype)
            tile[122] = T.cast(values[0], dtype)
            tile[123] = T.cast(values[1], dtype)
            tile[124] = T.cast(values[2], dtype)
            tile[125] = T.cast(values[3], dtype)
            tile[126] = T.cast(values[4], dtype)
            for i in T.serial(5):
                O[i] = T.cast(tile[122 + i], T.float32)

    kernel = tilelang.compile(constants, target="cpu")
    out = torch.zeros(5)
    kernel(out)
    np.testing.assert_array_equal(out.numpy(), reference(values))
