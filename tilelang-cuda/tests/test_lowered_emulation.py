"""Tensor-core GEMMs and row reductions lowered by the CUDA pipeline, then run as lowered.

test_mma_layout_emulation.py drives PTX models with the layout functions the pass is
built from, so glue the pass adds around them (the accumulator pointer of each mma, the
offset of each wgmma's registers, the lanes and masks of the row shuffles) is never looked
at there. Here kernels go through ``tilelang.lower`` for sm_80 (ldmatrix + mma.sync) and
sm_90 (wgmma), and the device IR handed to codegen is interpreted in numpy
(lowered_emulator.py), its instructions emulated from the PTX ISA (lowered_instructions.py):
every pointer, offset, descriptor, shuffle mask, lane offset and width comes from the IR.
Results are compared with numpy: exactly where the inputs are small integers (every
product and sum is exact in fp32), to fp16 rounding for flash attention.
"""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
import tvm
import tvm_ffi
from lowered_emulator import EmulationError
from lowered_instructions import lowered_kernel
from tilelang.testing.kernels import (
    flash_attention,
    flash_attention_persistent,
    mla_decode,
    tile_gemm,
)
from tvm import tirx

SM80 = {"kind": "cuda", "arch": "sm_80"}
SM90 = {"kind": "cuda", "arch": "sm_90"}


def lower(func, target, **configs):
    return tilelang.lower(func, target=target, out_idx=[-1], pass_configs=configs or None).device_mod


def run(device_mod, *arrays) -> dict[str, int]:
    """Runs the kernel on ``arrays`` (outputs included, written in place); returns how often
    each extern call ran (which instructions the lowered kernel actually used)."""
    kernel = lowered_kernel(device_mod)
    kernel(*arrays)
    return kernel.calls


def small_ints(rng, shape, dtype="float16") -> tuple[np.ndarray, np.ndarray]:
    """(the kernel's argument, its values in float64): integers in [-4, 4], so that every
    product and sum of the GEMMs here is exact in fp32. bfloat16 is passed as its bits."""
    values = rng.integers(-4, 5, shape).astype(np.float64)
    if dtype == "bfloat16":
        return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16), values
    return values.astype(dtype), values


GEMMS_SM80 = [  # M, N, K, block M, N, K, transpose A, B, stages, threads, dtype
    (128, 128, 64, 64, 64, 32, False, False, 2, 128, "float16"),  # 2 x 2 blocks, 2 x 4 pieces per warp
    (64, 64, 64, 64, 64, 32, True, False, 3, 128, "float16"),
    (64, 64, 32, 64, 64, 32, False, True, 1, 128, "float16"),  # no pipeline: synchronous copies
    (64, 128, 32, 64, 128, 32, True, True, 2, 256, "float16"),  # 8 warps
    (32, 64, 48, 32, 64, 16, False, False, 2, 64, "bfloat16"),  # 2 warps, 3 k tiles
]


@pytest.mark.parametrize("m,n,k,bm,bn,bk,trans_a,trans_b,stages,threads,dtype", GEMMS_SM80)
def test_mma_sync_gemm_as_lowered_equals_numpy(m, n, k, bm, bn, bk, trans_a, trans_b, stages, threads, dtype):
    rng = np.random.default_rng(m + n + k + threads)
    a, a_values = small_ints(rng, (k, m) if trans_a else (m, k), dtype)
    b, b_values = small_ints(rng, (n, k) if trans_b else (k, n), dtype)
    c = np.full((m, n), np.nan, np.float32)
    func = tile_gemm(m, n, k, bm, bn, bk, trans_a, trans_b, dtype=dtype, stages=stages, threads=threads)
    calls = run(lower(func, SM80), a, b, c)
    assert calls[f"tl_mma_m16n8k16_{'f16' if dtype == 'float16' else 'bf16'}_f32"] > 0
    expected = (a_values.T if trans_a else a_values) @ (b_values.T if trans_b else b_values)
    np.testing.assert_array_equal(c, expected)


GEMMS_SM90 = [  # M, N, K, block M, N, K, transpose A, B, stages, threads, pass configs
    (128, 64, 64, 128, 64, 32, False, False, 2, 128, {}),  # two 64-row wgmmas per warpgroup
    (64, 128, 64, 64, 128, 64, False, True, 3, 128, {}),  # one group left in flight
    (128, 128, 64, 128, 128, 32, True, False, 3, 256, {}),  # two warpgroups over M
    (64, 256, 64, 64, 256, 32, False, False, 2, 256, {}),  # two warpgroups over N
    (128, 64, 64, 128, 64, 32, True, True, 2, 128, {"tl.disable_wgmma_swizzle": True}),  # core matrices
]


@pytest.mark.parametrize("m,n,k,bm,bn,bk,trans_a,trans_b,stages,threads,configs", GEMMS_SM90)
def test_wgmma_gemm_as_lowered_equals_numpy(m, n, k, bm, bn, bk, trans_a, trans_b, stages, threads, configs):
    rng = np.random.default_rng(m * n + k + threads)
    a, a_values = small_ints(rng, (k, m) if trans_a else (m, k))
    b, b_values = small_ints(rng, (n, k) if trans_b else (k, n))
    c = np.full((m, n), np.nan, np.float32)
    func = tile_gemm(m, n, k, bm, bn, bk, trans_a, trans_b, stages=stages, threads=threads)
    calls = run(lower(func, SM90, **configs), a, b, c)
    assert any(name.startswith("tl_wgmma_m64n") for name in calls) and "tl_mma_m16n8k16_f16_f32" not in calls
    expected = (a_values.T if trans_a else a_values) @ (b_values.T if trans_b else b_values)
    np.testing.assert_array_equal(c, expected)


def gemm_a_in_registers(M, N, K, tiles):
    """A loaded once into a fragment (C's layout: its registers are mma's A operands),
    B streamed through a pipeline: C = A @ (B_0 + B_1 + ...)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((tiles * K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as _:
            Af = T.alloc_fragment((M, K), "float16")
            Bs = T.alloc_shared((K, N), "float16")
            Cl = T.alloc_fragment((M, N), "float32")
            T.copy(A, Af)
            T.clear(Cl)
            for k in T.Pipelined(tiles, num_stages=3):
                T.copy(B[k * K, 0], Bs)
                T.gemm(Af, Bs, Cl)
            T.copy(Cl, C)

    return main


@pytest.mark.parametrize("target", [SM80, SM90], ids=["sm_80", "sm_90"])
def test_mma_with_a_from_registers_as_lowered_equals_numpy(target):
    m, n, k, tiles = 64, 64, 64, 3
    rng = np.random.default_rng(5)
    (a, a_values), (b, b_values) = small_ints(rng, (m, k)), small_ints(rng, (tiles * k, n))
    c = np.full((m, n), np.nan, np.float32)
    calls = run(lower(gemm_a_in_registers(m, n, k, tiles), target), a, b, c)
    assert calls["tl_mma_m16n8k16_f16_f32"] > 0  # sm_90 too: wgmma takes register A in row families only
    np.testing.assert_array_equal(c, a_values @ b_values.reshape(tiles, k, n).sum(0))


def gemm_part_out(M, N, K, rows, cols):
    """C = A @ B on tensor cores, of which only C[rows, cols] goes to memory."""
    (r0, r1), (c0, c1) = rows, cols

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), O: T.Tensor((r1 - r0, c1 - c0), "float32")):
        with T.Kernel(1, threads=128) as _:
            As = T.alloc_shared((M, K), "float16")
            Bs = T.alloc_shared((K, N), "float16")
            C = T.alloc_fragment((M, N), "float32")
            T.copy(A, As)
            T.copy(B, Bs)
            T.gemm(As, Bs, C, clear_accum=True)
            T.copy(C[r0:r1, c0:c1], O)

    return main


@pytest.mark.parametrize("rows,cols", [((0, 4), (0, 64)), ((16, 48), (8, 40))], ids=["first-rows", "inner-box"])
@pytest.mark.parametrize("target", [SM80, SM90], ids=["sm_80", "sm_90"])
def test_a_copy_of_part_of_c_stays_on_tensor_cores(target, rows, cols):
    """T.copy(C[r0:r1, c0:c1], out): each thread writes the elements of the box it holds
    (a nest over C guarded to the box); before, the GEMM left tensor cores for it."""
    m = n = k = 64
    rng = np.random.default_rng(11)
    (a, a_values), (b, b_values) = small_ints(rng, (m, k)), small_ints(rng, (k, n))
    out = np.full((rows[1] - rows[0], cols[1] - cols[0]), np.nan, np.float32)
    calls = run(lower(gemm_part_out(m, n, k, rows, cols), target), a, b, out)
    assert calls["tl_mma_m16n8k16_f16_f32"] > 0  # one GEMM outside a pipeline: mma.sync on sm_90 too
    np.testing.assert_array_equal(out, (a_values @ b_values)[rows[0]:rows[1], cols[0]:cols[1]])


def gemm_cast_through_a_fragment(stages=2):
    """A pipelined GEMM whose C is cast into an fp16 fragment, which then goes to memory: a
    row family without row vectors."""

    @T.prim_func
    def main(A: T.Tensor((64, 128), "float16"), B: T.Tensor((128, 64), "float16"), C: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            a_s = T.alloc_shared((64, 32), "float16")
            b_s = T.alloc_shared((32, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            acc16 = T.alloc_fragment((64, 64), "float16")
            T.clear(acc)
            for ko in T.Pipelined(4, num_stages=stages):
                T.copy(A[:, ko * 32:(ko + 1) * 32], a_s)
                T.copy(B[ko * 32:(ko + 1) * 32, :], b_s)
                T.gemm(a_s, b_s, acc)
            T.copy(acc, acc16)
            T.copy(acc16, C)

    return main


@pytest.mark.parametrize("target", [SM80, SM90], ids=["sm_80", "sm_90"])
def test_c_cast_through_a_fragment_on_wgmma(target):
    """On wgmma the fp16 fragment takes C's layout too (it kept the mma.sync one, and the
    cast's stores stayed unmapped: TVM refused the kernel, "Buffer acc16 is used before its
    definition")."""
    rng = np.random.default_rng(9)
    (a, a64), (b, b64) = small_ints(rng, (64, 128)), small_ints(rng, (128, 64))
    c = np.full((64, 64), np.nan, np.float16)
    calls = run(lower(gemm_cast_through_a_fragment(), target), a, b, c)
    assert any(name.startswith("tl_wgmma" if target is SM90 else "tl_mma_m16n8k16") for name in calls)
    np.testing.assert_array_equal(c.astype(np.float64), a64 @ b64)


def gemm_row_stats(M, N, K, threads=128, start=0.5):
    """S = A @ B on tensor cores, then its row max and (onto ``start``) row sum: a row
    family, reduced by quad shuffles. Row vectors leave through an (M, 16) fragment:
    columns 0-7 the max, 8-15 the sum."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), O: T.Tensor((M, 16), "float32")):
        with T.Kernel(1, threads=threads) as _:
            As = T.alloc_shared((M, K), "float16")
            Bs = T.alloc_shared((K, N), "float16")
            S = T.alloc_fragment((M, N), "float32")
            R = T.alloc_fragment((M, 16), "float32")
            row_max = T.alloc_fragment((M,), "float32")
            row_sum = T.alloc_fragment((M,), "float32")
            T.copy(A, As)
            T.copy(B, Bs)
            T.clear(S)
            T.gemm(As, Bs, S)
            T.fill(row_sum, start)
            T.reduce_max(S, row_max, dim=1)
            T.reduce_sum(S, row_sum, dim=1, clear=False)
            for i, j in T.Parallel(M, 16):
                R[i, j] = T.if_then_else(j < 8, row_max[i], row_sum[i])
            T.copy(R, O)

    return main


def gemm_row_max_over_columns(M, N, K, cols):
    """The row max of S = A @ B (a row family), then a nest over (M, cols) that reads only
    the row vector, into shared memory, as upstream's GQA decoding writes its per-block
    maxima (``S_shared[h, k] = f(scores_max[h], ...)``)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), O: T.Tensor((M, cols), "float32")):
        with T.Kernel(1, threads=128) as _:
            As = T.alloc_shared((M, K), "float16")
            Bs = T.alloc_shared((K, N), "float16")
            Os = T.alloc_shared((M, cols), "float32")
            S = T.alloc_fragment((M, N), "float32")
            row_max = T.alloc_fragment((M,), "float32")
            T.copy(A, As)
            T.copy(B, Bs)
            T.clear(S)
            T.gemm(As, Bs, S)
            T.reduce_max(S, row_max, dim=1)
            for i, j in T.Parallel(M, cols):
                Os[i, j] = row_max[i] * (j + 1)
            T.copy(Os, O)

    return main


@pytest.mark.parametrize("target", [SM80, SM90], ids=["sm_80", "sm_90"])
def test_a_nest_over_rows_and_columns_of_a_row_vector_keeps_its_columns(target):
    """Each column of the nest is written (the column loop was dropped before, leaving its
    variable unbound: upstream's example_gqa_decode_varlen_logits failed to compile)."""
    m, n, k, cols = 64, 32, 16, 8
    rng = np.random.default_rng(2)
    (a, a_values), (b, b_values) = small_ints(rng, (m, k)), small_ints(rng, (k, n))
    out = np.full((m, cols), np.nan, np.float32)
    calls = run(lower(gemm_row_max_over_columns(m, n, k, cols), target), a, b, out)
    assert calls["__shfl_xor_sync"] > 0  # a row family
    np.testing.assert_array_equal(out, (a_values @ b_values).max(1)[:, None] * np.arange(1, cols + 1))


def row_stats(device_mod, m, n, k) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """(emulated output, numpy's, calls) of gemm_row_stats."""
    rng = np.random.default_rng(m + n + k)
    a, a_values = small_ints(rng, (m, k))
    b, b_values = small_ints(rng, (k, n))
    out = np.full((m, 16), np.nan, np.float32)
    calls = run(device_mod, a, b, out)
    s = a_values @ b_values
    return out, np.concatenate([np.repeat(s.max(1)[:, None], 8, 1), np.repeat(s.sum(1)[:, None] + 0.5, 8, 1)], 1), calls


@pytest.mark.parametrize("target,m,n,k,threads", [(SM80, 64, 32, 16, 128), (SM80, 128, 64, 32, 128),
                                                  (SM80, 64, 48, 32, 64), (SM90, 64, 32, 16, 128),
                                                  (SM90, 128, 64, 32, 256)])
def test_row_reductions_as_lowered_equal_numpy(target, m, n, k, threads):
    out, expected, calls = row_stats(lower(gemm_row_stats(m, n, k, threads), target), m, n, k)
    assert calls["__shfl_xor_sync"] > 0
    assert any(name.startswith(("tl_mma_m16n8k16", "tl_wgmma_m64n")) for name in calls)
    np.testing.assert_array_equal(out, expected)


def refilled_gemm(fill: float | None, clear_accum: bool = False):
    """C over 4 pipelined 32-deep k tiles, refilled before each tile's GEMM (``fill``:
    T.fill(C, fill) right before it; ``clear_accum``: the GEMM's own flag): C ends as the
    last tile's product plus ``fill`` (or that alone)."""

    @T.prim_func
    def main(A: T.Tensor((64, 128), "float16"), B: T.Tensor((128, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as _:
            As = T.alloc_shared((64, 32), "float16")
            Bs = T.alloc_shared((32, 64), "float16")
            Cl = T.alloc_fragment((64, 64), "float32")
            T.clear(Cl)
            for k in T.Pipelined(4, num_stages=2):
                T.copy(A[0, k * 32], As)
                T.copy(B[k * 32, 0], Bs)
                if fill is not None:
                    T.fill(Cl, fill)
                T.gemm(As, Bs, Cl, clear_accum=clear_accum)
            T.copy(Cl, C)

    return main


@pytest.mark.parametrize("fill,clear_accum,zero_form", [(0.0, False, True), (None, True, True), (1.0, False, False)])
def test_a_clear_before_a_wgmma_is_its_first_k_step(fill, clear_accum, zero_form):
    """T.clear(C) right before T.gemm(.., C), or clear_accum: the first k step's wgmma writes
    C (the "z" form, scale-d off) and no store zeroes C in the loop; a fill with another
    value stays a fill. Exact against numpy (small integers)."""
    rng = np.random.default_rng(3)
    a, a_values = small_ints(rng, (64, 128))
    b, b_values = small_ints(rng, (128, 64))
    out = np.full((64, 64), np.nan, np.float32)
    calls = run(lower(refilled_gemm(fill, clear_accum), SM90), a, b, out)
    assert ("tl_wgmma_m64n64k16_f16_01z" in calls) == zero_form
    expected = a_values[:, 96:] @ b_values[96:, :] + (fill or 0.0)
    np.testing.assert_array_equal(out, expected)


FLASH_KERNELS = {
    "tile": (1, lambda b, h, s, d: flash_attention(b, h, s, d)),
    # 8 warps over 64 query rows: the row family splits the columns too (row_exchange)
    "split-columns": (1, lambda b, h, s, d: flash_attention(b, h, s, d, 64, 64, 256)),
    # 8 tiles over 3 blocks: three waves, the last one partial
    "persistent": (2, lambda b, h, s, d: flash_attention_persistent(b, h, s, d, 64, 64, 128, 2, sm_num=3)),
}


@pytest.mark.parametrize("seq", [128, 96], ids=["whole", "partial"])
@pytest.mark.parametrize("kernel", sorted(FLASH_KERNELS))
@pytest.mark.parametrize("target", [SM80, SM90], ids=["sm_80", "sm_90"])
def test_flash_attention_as_lowered_matches_numpy(target, kernel, seq):
    """The testing kit's flash attention (online softmax over two key blocks, P from the
    accumulator's registers), one block per tile or persistent: fp16 in and out, compared
    within 2e-3 (outputs are O(0.1), fp16 keeps 11 bits). With 96 tokens the second key
    block holds 32 keys: its other scores must be masked (-inf), not the zeros TMA and the
    guarded loads give (they would add exp(-max) to each row's sum: errors of 0.14)."""
    batch, build = FLASH_KERNELS[kernel]
    heads, dim = batch, 64
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((batch, seq, heads, dim)).astype(np.float16) for _ in range(3))
    out = np.full((batch, seq, heads, dim), np.nan, np.float16)
    calls = run(lower(build(batch, heads, seq, dim), target), q, k, v, out)
    assert calls["__shfl_xor_sync"] > 0
    qf, kf, vf = (x.astype(np.float64).transpose(0, 2, 1, 3) for x in (q, k, v))
    scores = qf @ kf.transpose(0, 1, 3, 2) / np.sqrt(dim)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    expected = ((p / p.sum(-1, keepdims=True)) @ vf).transpose(0, 2, 1, 3)
    np.testing.assert_allclose(out.astype(np.float64), expected, atol=2e-3, rtol=0)


def mla_reference(q, q_pe, kv, k_pe):
    qf = np.concatenate([q, q_pe], -1).astype(np.float64)
    kf = np.concatenate([kv[:, :, 0], k_pe[:, :, 0]], -1).astype(np.float64)
    scores = qf @ kf.transpose(0, 2, 1) / np.sqrt(qf.shape[-1])
    p = np.exp(scores - scores.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ kv[:, :, 0].astype(np.float64)


@pytest.mark.parametrize("threads,p_via_shared", [(256, True), (128, True), (256, False)],
                         ids=["8-warps-split-columns", "4-warps", "8-warps-P-from-the-scores"])
@pytest.mark.parametrize("target", [SM80, SM90], ids=["sm_80", "sm_90"])
def test_mla_decode_row_family_split_over_columns_matches_numpy(target, threads, p_via_shared):
    """Upstream's MLA decode: 64 heads over 8 warps (FullCol) leave 16-row pieces to 4 warps,
    so each row of S is split over 2 warps; its max and sum meet in shared memory
    (row_exchange) and P, copied to a fragment through S_shared, is read from a shared
    tile (also when P is a copy of the scores' fragment, as the families benchmark writes
    it); on sm_90 two warpgroups side by side, each a wgmma over all 64 rows. With 4 warps
    each warp holds whole rows: the plain row family. mma.sync on sm_80, wgmma on sm_90,
    within fp16's rounding of P (2e-3, outputs are O(0.1))."""
    batch, heads, seq, dim, pe_dim = 1, 64, 128, 128, 64
    rng = np.random.default_rng(5)
    q, q_pe = (rng.standard_normal((batch, heads, d)).astype(np.float16) for d in (dim, pe_dim))
    kv, k_pe = (rng.standard_normal((batch, seq, 1, d)).astype(np.float16) for d in (dim, pe_dim))
    out = np.full((batch, heads, dim), np.nan, np.float16)
    device_mod = lower(mla_decode(batch, heads, seq, dim, pe_dim, threads=threads, p_via_shared=p_via_shared), target)
    calls = run(device_mod, q, q_pe, kv, k_pe, out)
    assert any(name.startswith("tl_wgmma" if target is SM90 else "tl_mma_m16n8k16") for name in calls)
    assert calls["__shfl_xor_sync"] > 0
    assert ("row_exchange" in str(device_mod)) == (threads == 256)
    np.testing.assert_allclose(out.astype(np.float64), mla_reference(q, q_pe, kv, k_pe), atol=2e-3, rtol=0)


def test_split_family_exchange_keeps_the_dynamic_tiles_aligned():
    """The exchange tile is static shared memory; CUDA puts the dynamic buffer (wgmma's
    swizzled tiles, which need 1 KiB alignment) after it, so it is padded to 1 KiB. With
    512 bytes every split wgmma kernel was wrong on the H200 (the emulator does not model
    the swizzle's alignment)."""
    import re

    source = tilelang.lower(mla_decode(1, 64, 128, 128, 64), target=SM90, out_idx=[-1]).device_source
    assert "tl_wgmma_m64" in source
    sizes = {"float": 4, "half_t": 2, "uint64_t": 8}
    static = [(m.group(1), int(m.group(2))) for m in re.finditer(r"__shared__ [^;]*?(\w+) \w+\[(\d+)\];", source)]
    assert any("row_exchange" in line for line in source.splitlines() if "__shared__" in line)
    assert sum(sizes[t] * n for t, n in static) % 1024 == 0, static


def sparse_mla_like(seq_kv=256, H=64, D=128, D_tail=64, topk=128, BI=64, threads=256):
    """Upstream's sparse MLA forward (examples/deepseek_v32/sparse_mla_fwd.py) in small: keys
    gathered by index into shared tiles, a mask over the key block's columns (a 1-d
    fragment read at the column: a shared vector), 8 warps over 64 heads."""
    NI = topk // BI
    scale = (D + D_tail) ** -0.5 * 1.44269504
    dtype, accum = "float16", "float32"
    @T.prim_func
    def main(Q: T.Tensor([H, D + D_tail], dtype), KV: T.Tensor([seq_kv, D + D_tail], dtype),
             Indices: T.Tensor([topk], "int32"), Limit: T.Tensor([1], "int32"), Output: T.Tensor([H, D], dtype)):
        with T.Kernel(1, threads=threads):
            Q_shared = T.alloc_shared([H, D + D_tail], dtype)
            KV_shared = T.alloc_shared([BI, D], dtype)
            K_tail_shared = T.alloc_shared([BI, D_tail], dtype)
            S_shared = T.alloc_shared([H, BI], dtype)
            mask = T.alloc_fragment([BI], "bool")
            acc_o = T.alloc_fragment([H, D], accum)
            acc_s = T.alloc_fragment([H, BI], accum)
            sumexp = T.alloc_fragment([H], accum)
            sumexp_i = T.alloc_fragment([H], accum)
            alpha = T.alloc_fragment([H], accum)
            m_i = T.alloc_fragment([H], accum)
            m_i_prev = T.alloc_fragment([H], accum)
            T.fill(acc_o, 0)
            T.fill(sumexp, 0)
            T.fill(m_i, -(2**30))
            T.copy(Q[:, :D], Q_shared[:, :D])
            T.copy(Q[:, D:], Q_shared[:, D:])
            for i_i in T.Pipelined(NI, num_stages=2):
                for bi_i in T.Parallel(BI):
                    mask[bi_i] = Indices[i_i * BI + bi_i] <= Limit[0]
                for bi_i, d_i in T.Parallel(BI, D):
                    KV_shared[bi_i, d_i] = KV[Indices[i_i * BI + bi_i], d_i]
                for bi_i, d_i in T.Parallel(BI, D_tail):
                    K_tail_shared[bi_i, d_i] = KV[Indices[i_i * BI + bi_i], D + d_i]
                for h_i, bi_i in T.Parallel(H, BI):
                    acc_s[h_i, bi_i] = T.if_then_else(mask[bi_i], 0, -T.infinity(accum))
                T.gemm(Q_shared[:, :D], KV_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.gemm(Q_shared[:, D:], K_tail_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m_i, m_i_prev)
                T.reduce_max(acc_s, m_i, dim=1, clear=False)
                for h_i in T.Parallel(H):
                    m_i[h_i] = T.max(m_i[h_i], m_i_prev[h_i])
                for h_i in T.Parallel(H):
                    alpha[h_i] = T.exp2((m_i_prev[h_i] - m_i[h_i]) * scale)
                for h_i, bi_i in T.Parallel(H, BI):
                    acc_s[h_i, bi_i] = T.exp2(acc_s[h_i, bi_i] * scale - m_i[h_i] * scale)
                T.reduce_sum(acc_s, sumexp_i, dim=1)
                for h_i in T.Parallel(H):
                    sumexp[h_i] = sumexp[h_i] * alpha[h_i] + sumexp_i[h_i]
                for h_i, d_i in T.Parallel(H, D):
                    acc_o[h_i, d_i] = acc_o[h_i, d_i] * alpha[h_i]
                T.copy(acc_s, S_shared)
                T.gemm(S_shared, KV_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for h_i, d_i in T.Parallel(H, D):
                acc_o[h_i, d_i] /= sumexp[h_i]
            T.copy(acc_o, Output)
    return main


@pytest.mark.parametrize("target", [SM80, SM90], ids=["sm_80", "sm_90"])
def test_sparse_mla_with_a_column_mask_matches_numpy(target):
    """The mask fragment over key columns goes to shared memory, and the rest is a row family
    split over columns (row_exchange) on tensor cores; masked keys drop out exactly."""
    seq_kv, heads, dim, tail, topk = 256, 64, 128, 64, 128
    rng = np.random.default_rng(1)
    q = rng.standard_normal((heads, dim + tail)).astype(np.float16)
    kv = rng.standard_normal((seq_kv, dim + tail)).astype(np.float16)
    indices = rng.permutation(seq_kv)[:topk].astype(np.int32)
    limit = np.array([170], np.int32)
    out = np.full((heads, dim), np.nan, np.float16)
    device_mod = lower(sparse_mla_like(seq_kv, heads, dim, tail, topk), target)
    calls = run(device_mod, q, kv, indices, limit, out)
    assert calls["tl_mma_m16n8k16_f16_f32"] > 0 and "row_exchange" in str(device_mod)
    keys = kv[indices].astype(np.float64)
    scores = np.where(indices[None, :] <= limit[0], q.astype(np.float64) @ keys.T / np.sqrt(dim + tail), -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    expected = (p / p.sum(-1, keepdims=True)) @ keys[:, :dim]
    np.testing.assert_allclose(out.astype(np.float64), expected, atol=2e-3, rtol=0)


def gqa_decode_split(batch, heads, groups, seq_kv, dim, block_n=64, block_h=64, num_split=2, threads=128):
    """Upstream's split-KV GQA decoding (examples/flash_decoding/example_gqa_decode.py) in
    small: one function, two kernels sharing T.alloc_global workspaces (a split kernel whose
    64-row C holds the few heads of one KV head and copies back only those rows, then a
    combine kernel over the splits), and a key mask read at the columns."""
    scale = dim ** -0.5 * 1.44269504
    per_kv = heads // groups
    valid_h = min(block_h, per_kv)
    part = seq_kv // num_split
    dtype, accum = "float16", "float32"

    @T.prim_func
    def main(Q: T.Tensor([batch, heads, dim], dtype), K: T.Tensor([batch, seq_kv, groups, dim], dtype),
             V: T.Tensor([batch, seq_kv, groups, dim], dtype), mask: T.Tensor([batch, seq_kv, groups], "uint8"),
             Output: T.Tensor([batch, heads, dim], dtype)):
        glse = T.alloc_global([batch, heads, num_split], accum)
        partial = T.alloc_global([batch, heads, num_split, dim], accum)
        with T.Kernel(batch, heads // valid_h, num_split, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_h, dim], dtype)
            K_shared = T.alloc_shared([block_n, dim], dtype)
            V_shared = T.alloc_shared([block_n, dim], dtype)
            O_shared = T.alloc_shared([valid_h, dim], accum)
            acc_s = T.alloc_fragment([block_h, block_n], accum)
            acc_s_cast = T.alloc_fragment([block_h, block_n], dtype)
            mask_local = T.alloc_fragment([block_n], "uint8")
            acc_o = T.alloc_fragment([block_h, dim], accum)
            m_i = T.alloc_fragment([block_h], accum)
            m_prev = T.alloc_fragment([block_h], accum)
            alpha = T.alloc_fragment([block_h], accum)
            row_sum = T.alloc_fragment([block_h], accum)
            logsum = T.alloc_fragment([block_h], accum)
            kv_head = by // (per_kv // valid_h)
            T.copy(Q[bx, by * valid_h:by * valid_h + block_h, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(m_i, -T.infinity(accum))
            for k in T.Pipelined(part // block_n, num_stages=2):
                T.copy(K[bx, part * bz + k * block_n:part * bz + (k + 1) * block_n, kv_head, :], K_shared)
                T.copy(mask[bx, part * bz + k * block_n:part * bz + (k + 1) * block_n, kv_head], mask_local)
                T.clear(acc_s)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_h, block_n):
                    acc_s[i, j] = T.if_then_else(mask_local[j] != 0, acc_s[i, j], -T.infinity(accum))
                T.copy(m_i, m_prev)
                T.reduce_max(acc_s, m_i, dim=1, clear=False)
                for i in T.Parallel(block_h):
                    m_i[i] = T.max(m_i[i], m_prev[i])
                for i in T.Parallel(block_h):
                    alpha[i] = T.exp2(m_prev[i] * scale - m_i[i] * scale)
                for i, j in T.Parallel(block_h, block_n):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m_i[i] * scale)
                T.reduce_sum(acc_s, row_sum, dim=1)
                for i in T.Parallel(block_h):
                    logsum[i] = logsum[i] * alpha[i] + row_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_h, dim):
                    acc_o[i, j] *= alpha[i]
                T.copy(V[bx, part * bz + k * block_n:part * bz + (k + 1) * block_n, kv_head, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_h, dim):
                acc_o[i, j] /= logsum[i]
            for i in T.Parallel(block_h):
                logsum[i] = T.log2(logsum[i]) + m_i[i] * scale
            for i in T.Parallel(block_h):
                if i < valid_h:
                    glse[bx, by * valid_h + i, bz] = logsum[i]
            T.copy(acc_o[:valid_h, :], O_shared)
            T.copy(O_shared, partial[bx, by * valid_h:(by + 1) * valid_h, bz, :])
        with T.Kernel(heads, batch, threads=threads) as (h, b):
            lse_max = T.alloc_var(accum, init=-T.infinity(accum))
            lse_sum = T.alloc_var(accum, init=0)
            out = T.alloc_fragment([dim], accum)
            for s in T.serial(num_split):
                lse_max = T.max(lse_max, glse[b, h, s])
            for s in T.serial(num_split):
                lse_sum += T.exp2(glse[b, h, s] - lse_max)
            T.clear(out)
            for s in T.serial(num_split):
                for d in T.Parallel(dim):
                    out[d] += partial[b, h, s, d] * T.exp2(glse[b, h, s] - lse_max) / lse_sum
            for d in T.Parallel(dim):
                Output[b, h, d] = out[d]

    return main


@pytest.mark.parametrize("target", [SM80, SM90], ids=["sm_80", "sm_90"])
def test_split_kv_gqa_decode_with_two_kernels_matches_numpy(target):
    """Each kernel of a function that launches two gets the tensor-core pass (before, a
    second kernel left both on the shared SIMT lowering: upstream's example ran 12x slower
    than torch); the split kernel's C is 64 rows, of which it copies 4 back (a guarded
    nest over C). Both kernels run in the emulator, the workspaces in between, against
    numpy within fp16's rounding of P (2e-3)."""
    batch, heads, groups, seq_kv, dim, num_split = 1, 8, 2, 256, 64, 2
    rng = np.random.default_rng(3)
    q = rng.standard_normal((batch, heads, dim)).astype(np.float16)
    k, v = (rng.standard_normal((batch, seq_kv, groups, dim)).astype(np.float16) for _ in range(2))
    mask = (rng.random((batch, seq_kv, groups)) < 0.7).astype(np.uint8)
    out = np.full((batch, heads, dim), np.nan, np.float16)
    device_mod = lower(gqa_decode_split(batch, heads, groups, seq_kv, dim, num_split=num_split), target)
    workspaces = {"glse": np.full((batch, heads, num_split), np.nan, np.float32),
                  "partial": np.full((batch, heads, num_split, dim), np.nan, np.float32)}
    split = lowered_kernel(device_mod, 0)
    split(q, k, v, mask, out, workspaces=workspaces)
    assert any(name.startswith("tl_wgmma" if target is SM90 else "tl_mma_m16n8k16") for name in split.calls)
    lowered_kernel(device_mod, 1)(q, k, v, mask, out, workspaces=workspaces)
    per_kv = heads // groups
    kf = np.repeat(k.astype(np.float64), per_kv, axis=2).transpose(0, 2, 1, 3)  # (b, heads, seq, dim)
    vf = np.repeat(v.astype(np.float64), per_kv, axis=2).transpose(0, 2, 1, 3)
    keep = np.repeat(mask, per_kv, axis=2).transpose(0, 2, 1)[:, :, None, :] != 0
    scores = np.where(keep, q.astype(np.float64)[:, :, None, :] @ kf.transpose(0, 1, 3, 2) / np.sqrt(dim), -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    expected = ((p / p.sum(-1, keepdims=True)) @ vf)[:, :, 0, :]
    np.testing.assert_allclose(out.astype(np.float64), expected, atol=2e-3, rtol=0)


def attention_backward_dv_dq(seq=64, dim=64, block_m=64, block_n=32):
    """Upstream's flash-attention backward (examples/flash_attention/example_gqa_bwd.py) in
    small: per key block, P^T = exp2(K q^T * scale - lse) over query blocks of ``block_n``,
    dV += P^T dO (P^T from registers: a row family over the keys), and dQ += P K through
    shared memory into a (block_n, dim) accumulator of another M, added to memory atomically."""
    scale = dim ** -0.5 * 1.44269504

    @T.prim_func
    def main(Q: T.Tensor((seq, dim), "float16"), K: T.Tensor((seq, dim), "float16"),
             dO: T.Tensor((seq, dim), "float16"), lse: T.Tensor((seq,), "float32"),
             dQ: T.Tensor((seq, dim), "float32"), dV: T.Tensor((seq, dim), "float32")):
        with T.Kernel(seq // block_m, threads=128) as bx:
            K_shared = T.alloc_shared((block_m, dim), "float16")
            q = T.alloc_shared((block_n, dim), "float16")
            do = T.alloc_shared((block_n, dim), "float16")
            lse_shared = T.alloc_shared((block_n,), "float32")
            p_shared = T.alloc_shared((block_m, block_n), "float16")
            pT = T.alloc_fragment((block_m, block_n), "float32")
            pT_cast = T.alloc_fragment((block_m, block_n), "float16")
            dv = T.alloc_fragment((block_m, dim), "float32")
            dq = T.alloc_fragment((block_n, dim), "float32")
            T.copy(K[bx * block_m:(bx + 1) * block_m, :], K_shared)
            T.clear(dv)
            for k in T.Pipelined(seq // block_n, num_stages=2):
                T.copy(Q[k * block_n:(k + 1) * block_n, :], q)
                T.copy(dO[k * block_n:(k + 1) * block_n, :], do)
                T.copy(lse[k * block_n:(k + 1) * block_n], lse_shared)
                T.clear(pT)
                T.gemm(K_shared, q, pT, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_m, block_n):
                    pT[i, j] = T.exp2(pT[i, j] * scale - lse_shared[j])
                T.copy(pT, pT_cast)
                T.gemm(pT_cast, do, dv, policy=T.GemmWarpPolicy.FullRow)
                T.copy(pT_cast, p_shared)
                T.clear(dq)
                T.gemm(p_shared, K_shared, dq, transpose_A=True)
                for i, j in T.Parallel(block_n, dim):
                    T.atomic_add(dQ[k * block_n + i, j], dq[i, j])
            T.copy(dv, dV[bx * block_m:(bx + 1) * block_m, :])

    return main


@pytest.mark.parametrize("target", [SM80, SM90], ids=["sm_80", "sm_90"])
def test_an_accumulator_of_another_m_beside_a_row_family_stays_on_tensor_cores(target):
    """dQ's accumulator has block_n rows, the family's block_m: it keeps a layout of its own
    and the family takes the rest (all of it took the shared SIMT lowering before: upstream's
    gqa backward ran at 0.02x torch on the H200). dV and dQ against numpy within fp16's
    rounding of P (outputs are O(1))."""
    seq, dim = 64, 64
    rng = np.random.default_rng(4)
    q, k, do = (rng.standard_normal((seq, dim)).astype(np.float16) for _ in range(3))
    s = q.astype(np.float64) @ k.astype(np.float64).T / np.sqrt(dim)
    lse = (np.log(np.exp(s - s.max(-1, keepdims=True)).sum(-1)) + s.max(-1)) * 1.44269504
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    dq, dv = np.zeros((seq, dim), np.float32), np.full((seq, dim), np.nan, np.float32)
    calls = run(lower(attention_backward_dv_dq(seq, dim), target), q, k, do, lse.astype(np.float32), dq, dv)
    # all three GEMMs on tensor cores, 32 mma calls each (32 in all before: dQ's alone)
    assert calls["tl_mma_m16n8k16_f16_f32"] == 96 and calls["atomicAdd"] > 0
    np.testing.assert_allclose(dv, p.T @ do.astype(np.float64), atol=2e-2, rtol=0)
    np.testing.assert_allclose(dq, p @ k.astype(np.float64), atol=2e-2, rtol=0)


# -- the emulator reads what the IR says --------------------------------------------------
def mutated(device_mod, name: str, change) -> object:
    """``device_mod`` with every ``call_extern(name, ...)`` replaced by ``change(call)``."""

    def on_call(call):
        if str(call.op.name) == "tirx.call_extern" and str(call.args[0].value) == name:
            return change(call)
        return call

    (gv, func), = device_mod.functions.items()
    mod = device_mod.clone()
    mod.update_func(gv, func.with_body(tvm_ffi.structural_map(func.body, (tvm.ir.Call, on_call), order="post")))
    return mod


def with_args(call, **replace):
    args = list(call.args)
    for index, value in replace.items():
        args[int(index[1:])] = value
    return tirx.call_extern(call.dtype, *args)


def test_the_emulator_reads_the_accumulator_pointers_of_the_ir():
    """Each mma.sync's C pointer moved to the next 16x8 piece (what a wrong offset in the
    pass would emit): the product lands in the wrong columns."""
    m = n = 64
    mod = lower(tile_gemm(m, n, 32, 64, 64, 32, stages=1), SM80)
    rng = np.random.default_rng(1)
    (a, a_values), (b, b_values) = small_ints(rng, (m, 32)), small_ints(rng, (32, n))

    def next_piece(call):
        load = call.args[1].args[0]
        index = tirx.floormod(load.indices[0] + 4, int(load.source.shape[0]))
        return with_args(call, a1=tirx.address_of(tirx.BufferLoad(load.source, [index])))

    for device_mod, equal in ((mod, True), (mutated(mod, "tl_mma_m16n8k16_f16_f32", next_piece), False)):
        c = np.full((m, n), np.nan, np.float32)
        run(device_mod, a, b, c)
        assert np.array_equal(c, a_values @ b_values) == equal

    def past_the_end(call):
        load = call.args[1].args[0]
        return with_args(call, a1=tirx.address_of(tirx.BufferLoad(load.source, [load.indices[0] + 32])))

    with pytest.raises(EmulationError, match=r"accesses bytes \d+\.\.\d+ of Cl \(128 bytes\)"):
        run(mutated(mod, "tl_mma_m16n8k16_f16_f32", past_the_end), a, b, np.zeros((m, n), np.float32))


def test_the_emulator_reads_the_shuffle_operands_of_the_ir():
    """The row reductions' shuffles with other lane offsets or a narrower width give other
    rows' values; a member mask without all the lanes that shuffle is an error."""
    mod = lower(gemm_row_stats(64, 32, 16), SM80)
    out, expected, _ = row_stats(mod, 64, 32, 16)
    np.testing.assert_array_equal(out, expected)
    for device_mod in (mutated(mod, "__shfl_xor_sync", lambda call: with_args(call, a3=call.args[3] * 2)),
                       mutated(mod, "__shfl_xor_sync", lambda call: with_args(call, a4=tirx.const(2, "int32")))):
        out, expected, _ = row_stats(device_mod, 64, 32, 16)
        assert not np.array_equal(out, expected)
    half = mutated(mod, "__shfl_xor_sync", lambda call: with_args(call, a1=tirx.const(0xFFFF, "uint32")))
    with pytest.raises(EmulationError, match="runs the shuffle outside its member mask"):
        row_stats(half, 64, 32, 16)


@pytest.mark.parametrize("op", ["clear", "copy"])
def test_a_local_buffer_is_filled_and_copied_whole_by_every_thread(op):
    """T.alloc_local is each thread's own: T.clear / T.fill / T.copy of one run over all of
    it in every thread (they were dealt out over the block's threads like a shared tile's,
    so each thread cleared one element of its own 8 and summed onto garbage)."""

    @T.prim_func
    def per_thread(A: T.Tensor((128, 8), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            acc = T.alloc_local((8,), "float32")
            init = T.alloc_local((8,), "float32")
            if op == "clear":
                T.clear(acc)
            else:
                for i in T.serial(8):
                    init[i] = 0.5
                T.copy(init, acc)
            for i in T.serial(8):
                acc[i] += A[tx, i]
            total = T.alloc_var("float32")
            total = 0.0
            for i in T.serial(8):
                total += acc[i]
            B[tx] = total

    a = np.random.default_rng(0).integers(-4, 5, (128, 8)).astype(np.float32)
    b = np.zeros(128, np.float32)
    run(lower(per_thread, SM80), a, b)
    np.testing.assert_array_equal(b, a.sum(axis=1) + (4.0 if op == "copy" else 0.0))


def scalar_fragment_kernel():
    """upstream's mHC pre kernel's norm: a one-element fragment every thread updates in
    the block's scalar code (``rms[0] = T.rsqrt(rms[0] / n + eps)``)."""

    @T.prim_func
    def rms_scale(S: T.Tensor((4,), "float32"), X: T.Tensor((4, 96), "float32"), Y: T.Tensor((4, 96), "float32")):
        with T.Kernel(4, threads=96) as bx:
            rms = T.alloc_fragment(1, "float32")
            rms[0] = 0.0
            for i in T.serial(2):
                rms[0] += S[bx] * 0.5
            rms[0] = T.rsqrt(rms[0] / 96.0 + 1e-6)
            for j in T.Parallel(96):
                Y[bx, j] = X[bx, j] * rms[0]

    return rms_scale


def test_a_fragment_every_thread_updates_in_scalar_code_is_each_threads_own():
    """In shared memory the read-modify-write of one element by 96 threads raced: a warp
    could read rms[0] after another warp had stored its rsqrt (wrong values in some rows,
    different from run to run). Upstream keeps such a fragment as every thread's registers."""
    artifact = tilelang.lower(scalar_fragment_kernel(), target=SM80)
    assert "float rms_ptr[1]" in artifact.device_source  # a register array of each thread
    rng = np.random.default_rng(0)
    s = rng.uniform(1, 4, 4).astype(np.float32)
    x = rng.standard_normal((4, 96)).astype(np.float32)
    y = np.zeros((4, 96), np.float32)
    run(artifact.device_mod, s, x, y)
    np.testing.assert_allclose(y, x / np.sqrt(s / 96.0 + 1e-6)[:, None], rtol=1e-5)


@pytest.mark.gpu
def test_a_scalar_fragment_on_the_gpu():
    import torch  # the gpu marker skips the test where torch sees no CUDA GPU

    kernel = tilelang.compile(scalar_fragment_kernel())
    s = torch.rand(4, device="cuda") * 3 + 1
    x = torch.randn(4, 96, device="cuda")
    for _ in range(50):
        y = torch.zeros(4, 96, device="cuda")
        kernel(s, x, y)
        torch.testing.assert_close(y, x / torch.sqrt(s / 96.0 + 1e-6)[:, None])
