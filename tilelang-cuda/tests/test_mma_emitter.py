"""TensorCoreIntrinEmitter (tilelang.cuda.intrinsics.macro): upstream's hand-scheduled
ldmatrix + mma.sync GEMM, checked against numpy in the lowered-IR emulator (every
address, fragment and accumulator of the emitted code; lowered_emulator.py) and, on a GPU,
run for real."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from lowered_instructions import lowered_kernel
from tilelang.cuda.intrinsics import get_swizzle_layout
from tilelang.cuda.intrinsics.macro.mma_macro_generator import TensorCoreIntrinEmitter
from tilelang.errors import LanguageError

SM80 = {"kind": "cuda", "arch": "sm_80"}


def emitter_gemm(M, N, K, dtype, accum, trans_a=False, trans_b=True, warps=(2, 2), warp_tile=(32, 32),
                 chunk=32, swizzle=False):
    """upstream's example_gemm_intrinsics, parameterized: C = A @ B with A [M, K] (or
    [K, M]) and B [N, K] (or [K, N]), through shared tiles and the emitter's fragments."""
    rows, cols = warps
    block_M, block_N = rows * warp_tile[0], cols * warp_tile[1]
    emitter = TensorCoreIntrinEmitter(a_dtype=dtype, b_dtype=dtype, accum_dtype=accum, a_transposed=trans_a,
                                      b_transposed=trans_b, block_row_warps=rows, block_col_warps=cols,
                                      warp_row_tiles=warp_tile[0], warp_col_tiles=warp_tile[1], chunk=chunk)
    a_shape, a_tile = ((K, M), (chunk, block_M)) if trans_a else ((M, K), (block_M, chunk))
    b_shape, b_tile = ((N, K), (block_N, chunk)) if trans_b else ((K, N), (chunk, block_N))
    la = emitter.warp_rows * emitter.local_size_a
    lb = emitter.warp_cols * emitter.local_size_b
    lc = emitter.warp_rows * emitter.warp_cols * emitter.local_size_out

    def swizzled(buf):
        return T.Layout(buf.shape, lambda i, j: list(get_swizzle_layout(i, j, buf.shape[-1], dtype)))

    @T.prim_func
    def gemm(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), accum)):
        with T.Kernel(N // block_N, M // block_M, threads=32 * rows * cols) as (bx, by):
            A_shared = T.alloc_shared(a_tile, dtype)
            B_shared = T.alloc_shared(b_tile, dtype)
            C_shared = T.alloc_shared((block_M, block_N), accum)
            A_local = T.alloc_local((la,), dtype)
            B_local = T.alloc_local((lb,), dtype)
            C_local = T.alloc_local((lc,), accum)
            if swizzle:
                T.annotate_layout({A_shared: swizzled(A_shared), B_shared: swizzled(B_shared)})
            T.clear(C_local)
            for ko in T.Pipelined(K // chunk, num_stages=2):
                if trans_a:
                    for k, i in T.Parallel(chunk, block_M):
                        A_shared[k, i] = A[ko * chunk + k, by * block_M + i]
                else:
                    for i, k in T.Parallel(block_M, chunk):
                        A_shared[i, k] = A[by * block_M + i, ko * chunk + k]
                if trans_b:
                    for j, k in T.Parallel(block_N, chunk):
                        B_shared[j, k] = B[bx * block_N + j, ko * chunk + k]
                else:
                    for k, j in T.Parallel(chunk, block_N):
                        B_shared[k, j] = B[ko * chunk + k, bx * block_N + j]
                for ki in T.serial(chunk // emitter.k_dim):
                    emitter.ldmatrix_a(A_local, A_shared, ki)
                    emitter.ldmatrix_b(B_local, B_shared, ki)
                    emitter.mma(A_local, B_local, C_local)
            emitter.stmatrix(C_local, C_shared)
            for i, j in T.Parallel(block_M, block_N):
                C[by * block_M + i, bx * block_N + j] = C_shared[i, j]

    return gemm


def operands(rng, M, N, K, dtype, trans_a, trans_b):
    """Small integers (exact in every accumulator here); bfloat16 passed as its bits."""
    a = rng.integers(-3, 4, (K, M) if trans_a else (M, K)).astype(np.float64)
    b = rng.integers(-3, 4, (N, K) if trans_b else (K, N)).astype(np.float64)
    ref = (a.T if trans_a else a) @ (b.T if trans_b else b)

    def as_arg(x):
        if dtype == "bfloat16":
            return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        return x.astype(dtype)

    return as_arg(a), as_arg(b), ref


CASES = [  # dtype, accum, trans_a, trans_b, warps, warp tile, chunk, swizzle
    ("float16", "float32", False, True, (2, 2), (32, 32), 32, False),   # upstream's example's shape of code
    ("float16", "float32", False, True, (2, 2), (32, 32), 32, True),    # its swizzle annotation
    ("float16", "float32", True, False, (2, 1), (16, 32), 16, False),   # .trans loads of both operands
    ("bfloat16", "float32", False, False, (1, 2), (32, 16), 32, False),
    ("float16", "float32", False, True, (2, 2), (16, 24), 16, False),   # 8-column atoms: ldmatrix.x2
    ("float16", "float16", False, True, (2, 2), (16, 16), 16, False),   # fp16 accumulators
    ("int8", "int32", False, True, (2, 2), (16, 32), 32, False),        # m16n8k32
]


@pytest.mark.parametrize("dtype,accum,trans_a,trans_b,warps,warp_tile,chunk,swizzle", CASES)
def test_the_emitters_gemm_as_lowered_equals_numpy(dtype, accum, trans_a, trans_b, warps, warp_tile, chunk, swizzle):
    M, N, K = warps[0] * warp_tile[0], 2 * warps[1] * warp_tile[1], 2 * chunk
    func = emitter_gemm(M, N, K, dtype, accum, trans_a, trans_b, warps, warp_tile, chunk, swizzle)
    device_mod = tilelang.lower(func, target=SM80).device_mod
    a, b, ref = operands(np.random.default_rng(0), M, N, K, dtype, trans_a, trans_b)
    c = np.zeros((M, N), accum)
    kernel = lowered_kernel(device_mod)
    kernel(a, b, c)
    np.testing.assert_array_equal(c.astype(np.float64), ref)
    assert any(name.startswith("tl_ldmatrix") for name in kernel.calls)
    assert any(name.startswith("tl_mma_") for name in kernel.calls)


def test_the_emitted_code_compiles_with_nvcc():
    from tilelang.cuda.toolchain import compile_cubin, nvcc_path

    if nvcc_path() is None:
        pytest.skip("no nvcc")
    for case in (CASES[0], CASES[4], CASES[5], CASES[6]):
        dtype, accum, trans_a, trans_b, warps, warp_tile, chunk, swizzle = case
        func = emitter_gemm(256, 256, 128, dtype, accum, trans_a, trans_b, warps, warp_tile, chunk, swizzle)
        artifact = tilelang.lower(func, target=SM80)
        assert compile_cubin(artifact.device_source, "sm_80", artifact.kernel_name)[:4] == b"\x7fELF"


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"a_dtype": "float32", "b_dtype": "float32", "accum_dtype": "float32"},
     "float32 x float32 -> float32 is not supported here; supported: float16 x float16 -> float32"),
    ({"a_dtype": "int8", "b_dtype": "int8", "accum_dtype": "int32", "b_transposed": False, "chunk": 32},
     r"int8 operands need A stored \[M, K\] and B stored \[N, K\]"),
    ({"warp_row_tiles": 24}, "a warp's tile must be a multiple of 16 x 8, got 24 x 8"),
    ({"a_dtype": "float16", "accum_dtype": "float32", "chunk": 8}, "chunk 8 is less than one float16 mma k step"),
])
def test_unsupported_configurations_say_what_is(kwargs, message):
    with pytest.raises(LanguageError, match=message):
        TensorCoreIntrinEmitter(**{"warp_row_tiles": 16, **kwargs})


@pytest.mark.gpu
@pytest.mark.parametrize("case", [CASES[0], CASES[1], CASES[2], CASES[4], CASES[5], CASES[6]])
def test_the_emitters_gemm_on_the_gpu(case):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    dtype, accum, trans_a, trans_b, warps, warp_tile, chunk, swizzle = case
    M, N, K = 4 * warps[0] * warp_tile[0], 4 * warps[1] * warp_tile[1], 8 * chunk
    kernel = tilelang.compile(emitter_gemm(M, N, K, dtype, accum, trans_a, trans_b, warps, warp_tile, chunk, swizzle))
    a, b, ref = operands(np.random.default_rng(1), M, N, K, dtype, trans_a, trans_b)
    c = torch.zeros((M, N), dtype=getattr(torch, accum), device="cuda")
    kernel(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(), c)
    np.testing.assert_array_equal(c.cpu().numpy().astype(np.float64), ref)
