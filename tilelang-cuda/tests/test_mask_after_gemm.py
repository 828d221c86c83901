"""MaskAfterGemm: a mask given as a GEMM's starting value (causal attention's) becomes a
cleared tile, the GEMM, and the mask after it where some element is masked
(transform/mask_after_gemm.py).

Without a GPU: which kernels are rewritten by default, and that the condition under which
the mask is skipped is exact for the comparisons it accepts (checked element by element
against every block). With a GPU (marked ``gpu``): causal attention against SDPA, rewritten
and as written, tolerances as the other attention tests (2e-2).
"""

from __future__ import annotations

import itertools

import pytest
import tilelang
import tilelang.language as T
import tvm
import tvm_ffi
from test_tma import kernel_body, lower
from tilelang.backend.pass_pipeline.pipeline import ACTIVE_PASS_CONFIGS
from tilelang.cuda.transform.mask_after_gemm import _run
from tilelang.plugin import substitute, tile_op_name
from tilelang.testing.kernels import flash_attention
from tvm import tirx
from tvm.sym.analyzer import Analyzer

FORCED = {"tl.mask_after_gemm": True}
OFF = {"tl.mask_after_gemm": False}


def sources(func) -> tuple[str, str, str]:
    """The kernel's CUDA by default, with the rewrite forced, and as written."""
    return tuple(lower(func, **configs).device_source for configs in ({}, FORCED, OFF))


def test_causal_attention_with_one_block_per_sm_masks_after_the_gemm():
    # head dim 128, 128x128 tiles, 2 stages: 160 KiB of shared tiles, one block per SM
    default, forced, as_written = sources(flash_attention(1, 2, 1024, 128, 128, 128, 256, 2, causal=True))
    assert default == forced != as_written
    body = kernel_body(default)
    # the select runs only for a key block that crosses the diagonal, after the GEMM's wait
    crossing = body.index("if (((((int)blockIdx.x) - k_1) < 1)) {")
    assert body.rindex("tl_wgmma_wait(", 0, crossing) > body.rindex("tl_wgmma_m64n128k16_f16", 0, crossing)
    # the first wgmma of the score GEMM starts from zero (scale-d 0) instead of reading the mask
    assert "_00z((&(acc_s_ptr[0]))" in body and "_00z((&(acc_s_ptr[0]))" not in kernel_body(as_written)


def test_causal_attention_with_room_for_two_blocks_stays_as_written():
    # head dim 64, 2 stages: 80 KiB, two blocks per SM, and launch bounds that promise none
    # (the plan's estimate does not fit two); the rewrite took the kernel from 126 registers
    # to 147 on the H200, past the 128 that two blocks allow (18% slower)
    default, forced, as_written = sources(flash_attention(1, 2, 1024, 64, 128, 128, 256, 2, causal=True))
    assert default == as_written != forced


@pytest.mark.parametrize("dim,tiles,blocks", [(64, (64, 64, 128, 2), 3), (64, (128, 64, 256, 2), 2),
                                              (128, (64, 64, 128, 1), 3)])
def test_causal_attention_whose_launch_bounds_hold_the_registers_masks_after_the_gemm(dim, tiles, blocks):
    # the occupancy plan promises `blocks` per SM in the launch bounds, so ptxas keeps the
    # rewritten kernel within their register budget (64x64 tiles: 95 registers as written, 91
    # rewritten; 0.951x SDPA as written, 1.053x rewritten on the H200)
    default, forced, as_written = sources(flash_attention(1, 2, 1024, dim, *tiles, causal=True))
    assert default == forced != as_written
    assert f"__launch_bounds__({tiles[2]}, {blocks})" in default


def test_a_block_count_forced_by_pass_config_keeps_the_mask_as_written():
    # tl.min_blocks_per_sm pins a budget whether or not the kernel fits it: at head dim 64,
    # 128x128 tiles, 2 blocks the rewrite spilled and ran at 0.91x SDPA against 1.0x
    func = flash_attention(1, 2, 1024, 64, 128, 128, 256, 2, causal=True)
    pinned = {"tl.min_blocks_per_sm": 2}
    assert lower(func, **pinned).device_source == lower(func, **pinned, **OFF).device_source


def test_plain_attention_and_gemms_are_untouched():
    func = flash_attention(1, 2, 1024, 128, 128, 128, 256, 2)
    assert lower(func, **FORCED).device_source == lower(func, **OFF).device_source


# -- the condition under which the mask runs, element by element ------------------------------
TILE = 32


def both(a, b):
    """``a and b`` for Python booleans (the check below), tirx.And for expressions (the kernel)."""
    return a and b if isinstance(a, bool) and isinstance(b, bool) else tirx.And(a, b)


MASKS = {
    # name: (mask(i, j, bx, k) -> condition, whether the condition keeps the element)
    "causal >=": (lambda i, j, bx, k: bx * TILE + i >= k * TILE + j, True),
    # off the tile's multiples: at bx = k = 6 the smallest difference is -1 (one element masked)
    "skewed >=": (lambda i, j, bx, k: bx * 21 + i >= k * 16 + j, True),
    "swapped >": (lambda i, j, bx, k: k * TILE + j > bx * TILE + i, False),
    "<= with an offset": (lambda i, j, bx, k: bx * TILE + i <= k * TILE + j + 7, True),
    "and of bounds": (lambda i, j, bx, k: both(bx * TILE + i < 70, k * TILE + j < 50), True),
}


def masked_gemm(mask, keeps, clear_accum=False, read_memory=False):
    def cond(i, j, bx, k, M):
        c = mask(i, j, bx, k)
        return tirx.And(c, M[i] > 0) if read_memory else c

    @T.prim_func
    def main(A: T.Tensor((TILE, 32), "float16"), B: T.Tensor((TILE, 32), "float16"), M: T.Tensor((TILE,), "int32"),
             C: T.Tensor((TILE, TILE), "float32")):
        with T.Kernel(4, 4, threads=128) as (bx, k):
            A_s = T.alloc_shared((TILE, 32), "float16")
            B_s = T.alloc_shared((TILE, 32), "float16")
            acc = T.alloc_fragment((TILE, TILE), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            for i, j in T.Parallel(TILE, TILE):
                acc[i, j] = (T.if_then_else(cond(i, j, bx, k, M), 0, -T.infinity("float32")) if keeps
                             else T.if_then_else(cond(i, j, bx, k, M), -T.infinity("float32"), 0))
            T.gemm(A_s, B_s, acc, transpose_B=True, clear_accum=clear_accum)
            T.copy(acc, C)

    return main.with_attr("target", tvm.target.Target({"kind": "cuda", "arch": "sm_90"}))


def rewrite(func, configs=FORCED):
    token = ACTIVE_PASS_CONFIGS.set(configs)
    try:
        return _run(func)
    finally:
        ACTIVE_PASS_CONFIGS.reset(token)


def statements(func) -> list:
    found: list = []
    tvm_ffi.structural_walk(func.body, (tirx.SeqStmt, lambda s, *_: found.append(list(s.seq))))
    return max(found, key=len)


@pytest.mark.parametrize("name", list(MASKS))
def test_the_mask_runs_exactly_where_an_element_is_masked(name):
    mask, keeps = MASKS[name]
    func = rewrite(masked_gemm(mask, keeps))
    seq = statements(func)
    ops = [tile_op_name(s) for s in seq]
    at = ops.index("gemm")
    assert ops[at - 1] == "fill" and isinstance(seq[at + 1], tirx.IfThenElse)
    needed = seq[at + 1].condition
    bx, k = _launch_vars(func)
    analyzer = Analyzer()
    for x, y in itertools.product(range(8), range(8)):
        runs = analyzer.simplify(substitute(needed, [(bx, tirx.IntImm("int32", x)), (k, tirx.IntImm("int32", y))]))
        masked = any(mask(i, j, x, y) != keeps for i in range(TILE) for j in range(TILE))
        assert int(runs) == masked, (name, x, y)


def _launch_vars(func) -> list:
    """The block indices (blockIdx.x, blockIdx.y)."""
    found: dict = {}

    def visit(attr, *_) -> None:
        if attr.attr_key == "thread_extent":
            found[attr.node.thread_tag] = attr.node.var

    tvm_ffi.structural_walk(func.body, (tirx.AttrStmt, visit))
    return [found["blockIdx.x"], found["blockIdx.y"]]


def test_masks_that_read_memory_and_gemms_that_clear_are_left_alone():
    mask, keeps = MASKS["causal >="]
    for func in (masked_gemm(mask, keeps, read_memory=True), masked_gemm(mask, keeps, clear_accum=True)):
        assert rewrite(func).same_as(func)
    plain = masked_gemm(mask, keeps)
    assert rewrite(plain, OFF).same_as(plain)


# -- on the GPU --------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("dim,configs,tiles", [(128, None, (128, 128, 256, 2)), (128, OFF, (128, 128, 256, 2)),
                                               (64, FORCED, (128, 128, 256, 2)), (64, None, (128, 128, 256, 2)),
                                               (64, None, (64, 64, 128, 2))],
                         ids=["d128-default", "d128-as-written", "d64-forced", "d64-default", "d64-64x64-default"])
@pytest.mark.parametrize("seq_len", [512, 448], ids=["whole", "partial"])
def test_causal_attention_matches_sdpa(dim, configs, tiles, seq_len):
    torch = pytest.importorskip("torch")
    batch, heads = 2, 2
    kernel = tilelang.compile(flash_attention(batch, heads, seq_len, dim, *tiles, causal=True),
                              out_idx=[3], target="cuda", pass_configs=configs)
    q, k, v = (torch.randn(batch, seq_len, heads, dim, device="cuda", dtype=torch.float16) for _ in range(3))
    ref = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True).transpose(1, 2)
    torch.testing.assert_close(kernel(q, k, v), ref, rtol=2e-2, atol=2e-2)
