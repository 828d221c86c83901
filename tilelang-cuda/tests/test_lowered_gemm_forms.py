"""GEMM forms beyond 16-bit tiles of static size, lowered by the CUDA pipeline and run as
lowered (see test_lowered_emulation.py): 8-bit operands (fp8 e4m3/e5m2 on mma.sync
m16n8k32 from sm_89 and wgmma k32 on sm_90; int8 into int32), a second accumulator that
nests update beside C, C read through T.reshape, and M, N, K known only when the kernel
runs (T.dynamic). Exact against numpy: small-integer operands, scales of powers of two.
"""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from lowered_emulator import EmulationError
from lowered_instructions import fp8_values, lowered_kernel
from test_lowered_emulation import SM90, lower, run, small_ints
from tilelang.testing.kernels import pointer_gemm, tile_gemm


def fp8_ints(rng, shape, dtype) -> tuple[np.ndarray, np.ndarray]:
    """(the kernel's argument as the 8-bit float's bits, its values): integers in [-4, 4],
    exact in e4m3 and e5m2, whose products and sums are exact in fp32."""
    values = rng.integers(-4, 5, shape).astype(np.float64)
    table = fp8_values(np.arange(256), "e4m3" if "e4m3" in dtype else "e5m2")
    bits = np.array([np.flatnonzero(table == v)[0] for v in range(-4, 5)], np.uint8)
    return bits[(values + 4).astype(np.int64)], values


FP8_GEMMS = [  # arch, dtype, M, N, K, block M, N, K, stages, threads, the product's instruction
    ("sm_89", "float8_e4m3fn", 128, 128, 128, 64, 64, 64, 2, 128, "tl_mma_m16n8k32_e4m3_f32"),
    ("sm_89", "float8_e5m2", 64, 128, 96, 64, 64, 32, 3, 128, "tl_mma_m16n8k32_e5m2_f32"),  # one k step a tile
    ("sm_90", "float8_e4m3fn", 128, 128, 256, 128, 128, 128, 3, 128, "tl_wgmma_m64n128k32_e4m3_00"),  # 128 B swizzle
    ("sm_90", "float8_e5m2", 128, 256, 128, 64, 256, 64, 2, 256, "tl_wgmma_m64n128k32_e5m2_00"),  # 64 B, 2 groups
]


@pytest.mark.parametrize("arch,dtype,m,n,k,bm,bn,bk,stages,threads,instruction", FP8_GEMMS)
def test_fp8_gemm_as_lowered_equals_numpy(arch, dtype, m, n, k, bm, bn, bk, stages, threads, instruction):
    """8-bit float GEMMs (A K-major, B as [n][k]: upstream's fp8 examples) on tensor cores:
    mma.sync m16n8k32 from sm_89, wgmma k32 on sm_90; C = A B^T exactly."""
    rng = np.random.default_rng(m + n + k)
    a, a_values = fp8_ints(rng, (m, k), dtype)
    b, b_values = fp8_ints(rng, (n, k), dtype)
    c = np.full((m, n), np.nan, np.float32)
    func = tile_gemm(m, n, k, bm, bn, bk, False, True, dtype=dtype, stages=stages, threads=threads)
    calls = run(lower(func, {"kind": "cuda", "arch": arch}), a, b, c)
    # (a warp's call counts once: its 16x8 pieces, or a warpgroup's 64x128 ones, per k step and block)
    pieces, issuers = (bm * bn // (16 * 8), threads // 32) if arch == "sm_89" else (bm * bn // (64 * 128), threads // 128)
    assert calls[instruction] == (m // bm) * (n // bn) * (k // 32) * pieces // issuers
    np.testing.assert_array_equal(c, a_values @ b_values.T)


@pytest.mark.parametrize("arch,m,n,k,bm,bn,bk,stages,threads,instruction", [
    ("sm_80", 128, 128, 128, 64, 64, 64, 2, 128, "tl_mma_m16n8k32_s8_s32"),
    ("sm_90", 128, 128, 256, 128, 128, 128, 3, 128, "tl_wgmma_m64n128k32_s8_00"),  # 128-byte swizzle
    ("sm_90", 128, 256, 128, 64, 256, 64, 2, 256, "tl_wgmma_m64n128k32_s8_00"),  # two warpgroups
])
def test_int8_gemm_into_int32_as_lowered_equals_numpy(arch, m, n, k, bm, bn, bk, stages, threads, instruction):
    rng = np.random.default_rng(m + k)
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (n, k)).astype(np.int8)
    c = np.full((m, n), -1, np.int32)
    func = tile_gemm(m, n, k, bm, bn, bk, False, True, dtype="int8", accum_dtype="int32", stages=stages,
                     threads=threads)  # (upstream's int8 GEMM tests' TN form)
    calls = run(lower(func, {"kind": "cuda", "arch": arch}), a, b, c)
    assert calls[instruction] > 0
    np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64).T)


def scaled_block_sums(M, N, K, bM, bN, bK, dtype="float16", threads=128, stages=2):
    """deepgemm's two accumulators (upstream's example_deepgemm_fp8_2xAcc): each k block's
    product lands in C, is added into D scaled by its row's factor for that block, and C is
    cleared for the next block. D is written by no GEMM: it takes C's layout beside it."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype), S: T.Tensor((M, K // bK), "float32"),
             D: T.Tensor((M, N), "float32")):
        with T.Kernel(N // bN, M // bM, threads=threads) as (bx, by):
            As = T.alloc_shared((bM, bK), dtype)
            Bs = T.alloc_shared((bN, bK), dtype)
            Cl = T.alloc_fragment((bM, bN), "float32")
            Dl = T.alloc_fragment((bM, bN), "float32")
            T.clear(Cl)
            T.clear(Dl)
            for k in T.Pipelined(K // bK, num_stages=stages):
                T.copy(A[by * bM, k * bK], As)
                T.copy(B[bx * bN, k * bK], Bs)
                T.gemm(As, Bs, Cl, transpose_B=True)
                for i, j in T.Parallel(bM, bN):
                    Dl[i, j] += Cl[i, j] * S[by * bM + i, k]
                T.clear(Cl)
            T.copy(Dl, D[by * bM, bx * bN])

    return main


@pytest.mark.parametrize("arch,dtype,instruction", [
    ("sm_80", "float16", "tl_mma_m16n8k16_f16_f32"),
    ("sm_90", "float16", "tl_wgmma_m64n128k16_f16_00"),
    ("sm_89", "float8_e4m3fn", "tl_mma_m16n8k32_e4m3_f32"),
    ("sm_90", "float8_e4m3fn", "tl_wgmma_m64n128k32_e4m3_00"),
])
def test_a_second_accumulator_beside_c_keeps_the_gemm_on_tensor_cores(arch, dtype, instruction):
    m, n, k, bk = 128, 128, 256, 64
    rng = np.random.default_rng(7)
    make = fp8_ints if dtype.startswith("float8") else small_ints
    a, a_values = make(rng, (m, k), dtype)
    b, b_values = make(rng, (n, k), dtype)
    scales = np.exp2(rng.integers(-2, 3, (m, k // bk))).astype(np.float32)  # exact products
    d = np.full((m, n), np.nan, np.float32)
    calls = run(lower(scaled_block_sums(m, n, k, 64, 128, bk, dtype), {"kind": "cuda", "arch": arch}),
                a, b, scales, d)
    assert calls[instruction] > 0
    expected = sum(scales[:, [kb]] * (a_values[:, kb * bk:(kb + 1) * bk] @ b_values[:, kb * bk:(kb + 1) * bk].T)
                   for kb in range(k // bk))
    np.testing.assert_array_equal(d, expected)


def test_a_gemm_over_a_run_time_m_emulates_with_its_size():
    rng = np.random.default_rng(5)
    m, n, k = 80, 128, 256  # three blocks of 32 rows, the last one partly outside
    a, a_values = fp8_ints(rng, (m, k), "float8_e4m3fn")
    b, b_values = fp8_ints(rng, (n, k), "float8_e4m3fn")
    c = np.full((m, n), np.nan, np.float32)
    # DeepSeek-V3.2 inference's fp8_gemm shape: M a run-time size, 32-row blocks (too few
    # for wgmma's 64: mma.sync m16n8k32 on sm_90 too)
    func = tile_gemm(T.dynamic("M"), n, k, 32, 128, 128, False, True, dtype="float8_e4m3fn", stages=3)
    kernel = lowered_kernel(lower(func, SM90))
    with pytest.raises(EmulationError, match=r"takes the shape variable M: pass scalars="):
        kernel(a, b, c)
    kernel(a, b, c, scalars={"M": m})
    assert kernel.calls["tl_mma_m16n8k32_e4m3_f32"] > 0
    np.testing.assert_array_equal(c, a_values @ b_values.T)


def run_time_gemm(bM, bN, bK, trans_a, trans_b, stages=3):
    """Upstream's examples/dynamic_shape kernel: M, N and K all run-time sizes."""
    return tile_gemm(T.dynamic("m"), T.dynamic("n"), T.dynamic("k"), bM, bN, bK, trans_a, trans_b, stages=stages)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, True)])
@pytest.mark.parametrize("m,n,k,vectors", [(80, 72, 96, True), (81, 75, 100, False), (72, 83, 96, None),
                                            (64, 64, 0, None)])  # K = 0: the ring never runs, C = 0
def test_run_time_shapes_copy_vectors_where_their_rows_allow(arch, trans_a, trans_b, m, n, k, vectors):
    """Rows of run-time length: the stage ring copies 16-byte vectors when the length is a
    multiple of 8 halves when it runs, else element by element; either way C is exact.
    (``vectors``: every row length a multiple of 8, none, or some.)"""
    rng = np.random.default_rng(m + n + k)
    a, a_values = small_ints(rng, (k, m) if trans_a else (m, k))
    b, b_values = small_ints(rng, (n, k) if trans_b else (k, n))
    c = np.full((m, n), np.nan, np.float32)
    kernel = lowered_kernel(lower(run_time_gemm(64, 64, 32, trans_a, trans_b), {"kind": "cuda", "arch": arch}))
    kernel(a, b, c, scalars={"m": m, "n": n, "k": k})
    assert any(name.startswith(("tl_mma", "tl_wgmma_m64")) for name in kernel.calls) == (k > 0)
    if vectors is not None:
        assert (kernel.calls.get("tl_cp_async_16", 0) > 0) == vectors
    np.testing.assert_array_equal(c, (a_values.T if trans_a else a_values) @ (b_values.T if trans_b else b_values))


def gemm_then_reshaped_sum(dtype):
    """C read through T.reshape (deepseek_v32's fp8 indexer sums groups of C's columns so):
    the view reads C at its declared places, so C keeps them."""

    @T.prim_func
    def main(A: T.Tensor((64, 64), dtype), B: T.Tensor((128, 64), dtype), O: T.Tensor((64, 32), "float32")):
        with T.Kernel(1, threads=128):
            As = T.alloc_shared((64, 64), dtype)
            Bs = T.alloc_shared((128, 64), dtype)
            C = T.alloc_fragment((64, 128), "float32")
            grouped = T.reshape(C, (64, 32, 4))
            sums = T.alloc_fragment((64, 32), "float32")
            T.copy(A, As)
            T.copy(B, Bs)
            T.gemm(As, Bs, C, transpose_B=True, clear_accum=True)
            T.reduce_sum(grouped, sums, dim=-1, clear=True)
            T.copy(sums, O)

    return main


@pytest.mark.parametrize("arch,dtype", [("sm_80", "float16"), ("sm_90", "float16"), ("sm_90", "float8_e4m3fn")])
def test_an_accumulator_read_through_a_reshape_keeps_its_declared_places(arch, dtype):
    rng = np.random.default_rng(3)
    make = fp8_ints if dtype.startswith("float8") else small_ints
    a, a_values = make(rng, (64, 64), dtype)
    b, b_values = make(rng, (128, 64), dtype)
    out = np.full((64, 32), np.nan, np.float32)
    run(lower(gemm_then_reshaped_sum(dtype), {"kind": "cuda", "arch": arch}), a, b, out)
    np.testing.assert_array_equal(out, (a_values @ b_values.T).reshape(64, 32, 4).sum(-1))


@pytest.mark.parametrize("arch,instruction", [("sm_80", "tl_mma_m16n8k16_f16_f32"), ("sm_90", "tl_wgmma_commit")])
def test_a_gemm_over_pointer_parameters_as_lowered_equals_numpy(arch, instruction):
    """The launch hands the kernel each pointer parameter's value (the emulator's
    ``scalars``: the array the address is of); the tiles still take tensor cores."""
    rng = np.random.default_rng(5)
    a, a_values = small_ints(rng, (128, 64))
    b, b_values = small_ints(rng, (128, 64))
    c = np.full((128, 128), np.nan, np.float32)
    kernel = lowered_kernel(tilelang.lower(pointer_gemm(128, 128, 64), target={"kind": "cuda", "arch": arch}).device_mod)
    kernel(scalars={"a_ptr": a, "b_ptr": b, "c_ptr": c, "m_": 128, "n_": 128, "k_": 64})
    assert kernel.calls[instruction] > 0
    np.testing.assert_array_equal(c, a_values @ b_values.T)


def halves_out(M, N, K, threads=128, else_zero=False):
    """C written out in two halves of rows, each through a nest over all of C's rows that
    reads ``C[i + s * half, j]`` under ``if i < half`` (sparse MLA backward's split store of
    dKV). ``else_zero``: the nest's rows past the half write zeros to the half tile instead
    of nothing, so its iterations past C are not idle (C stays out of registers)."""
    half = M // 2

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), Out: T.Tensor((2, half, N), "float32")):
        with T.Kernel(1, threads=threads):
            As = T.alloc_shared((M, K), "float16")
            Bs = T.alloc_shared((K, N), "float16")
            Hs = T.alloc_shared((M, N), "float32")
            C = T.alloc_fragment((M, N), "float32")
            T.copy(A, As)
            T.copy(B, Bs)
            T.gemm(As, Bs, C, clear_accum=True)
            for s in range(2):
                for i, j in T.Parallel(M, N):
                    if i < half:
                        Hs[i, j] = C[i + s * half, j]
                    elif else_zero:
                        Hs[i, j] = T.float32(0)
                T.copy(Hs[0:half, :], Out[s, :, :])

    return main


@pytest.mark.parametrize("target,instruction", [
    ({"kind": "cuda", "arch": "sm_80"}, "tl_mma_m16n8k16_f16_f32"),
    (SM90, "tl_mma_m16n8k16_f16_f32"),
])
def test_c_read_a_fixed_distance_from_the_nests_indices_stays_in_registers(target, instruction):
    """``C[i + s * 16, j]`` under ``if i < 16``: the nest is the one over C's own indices,
    guarded; C stays a tensor-core accumulator (it took 64 KiB of shared memory in the SIMT
    lowering: sparse MLA backward's dKV, 295 KB in all on sm_90)."""
    m, n, k = 32, 64, 32
    rng = np.random.default_rng(3)
    a, a_values = small_ints(rng, (m, k))
    b, b_values = small_ints(rng, (k, n))
    out = np.full((2, m // 2, n), np.nan, np.float32)
    calls = run(lower(halves_out(m, n, k), target), a, b, out)
    assert calls.get(instruction, 0) > 0
    np.testing.assert_array_equal(out.reshape(m, n), a_values @ b_values)


def test_a_shifted_nest_whose_other_rows_do_work_keeps_the_simt_lowering():
    """The same nest with an ``else`` branch: its iterations past C's rows write zeros, so
    the guarded nest over C's own indices would lose them. C keeps the SIMT lowering, and
    the halves are still exact."""
    m, n, k = 32, 64, 32
    rng = np.random.default_rng(4)
    a, a_values = small_ints(rng, (m, k))
    b, b_values = small_ints(rng, (k, n))
    out = np.full((2, m // 2, n), np.nan, np.float32)
    calls = run(lower(halves_out(m, n, k, else_zero=True), SM90), a, b, out)
    assert not any(name.startswith(("tl_mma", "tl_wgmma")) for name in calls)
    np.testing.assert_array_equal(out.reshape(m, n), a_values @ b_values)
