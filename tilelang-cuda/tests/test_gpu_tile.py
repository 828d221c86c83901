"""Tile operations on a real GPU (marked `gpu`): GEMM (upstream-style, with transposes and
edge tiles), reductions and flash-attention forward against torch."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import tilelang
from tilelang.testing.kernels import (
    flash_attention,
    flash_attention_persistent,
    split_k_gemm,
)

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NO_WGMMA = {"tl.disable_wgmma": True}


def assert_within_tf32(c, a, b) -> None:
    """C = A B within TF32's bound: each operand rounded or truncated to 10 mantissa bits
    (relative error under 2^-10 each, 2^-9 a product), plus float32's sums."""
    exact = a.double() @ b.double()
    bound = 2.0 ** -9 * (a.double().abs() @ b.double().abs()) + 1e-5
    excess = ((c.double() - exact).abs() - bound).max().item()
    assert excess <= 0, f"off TF32's bound by {excess}"


def _instructions(source: str) -> str:
    return "wgmma" if "tl_wgmma_m64n" in source else "mma" if "tl_mma_m16n8k16" in source else "simt"
TESTS = Path(__file__).resolve().parents[2] / "tilelang-core" / "tests"


def _import(directory: Path, name: str):
    sys.path.insert(0, str(directory))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(directory))


@pytest.mark.parametrize("backend", ["tvm_ffi", "nvrtc"])
@pytest.mark.parametrize("mnk,tile", [((256, 256, 128), (128, 128, 32)), ((200, 130, 70), (64, 64, 32))])
def test_upstream_gemm(backend, mnk, tile):
    gemm = _import(EXAMPLES, "gemm")
    kernel = tilelang.compile(gemm.matmul.builder(*mnk, *tile), out_idx=[-1], target="cuda",
                              execution_backend=backend)
    M, N, K = mnk
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(kernel(a, b).float(), (a.float() @ b.float()), rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize("trans_a,trans_b", [(False, True), (True, False), (True, True)])
def test_gemm_transposes(trans_a, trans_b):
    tile_ops = _import(TESTS, "test_tile_ops")
    M, N, K = 70, 45, 33
    kernel = tilelang.compile(tile_ops.tiled_gemm(M, N, K, trans_a, trans_b), out_idx=[-1], target="cuda")
    a = torch.randn(*((K, M) if trans_a else (M, K)), device="cuda")
    b = torch.randn(*((N, K) if trans_b else (K, N)), device="cuda")
    # (float32 operands take TF32 tensor cores, as upstream's)
    assert_within_tf32(kernel(a, b), a.T if trans_a else a, b.T if trans_b else b)


@pytest.mark.parametrize("kind", ["max", "min", "sum", "abssum", "absmax"])
def test_reductions(kind):
    tile_ops = _import(TESTS, "test_tile_ops")
    kernel = tilelang.compile(tile_ops.reductions(12, 20, kind, 1, True), out_idx=[-1], target="cuda")
    x = torch.randn(12, 20, device="cuda")
    expected = {"max": x.amax(1), "min": x.amin(1), "sum": x.sum(1), "abssum": x.abs().sum(1),
                "absmax": x.abs().amax(1)}[kind]
    torch.testing.assert_close(kernel(x), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("blk_m", [1, 4])
def test_rms_norm_rows_including_one_row_blocks(blk_m):
    from tilelang.testing.kernels import rms_norm_rows

    kernel = tilelang.compile(rms_norm_rows(256, 512, blk_m), out_idx=[-1], target="cuda")
    x = torch.randn(256, 512, device="cuda")
    expected = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-12)
    torch.testing.assert_close(kernel(x), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("wgmma", [True, False], ids=["wgmma", "mma.sync"])
@pytest.mark.parametrize("shape,tiles", [((1, 2, 128, 64), (64, 64, 128)), ((2, 4, 256, 64), (64, 64, 128, 1)),
                                         ((1, 2, 256, 128), (128, 64, 256)), ((1, 1, 192, 64), (64, 32, 128)),
                                         ((1, 2, 256, 64), (128, 64, 128)), ((1, 2, 192, 64), (64, 64, 256))])
def test_flash_attention_matches_sdpa(shape, tiles, wgmma):
    """Both GEMMs on tensor cores (row family): S and P in registers, the row max/sum by
    quad shuffles, P the second GEMM's A operand — on wgmma where each warp holds 16 rows
    (sm_90), else and with tl.disable_wgmma on mma.sync. 8 warps over 64 rows split the
    columns too: the row max and sum meet in shared memory, P goes through a shared tile,
    and each warpgroup's wgmma covers the 64 rows."""
    batch, heads, seq_len, dim = shape
    kernel = tilelang.compile(flash_attention(batch, heads, seq_len, dim, *tiles), out_idx=[3], target="cuda",
                              pass_configs=None if wgmma else NO_WGMMA)
    rows_per_warp = tiles[0] // (tiles[2] // 32)
    split_columns = rows_per_warp < 16 and tiles[0] % 64 == 0
    expected = "wgmma" if wgmma and (rows_per_warp == 16 or split_columns) else "mma"
    assert _instructions(kernel.get_kernel_source()) == expected
    q, k, v = (torch.randn(batch, seq_len, heads, dim, device="cuda", dtype=torch.float16) for _ in range(3))
    out = kernel(q, k, v)
    ref = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)
    torch.testing.assert_close(out, ref, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("threads,p_via_shared", [(256, True), (128, True), (256, False)])
def test_mla_decode_matches_torch(threads, p_via_shared):
    """Upstream's MLA decode kernel (testing kit's mla_decode): with 8 warps over 64 heads
    the row family splits columns too (row_families' exchange), on wgmma; with 4 warps each
    holds whole rows, on mma.sync (a 512-column accumulator is wider than one wgmma)."""
    from tilelang.testing.kernels import mla_decode

    batch, heads, seq, dim, pe_dim = 4, 128, 1024, 512, 64
    kernel = tilelang.compile(mla_decode(batch, heads, seq, dim, pe_dim, threads=threads, p_via_shared=p_via_shared),
                              out_idx=[4], target="cuda")
    assert _instructions(kernel.get_kernel_source()) == ("wgmma" if threads == 256 else "mma")
    q = torch.randn(batch, heads, dim, device="cuda", dtype=torch.float16)
    q_pe = torch.randn(batch, heads, pe_dim, device="cuda", dtype=torch.float16)
    kv = torch.randn(batch, seq, 1, dim, device="cuda", dtype=torch.float16)
    k_pe = torch.randn(batch, seq, 1, pe_dim, device="cuda", dtype=torch.float16)
    out = kernel(q, q_pe, kv, k_pe)
    keys = torch.cat([kv, k_pe], -1)[:, :, 0].float()
    scores = torch.cat([q, q_pe], -1).float() @ keys.transpose(1, 2) / (dim + pe_dim) ** 0.5
    ref = torch.softmax(scores, -1) @ kv[:, :, 0].float()
    torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=2e-2)


# a persistent kernel's default is FlashAttention-3's schedule (the overlap, "pair" turns); this is the loop as written
AS_WRITTEN = {"tl.intra_warpgroup_overlap": False, "tl.warpgroup_pingpong": "off"}


@pytest.mark.parametrize("sm_num", [3, 132], ids=["waves", "idle-blocks"])
@pytest.mark.parametrize("dim,stages,configs", [(64, 2, None), (128, 2, None), (128, 3, None),
                                                (128, 2, AS_WRITTEN), (128, 3, AS_WRITTEN)],
                         ids=["d64-s2", "d128-s2", "d128-s3", "d128-s2-as-written", "d128-s3-as-written"])
@pytest.mark.parametrize("seq_len", [512, 448], ids=["whole", "partial"])
def test_persistent_flash_attention_matches_sdpa(dim, stages, configs, sm_num, seq_len):
    """T.Persistent over (batch, head, query block) tiles, the K/V ring carried across them
    on sm_90: 3 blocks walk 16 tiles in waves; 132 blocks leave most of them idle (their
    producers must skip every tile too). Q comes from the ring's producer; with the
    overlap (the default at head dim 128) K and V have barriers of their own. 448 tokens: a partial last key block
    (masked) and a partial last query block."""
    batch, heads = 2, 2
    kernel = tilelang.compile(flash_attention_persistent(batch, heads, seq_len, dim, 128, 128, 256, stages,
                                                         sm_num=sm_num), out_idx=[3], target="cuda",
                              pass_configs=configs)
    q, k, v = (torch.randn(batch, seq_len, heads, dim, device="cuda", dtype=torch.float16) for _ in range(3))
    ref = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)
    torch.testing.assert_close(kernel(q, k, v), ref, rtol=2e-2, atol=2e-2)


# -- tensor cores (mma.sync + ldmatrix), cp.async pipelines, rasterization -------------------
TENSOR_CORE_CASES = [
    # (M, N, K), (bM, bN, bK, threads, stages, panel), instructions on sm_90
    ((256, 256, 128), (128, 128, 32, 128, 3, 0), "wgmma"),  # the canonical config
    ((200, 130, 96), (64, 64, 32, 128, 2, 0), "mma"),  # B's rows are not 16-byte vectors: no cp.async
    ((200, 136, 96), (64, 64, 32, 128, 2, 0), "wgmma"),  # edge tiles: zero-filled vectors
    ((512, 384, 256), (128, 128, 64, 256, 4, 2), "wgmma"),  # 2 warpgroups, 4 stages, rasterized
    ((256, 512, 192), (128, 256, 64, 256, 3, 0), "wgmma"),  # m64n256 pieces
    ((128, 192, 64), (128, 64, 32, 128, 0, 0), "mma"),  # no pipelining: synchronous copies
    ((96, 96, 40), (32, 32, 32, 128, 3, 0), "mma"),  # K % bK != 0 and K not 16-byte rows: no cp.async
]
INSTRUCTION_MODES = {"wgmma": None, "wgmma-unswizzled": {"tl.disable_wgmma_swizzle": True}, "mma.sync": NO_WGMMA}


@pytest.mark.parametrize("mode", list(INSTRUCTION_MODES))
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("mnk,config,instructions", TENSOR_CORE_CASES)
def test_tensor_core_gemm(dtype, mnk, config, instructions, mode):
    """On the H200 (sm_90) pipelined GEMMs run on wgmma, operands in swizzled tiles (or
    unswizzled core matrices); tl.disable_wgmma keeps them on mma.sync, which must stay
    right too (it is what sm_80 GPUs get)."""
    gemm = _import(EXAMPLES, "gemm")
    kernel = tilelang.compile(gemm.matmul.builder(*mnk, *config, dtype=dtype), out_idx=[-1], target="cuda",
                              pass_configs=INSTRUCTION_MODES[mode])
    source = kernel.get_kernel_source()
    assert _instructions(source) == (instructions if mode != "mma.sync" else "mma")
    if instructions == "wgmma" and mode != "mma.sync":  # the descriptors' swizzle mode argument
        modes = set(re.findall(r"tl_wgmma_desc\(.*?, \d+, \d+, (\d)\)", source))
        assert (modes and "0" not in modes) if mode == "wgmma" else modes == {"0"}, modes
    M, N, K = mnk
    tdtype = getattr(torch, dtype)
    a = torch.randn(M, K, device="cuda", dtype=tdtype)
    b = torch.randn(K, N, device="cuda", dtype=tdtype)
    tol = 2e-2 if dtype == "float16" else 8e-2  # output rounded to 11 / 8 significant bits
    torch.testing.assert_close(kernel(a, b).float(), a.float() @ b.float(), rtol=tol, atol=tol * K ** 0.5)


@pytest.mark.parametrize("mode", list(INSTRUCTION_MODES))
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (False, True), (True, False), (True, True)])
@pytest.mark.parametrize("relu", [False, True])
def test_tensor_core_transposes_and_fragment_epilogue(trans_a, trans_b, relu, mode):
    """Every operand majorness (wgmma's transpose flags, ldmatrix's .trans) and an
    epilogue at the accumulator's own indices."""
    tc = _import(Path(__file__).resolve().parent, "test_tensor_core")
    M, N, K = 136, 72, 96
    kernel = tilelang.compile(tc.general_gemm(M, N, K, 64, 64, 32, trans_a, trans_b, relu=relu),
                              out_idx=[-1], target="cuda", pass_configs=INSTRUCTION_MODES[mode])
    assert _instructions(kernel.get_kernel_source()) == ("mma" if mode == "mma.sync" else "wgmma")
    a = torch.randn(*((K, M) if trans_a else (M, K)), device="cuda", dtype=torch.float16)
    b = torch.randn(*((N, K) if trans_b else (K, N)), device="cuda", dtype=torch.float16)
    expected = (a.T if trans_a else a).float() @ (b.T if trans_b else b).float()
    if relu:
        expected = expected.clamp_min(0)
    torch.testing.assert_close(kernel(a, b), expected, rtol=1e-3, atol=1e-3)  # fp32 out


def test_accumulator_updated_inside_the_pipelined_loop():
    """C = (C + A_k B_k) / 2 per k tile: the update must wait for the GEMM writing C."""
    wg = _import(Path(__file__).resolve().parent, "test_wgmma")
    kernel = tilelang.compile(wg.loop_gemm("halve"), out_idx=[-1], target="cuda")
    a = torch.randn(128, 256, device="cuda", dtype=torch.float16)
    b = torch.randn(256, 128, device="cuda", dtype=torch.float16)
    expected = torch.zeros(128, 128, device="cuda")
    for k in range(8):
        expected = (expected + a[:, 32 * k:32 * k + 32].float() @ b[32 * k:32 * k + 32].float()) * 0.5
    torch.testing.assert_close(kernel(a, b), expected, rtol=1e-3, atol=1e-3)


def test_gemm_with_a_operand_in_a_fragment():
    tc = _import(Path(__file__).resolve().parent, "test_tensor_core")
    kernel = tilelang.compile(tc.single_tile_gemm(a_in_fragment=True), out_idx=[-1], target="cuda")
    assert "tl_mma_m16n8k16_f16_f32" in kernel.get_kernel_source()
    a = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(kernel(a, b), a.float() @ b.float(), rtol=1e-3, atol=1e-3)


def test_accumulator_reduced_across_rows_stays_correct():
    tc = _import(Path(__file__).resolve().parent, "test_tensor_core")
    kernel = tilelang.compile(tc.gemm_then_row_max(128, 64, 64), out_idx=[-1], target="cuda")
    a = torch.randn(128, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(kernel(a, b), (a.float() @ b.float()).amax(1), rtol=1e-3, atol=1e-3)


# -- T.atomic_add -----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["int32", "float32", "float16"])
def test_element_atomic_add_counts_from_every_thread(dtype):
    tc = _import(Path(__file__).resolve().parent, "test_tensor_core")
    n = 5000
    kernel = tilelang.compile(tc.element_atomics(n, dtype), target="cuda")
    x = torch.randint(0, 1 << 20, (n,), device="cuda", dtype=torch.int32)
    h = torch.zeros(16, device="cuda", dtype=getattr(torch, dtype))
    kernel(x, h)
    expected = torch.bincount((x % 16).long(), minlength=16).to(h.dtype)
    torch.testing.assert_close(h, expected, rtol=0, atol=0)  # counts <= 2048 are exact in fp16


@pytest.mark.parametrize("dtype", ["float16", "float32"])  # tensor cores: fp16 / TF32
def test_tile_atomic_add_split_k(dtype):
    M, N, K = 200, 136, 512
    kernel = tilelang.compile(split_k_gemm(M, N, K, 4, dtype=dtype), target="cuda")
    a = torch.randn(M, K, device="cuda", dtype=getattr(torch, dtype))
    b = torch.randn(K, N, device="cuda", dtype=getattr(torch, dtype))
    c = torch.ones(M, N, device="cuda")
    kernel(a, b, c)
    if dtype == "float32":
        assert_within_tf32(c - 1, a, b)
    else:
        torch.testing.assert_close(c, 1 + a.float() @ b.float(), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("annotate", [True, False])
def test_annotated_shared_layout_keeps_results(annotate):
    tc = _import(Path(__file__).resolve().parent, "test_tensor_core")
    kernel = tilelang.compile(tc.transpose_through_shared(128, annotate), target="cuda", out_idx=[-1])
    a = torch.randn(128, 128, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(kernel(a), a.T.contiguous(), rtol=0, atol=0)


FP8_CASES = [  # M, N, K, (bM, bN, bK, threads, stages), instructions on the H200
    ((256, 256, 256), (128, 128, 128, 128, 4), "wgmma"),  # 128-byte rows: TMA boxes, 128-byte swizzle
    ((512, 512, 512), (128, 256, 128, 256, 3), "wgmma"),  # two warpgroups
    ((200, 136, 192), (128, 128, 64, 128, 3), "wgmma"),  # edge tiles; 64-byte swizzle
]


@pytest.mark.parametrize("mode", ["wgmma", "mma.sync"])
@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("mnk,config,instructions", FP8_CASES)
def test_fp8_gemm_on_tensor_cores(dtype, mnk, config, instructions, mode):
    """8-bit float GEMMs (A as [m][k], B as [n][k]) on wgmma k32, or on mma.sync m16n8k32
    with tl.disable_wgmma: C = A B^T in fp32, exactly. Hopper's fp8 wgmma adds its products
    in fewer than fp32's 24 bits (about 14: DeepSeek-V3's report; upstream's 2xAcc examples
    promote into a second accumulator for it), so the operands are small integers, whose
    sums stay exact in 14 bits: a layout error still shows, rounding does not."""
    from tilelang.testing.kernels import tile_gemm

    M, N, K = mnk
    bM, bN, bK, threads, stages = config
    kernel = tilelang.compile(tile_gemm(M, N, K, bM, bN, bK, False, True, dtype=dtype, stages=stages,
                                        threads=threads), out_idx=[-1], target="cuda",
                              pass_configs=NO_WGMMA if mode == "mma.sync" else None)
    source = kernel.get_kernel_source()
    kind = "e4m3" if "e4m3" in dtype else "e5m2"
    assert (f"k32_{kind}_00(" in source) if mode == "wgmma" else (f"tl_mma_m16n8k32_{kind}_f32(" in source)
    tdtype = getattr(torch, dtype)
    a = torch.randint(-4, 5, (M, K), device="cuda").to(tdtype)
    b = torch.randint(-4, 5, (N, K), device="cuda").to(tdtype)
    torch.testing.assert_close(kernel(a, b), a.float() @ b.float().T, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", ["float16", "float8_e4m3fn"])
def test_a_second_accumulator_scaled_per_k_block(dtype):
    """deepgemm's two accumulators: the scaled sum of each k block's C, beside C."""
    emu = _import(Path(__file__).resolve().parent, "test_lowered_gemm_forms")
    M, N, K, bK = 256, 256, 512, 128
    kernel = tilelang.compile(emu.scaled_block_sums(M, N, K, 128, 128, bK, dtype, stages=3), target="cuda")
    assert "wgmma_m64n128" in kernel.get_kernel_source()
    tdtype = getattr(torch, dtype)
    a = torch.randint(-4, 5, (M, K), device="cuda").to(tdtype)  # exact sums (see the test above)
    b = torch.randint(-4, 5, (N, K), device="cuda").to(tdtype)
    s = torch.rand(M, K // bK, device="cuda") + 0.5
    d = torch.empty(M, N, device="cuda")
    kernel(a, b, s, d)
    blocks = [(a[:, i * bK:(i + 1) * bK].float() @ b[:, i * bK:(i + 1) * bK].float().T) * s[:, i:i + 1]
              for i in range(K // bK)]
    torch.testing.assert_close(d, sum(blocks), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("mode", ["wgmma", "mma.sync"])
@pytest.mark.parametrize("mnk", [(256, 384, 512), (200, 136, 1000), (130, 250, 777), (128, 64, 0)])
def test_a_gemm_over_run_time_sizes(mnk, mode):
    """Upstream's dynamic_shape GEMM: one kernel for every M, N, K; rows whose length is a
    multiple of 8 halves take cp.async vectors, the others tl_copy_16_partial."""
    emu = _import(Path(__file__).resolve().parent, "test_lowered_gemm_forms")
    kernel = tilelang.compile(emu.run_time_gemm(128, 128, 32, False, False), target="cuda",
                              pass_configs=NO_WGMMA if mode == "mma.sync" else None)
    M, N, K = mnk
    a = torch.randint(-4, 5, (M, K), device="cuda").half()
    b = torch.randint(-4, 5, (K, N), device="cuda").half()
    c = torch.empty(M, N, device="cuda")
    kernel(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=0, atol=0)


@pytest.mark.parametrize("mode", ["wgmma", "mma.sync"])
@pytest.mark.parametrize("mnk,config", [((256, 256, 512), (128, 128, 128, 3, 128)),
                                        ((200, 136, 192), (128, 128, 64, 3, 128)),
                                        ((512, 512, 256), (64, 256, 64, 2, 256))])
def test_int8_gemm_into_int32(mnk, config, mode):
    """int8 A as [m][k], B as [n][k], int32 C: wgmma k32 .s32.s8.s8, or mma.sync m16n8k32."""
    from tilelang.testing.kernels import tile_gemm

    M, N, K = mnk
    bM, bN, bK, stages, threads = config
    kernel = tilelang.compile(tile_gemm(M, N, K, bM, bN, bK, False, True, dtype="int8", accum_dtype="int32",
                                        stages=stages, threads=threads), target="cuda",
                              pass_configs=NO_WGMMA if mode == "mma.sync" else None)
    assert ("k32_s8_00(" if mode == "wgmma" else "tl_mma_m16n8k32_s8_s32(") in kernel.get_kernel_source()
    a = torch.randint(-128, 128, (M, K), device="cuda", dtype=torch.int8)
    b = torch.randint(-128, 128, (N, K), device="cuda", dtype=torch.int8)
    c = torch.empty(M, N, device="cuda", dtype=torch.int32)
    kernel(a, b, c)
    torch.testing.assert_close(c, (a.double() @ b.double().T).to(torch.int32), rtol=0, atol=0)


@pytest.mark.parametrize("mode", ["wgmma", "mma.sync"])
@pytest.mark.parametrize("mnk,config", [((256, 256, 256), (128, 128, 32, 128, 3)),
                                        ((512, 512, 512), (128, 256, 32, 256, 3)),  # two warpgroups
                                        ((200, 136, 192), (128, 128, 16, 128, 4))])  # edge tiles
def test_float32_gemm_on_tf32_tensor_cores(mnk, config, mode):
    """float32 A [m][k] and B [n][k] into float32 C (upstream's T.gemm: TF32): wgmma k8, or
    mma.sync m16n8k8 with tl.disable_wgmma. Small integers are exact in TF32 (a layout error
    shows, rounding does not); random operands are within TF32's bound (wgmma reads the
    float32 in shared memory as TF32 by dropping its low 13 bits; mma.sync's helper rounds)."""
    from tilelang.testing.kernels import tile_gemm

    M, N, K = mnk
    bM, bN, bK, threads, stages = config
    kernel = tilelang.compile(tile_gemm(M, N, K, bM, bN, bK, False, True, dtype="float32", stages=stages,
                                        threads=threads), out_idx=[-1], target="cuda",
                              pass_configs=NO_WGMMA if mode == "mma.sync" else None)
    source = kernel.get_kernel_source()
    if torch.cuda.get_device_capability() >= (9, 0) or mode == "mma.sync":
        assert ("_tf32_00(" in source) if mode == "wgmma" and torch.cuda.get_device_capability() == (9, 0) \
            else ("tl_mma_m16n8k8_tf32_f32(" in source)
    a = torch.randint(-4, 5, (M, K), device="cuda").float()
    b = torch.randint(-4, 5, (N, K), device="cuda").float()
    torch.testing.assert_close(kernel(a, b), a @ b.T, rtol=0, atol=0)
    a, b = torch.randn(M, K, device="cuda"), torch.randn(N, K, device="cuda")
    assert_within_tf32(kernel(a, b), a, b.T)


@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, False), (True, True)])
def test_float32_gemm_with_mn_major_operands_on_tf32(trans_a, trans_b):
    """A as [k][m] or B as [k][n] (upstream's plain float32 GEMM is NN): mma.sync m16n8k8,
    the MN-major operand read an element at a time; exact on small integers, within TF32's
    bound on random operands."""
    from tilelang.testing.kernels import tile_gemm

    M, N, K = 264, 200, 136  # edge tiles
    kernel = tilelang.compile(tile_gemm(M, N, K, 128, 128, 32, trans_a, trans_b, dtype="float32", stages=3),
                              out_idx=[-1], target="cuda")
    assert "tl_mma_m16n8k8_tf32_f32(" in kernel.get_kernel_source()
    shape_a, shape_b = ((K, M) if trans_a else (M, K)), ((N, K) if trans_b else (K, N))
    a, b = torch.randint(-4, 5, shape_a, device="cuda").float(), torch.randint(-4, 5, shape_b, device="cuda").float()
    op_a, op_b = (a.T if trans_a else a), (b.T if trans_b else b)
    torch.testing.assert_close(kernel(a, b), op_a @ op_b, rtol=0, atol=0)
    a, b = torch.randn(shape_a, device="cuda"), torch.randn(shape_b, device="cuda")
    assert_within_tf32(kernel(a, b), a.T if trans_a else a, b.T if trans_b else b)
