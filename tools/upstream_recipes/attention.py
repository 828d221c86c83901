"""The softmax-attention family's recipes: flash attention forward / backward (MHA, GQA, varlen),
flash decoding, MLA decoding, the attention sink, block-sparse attention, NSA and sparse MLA."""

from __future__ import annotations

from upstream_refs.attention import (
    attn_bhsd_ref,
    attn_bshd_ref,
    attn_bwd_inputs,
    attn_fwd_lse_ref,
    attn_inputs,
    block_mask_inputs,
    block_sparse_ref,
    bwd_post_inputs,
    bwd_post_ref,
    bwd_prep_ref,
    gqa_bwd_inputs,
    gqa_bwd_ref,
    gqa_bwd_split_ref,
    gqa_decode_ref,
    gqa_fwd_bshd_ref,
    mha_bwd_ref,
    mha_inference_ref,
    mla_decode_inputs,
    mla_decode_ref,
    mla_paged_inputs,
    mla_paged_ref,
    nsa_decode_ref,
    nsa_fwd_ref,
    nsa_inputs,
    sink_ref,
    varlen_inputs,
    varlen_ref,
)
from upstream_refs.common import randn

from .base import Call, CpuCase, Kernel, Recipe, Tensor


def _mha_bwd_cases(bshd: bool) -> dict[str, CpuCase]:
    """example_mha_bwd_{bshd,bhsd}'s four kernels at b=1, h=2, s=128, d=64 (block_M = block_N = 64,
    as main() picks them for d = 64)."""
    o_do = (lambda g: [randn(g, 1, 128, 2, 64, dtype="float16") for _ in range(2)]) if bshd else \
        (lambda g: [randn(g, 1, 2, 128, 64, dtype="float16") for _ in range(2)])
    return dict(
        fwd=CpuCase(args=(1, 2, 128, 64, False, 64, 64), inputs=lambda g: attn_inputs(g, 1, 128, 2, 64, bshd=bshd),
                    ref=lambda q, k, v: attn_fwd_lse_ref(q, k, v, bshd=bshd)),
        # Delta sums fp16 products (exact in float32) in float32
        prep=CpuCase(args=(1, 2, 128, 64), inputs=o_do, ref=lambda o, do: bwd_prep_ref(o, do, bshd),
                     rtol=1e-5, atol=1e-4),
        # a relayout and an fp16 rounding: exact
        post=CpuCase(args=(1, 2, 128, 64), inputs=lambda g: bwd_post_inputs(g, 1, 128, 2, 64, bshd),
                     ref=lambda dq: bwd_post_ref(dq, bshd), rtol=0, atol=0),
        bwd=CpuCase(args=(1, 2, 128, 64, False, 64, 64), inputs=lambda g: attn_bwd_inputs(g, 1, 128, 2, 64, bshd=bshd),
                    ref=lambda *a: mha_bwd_ref(*a, bshd=bshd), out_idx=(), inplace=(6, 7, 8)))


_MHA_BWD = {True: _mha_bwd_cases(True), False: _mha_bwd_cases(False)}


_MHA_BHSD = dict(block_M=64, block_N=64, num_stages=1, threads=128)

RECIPES: tuple[Recipe, ...] = (
    Recipe("flash_attention/example_mha_fwd_varlen.py", (
        # UQ/UKV (total tokens) depend on main()'s random padding; 4 x 512 tokens, 3/4 kept
        Kernel("flashattn", (4, 1536, 1536, 16, 64, False), _MHA_BHSD,
               # 3 sequences: q lengths 50, 128, 77; k lengths 100, 64, 77 (UQ = 255, UKV = 241)
               cpu=CpuCase(args=(3, 255, 241, 2, 64, False), inputs=varlen_inputs, ref=varlen_ref)),
        Kernel("flashattn", (4, 1536, 1536, 16, 64, True), _MHA_BHSD, name="flashattn_causal",
               # sequence 1 has 64 more queries than keys: its first 64 queries see nothing (0)
               cpu=CpuCase(args=(3, 255, 241, 2, 64, True), inputs=varlen_inputs,
                           ref=lambda *a: varlen_ref(*a, causal=True))),),
        run=Call("main", kwargs=dict(batch=4, heads=16, seq_len=512, dim=64, causal=False))),
    Recipe("flash_attention/example_mha_fwd_bhsd.py", (
        Kernel("flashattn", (1, 1, 256, 256, 64, False), _MHA_BHSD,
               cpu=CpuCase(args=(1, 2, 128, 128, 64, False),
                           inputs=lambda g: [randn(g, 1, 2, 128, 64, dtype="float16") for _ in range(3)],
                           ref=attn_bhsd_ref)),)),
    Recipe("flash_attention/example_mha_fwd_bshd.py", (
        Kernel("flashattn", (1, 32, 256, 128, False), dict(block_M=128, block_N=128, num_stages=1,
                                                           threads=128),
               cpu=CpuCase(args=(1, 2, 128, 64, False), ref=attn_bshd_ref,
                           inputs=lambda g: [randn(g, 1, 128, 2, 64, dtype="float16") for _ in range(3)])),),
        run=Call("main", kwargs=dict(batch=1, seq_len=256))),
    Recipe("flash_attention/example_gqa_fwd_bshd.py", (
        Kernel("flashattn", (1, 16, 1024, 128, False), dict(groups=16, block_M=64, block_N=64,
                                                            num_stages=2, threads=128),
               cpu=CpuCase(args=(1, 4, 128, 64, False), kwargs=dict(groups=2), ref=gqa_fwd_bshd_ref,
                           inputs=lambda g: attn_inputs(g, 1, 128, 4, 64, hkv=2))),
        Kernel("flashattn", (1, 16, 1024, 128, True), dict(groups=16, block_M=64, block_N=64,
                                                           num_stages=2, threads=128), name="flashattn_causal",
               cpu=CpuCase(args=(1, 4, 128, 64, True), kwargs=dict(groups=2),
                           ref=lambda q, k, v: gqa_fwd_bshd_ref(q, k, v, True),
                           inputs=lambda g: attn_inputs(g, 1, 128, 4, 64, hkv=2))),
        Kernel("flashattn", (1, 16, 1000, 128, False), dict(groups=16, block_M=64, block_N=64,
                                                            num_stages=2, threads=128), name="flashattn_ragged",
               # 100 tokens: a partial last block of queries and keys (the kernel masks keys >= seq_len)
               cpu=CpuCase(args=(1, 4, 100, 64, False), kwargs=dict(groups=2), ref=gqa_fwd_bshd_ref,
                           inputs=lambda g: attn_inputs(g, 1, 100, 4, 64, hkv=2))),),
        run=Call("main", kwargs=dict(batch=1, heads=16, seq_len=1024, dim=128, is_causal=False,
                                     groups=16, tune=False))),
    Recipe("flash_attention/example_mha_bwd_bshd.py", (
        Kernel("flashattn_fwd", (1, 16, 512, 64, False, 64, 64), cpu=_MHA_BWD[True]["fwd"]),
        Kernel("flashattn_bwd_preprocess", (1, 16, 512, 64), cpu=_MHA_BWD[True]["prep"]),
        Kernel("flashattn_bwd_postprocess", (1, 16, 512, 64), cpu=_MHA_BWD[True]["post"]),
        Kernel("flashattn_bwd", (1, 16, 512, 64, False, 64, 64), cpu=_MHA_BWD[True]["bwd"]),
        Kernel("flashattn_fwd", (1, 16, 512, 64, True, 64, 64), name="flashattn_fwd_causal",
               cpu=CpuCase(args=(1, 2, 128, 64, True, 64, 64), inputs=lambda g: attn_inputs(g, 1, 128, 2, 64),
                           ref=lambda q, k, v: attn_fwd_lse_ref(q, k, v, causal=True))),
        Kernel("flashattn_bwd", (1, 16, 512, 64, True, 64, 64), name="flashattn_bwd_causal",
               cpu=CpuCase(args=(1, 2, 128, 64, True, 64, 64), out_idx=(), inplace=(6, 7, 8),
                           inputs=lambda g: attn_bwd_inputs(g, 1, 128, 2, 64, causal=True),
                           ref=lambda *a: mha_bwd_ref(*a, causal=True))),),
        run=Call("main", kwargs=dict(BATCH=1, H=16, N_CTX=512, D_HEAD=64, causal=False))),
    Recipe("flash_decoding/example_gqa_decode.py", (
        Kernel("flashattn", (1, 32, 8, 8192, 128), dict(block_N=128, block_H=64, num_split=8,
                                                        num_stages=2, threads=128),
               cpu=CpuCase(args=(1, 8, 2, 256, 64), kwargs=dict(block_N=64, num_split=2), ref=gqa_decode_ref,
                           inputs=lambda g: [randn(g, 1, 8, 64, dtype="float16"),
                                             randn(g, 1, 256, 2, 64, dtype="float16"),
                                             randn(g, 1, 256, 2, 64, dtype="float16"),
                                             (randn(g, 1, 256, 2) > -0.5).to(__import__("torch").uint8)])),)),
    Recipe("flash_decoding/example_mha_inference.py", (
        Kernel("flashattn", (1, 32, 128, 2048, 128, False, 128, 64),
               # 4 splits of 128 keys, 2 key blocks each
               cpu=CpuCase(args=(1, 2, 128, 512, 64, False, 128, 64), ref=mha_inference_ref,
                           inputs=lambda g: [randn(g, 1, n, 2, 64, dtype="float16") for n in (128, 512, 512)])),),
        run=Call("main", kwargs=dict(BATCH=1, H=32, Q_CTX=128, KV_CTX=2048, D_HEAD=128, causal=False))),
    Recipe("deepseek_mla/example_mla_decode.py", (
        Kernel("flashattn", (1, 128, 1, 8192, 512, 64, 64, 64, 1, (512 + 64) ** -0.5),
               cpu=CpuCase(args=(1, 64, 1, 256, 128, 64, 64, 64, 1, (128 + 64) ** -0.5), inputs=mla_decode_inputs,
                           ref=mla_decode_ref)),
        Kernel("flashattn", (1, 128, 1, 8192, 512, 64, 64, 64, 4, (512 + 64) ** -0.5), name="flashattn_split",
               cpu=CpuCase(args=(1, 64, 1, 256, 128, 64, 64, 64, 2, (128 + 64) ** -0.5), inputs=mla_decode_inputs,
                           ref=lambda *a: mla_decode_ref(*a, num_split=2))),)),
    Recipe("attention_sink/example_mha_sink_fwd_bhsd.py", (
        Kernel("flashattn", (1, 1, 256, 256, 128, None), dict(block_M=128, block_N=128, num_stages=2,
                                                              threads=256, dtype="float16"),
               # 128 queries after 128 past keys
               cpu=CpuCase(args=(1, 2, 128, 256, 64, None), ref=sink_ref,
                           inputs=lambda g: [*(randn(g, 1, 2, n, 64, dtype="float16") for n in (128, 256, 256)),
                                             randn(g, 2, dtype="float16")])),
        Kernel("flashattn", (1, 1, 256, 256, 128, 128), dict(block_M=64, block_N=64, num_stages=2, threads=128,
                                                             dtype="float16"), name="flashattn_window",
               # a 128-token sliding window: blocks wholly outside it take the kernel's check_inf path
               cpu=CpuCase(args=(1, 2, 256, 256, 64, 128), ref=lambda *a: sink_ref(*a, window=128),
                           inputs=lambda g: [*(randn(g, 1, 2, 256, 64, dtype="float16") for _ in range(3)),
                                             randn(g, 2, dtype="float16")])),
        Kernel("flashattn", (1, 1, 256, 256, 128, None), dict(block_M=128, block_N=128, num_stages=2,
                                                              threads=256, dtype="bfloat16"), name="flashattn_bf16",
               # main(dtype=T.bfloat16); bf16 outputs (8 bits of mantissa): 2e-2
               cpu=CpuCase(args=(1, 2, 128, 256, 64, None), ref=sink_ref, rtol=2e-2, atol=2e-2,
                           inputs=lambda g: [*(randn(g, 1, 2, n, 64, dtype="bfloat16") for n in (128, 256, 256)),
                                             randn(g, 2, dtype="bfloat16")])),)),
    Recipe("blocksparse_attention/example_tilelang_block_sparse_attn.py", (
        Kernel("blocksparse_flashattn", (1, 1, 256, 64, 4, True),
               cpu=CpuCase(args=(1, 2, 256, 64, 4, True), inputs=lambda g: block_mask_inputs(g, 1, 2, 256, 256),
                           ref=block_sparse_ref)),
        Kernel("blocksparse_flashattn", (1, 1, 256, 64, 4, False), name="blocksparse_flashattn_noncausal",
               cpu=CpuCase(args=(1, 2, 256, 64, 4, False),
                           inputs=lambda g: block_mask_inputs(g, 1, 2, 256, 256, causal=False),
                           ref=lambda *a: block_sparse_ref(*a, causal=False))),)),
    Recipe("seer_attention/block_sparse_attn_tilelang.py", (
        Kernel("blocksparse_flashattn", (4, 2, 256, 256, 64, 4, True),
               cpu=CpuCase(args=(2, 2, 256, 256, 64, 4, True), ref=block_sparse_ref,
                           inputs=lambda g: block_mask_inputs(g, 2, 2, 256, 256, dtype="int8"))),
        Kernel("blocksparse_flashattn", (1, 1, 128, 256, 64, 4, True), name="blocksparse_flashattn_qlen_lt_klen",
               # the file's second test: 128 queries after 128 past keys
               cpu=CpuCase(args=(1, 2, 128, 256, 64, 4, True), ref=block_sparse_ref,
                           inputs=lambda g: block_mask_inputs(g, 1, 2, 128, 256, dtype="int8"))),)),
    Recipe("deepseek_nsa/example_tilelang_nsa_fwd.py", (
        Kernel("native_sparse_attention", kwargs=dict(batch=2, heads=16, seq_len=64, dim=32, is_causal=True,
                                                      block_size=32, groups=16, selected_blocks=1,
                                                      scale=0.1),
               # 2 of the blocks up to each token's own selected (main: 1)
               cpu=CpuCase(kwargs=dict(selected_blocks=2), inputs=lambda g: nsa_inputs(g, n=64),
                           ref=lambda *a: nsa_fwd_ref(*a, scale=0.1))),)),
    Recipe("flash_attention/example_mha_bwd_bhsd.py", (
        Kernel("flashattn_fwd", (1, 16, 512, 64, False, 64, 64), cpu=_MHA_BWD[False]["fwd"]),
        Kernel("flashattn_bwd_preprocess", (1, 16, 512, 64), cpu=_MHA_BWD[False]["prep"]),
        Kernel("flashattn_bwd_postprocess", (1, 16, 512, 64), cpu=_MHA_BWD[False]["post"]),
        Kernel("flashattn_bwd", (1, 16, 512, 64, False, 64, 64), cpu=_MHA_BWD[False]["bwd"]),),
        run=Call("main", kwargs=dict(BATCH=1, H=16, N_CTX=512, D_HEAD=64, causal=False))),
    Recipe("flash_attention/example_gqa_bwd.py", (
        Kernel("flashattn_fwd", (1, 32, 256, 192, 128, False, 128, 64, 16),
               cpu=CpuCase(args=(1, 2, 128, 192, 128, False, 128, 64, 2), ref=attn_fwd_lse_ref,
                           inputs=lambda g: attn_inputs(g, 1, 128, 2, 192, hkv=1, dv=128))),
        Kernel("flashattn_bwd_preprocess", (1, 32, 256, 128),
               cpu=CpuCase(args=(1, 2, 128, 128), ref=bwd_prep_ref, rtol=1e-5, atol=1e-4,
                           inputs=lambda g: [randn(g, 1, 128, 2, 128, dtype="float16") for _ in range(2)])),
        Kernel("flashattn_bwd_postprocess", (1, 32, 256, 192),
               cpu=CpuCase(args=(1, 2, 128, 192), inputs=lambda g: bwd_post_inputs(g, 1, 128, 2, 192),
                           ref=bwd_post_ref, rtol=0, atol=0)),
        Kernel("flashattn_bwd_atomic_add", (1, 32, 256, 192, 128, False, 128, 32),
               dict(threads=256, num_stages=2, groups=16),
               cpu=CpuCase(args=(1, 2, 128, 192, 128, False, 128, 32), kwargs=dict(groups=2),
                           inputs=gqa_bwd_inputs, ref=gqa_bwd_ref, inplace=(6, 7, 8), out_idx=(),
                           atol=2e-2)),
        Kernel("flashattn_bwd_split", (1, 32, 256, 192, 128, False, 128, 32),
               dict(threads=256, num_stages=2, groups=16),
               cpu=CpuCase(args=(1, 2, 128, 192, 128, False, 128, 32), kwargs=dict(groups=2),
                           inputs=lambda g: attn_bwd_inputs(g, 1, 128, 2, 192, hkv=1, dv=128, split_groups=True),
                           ref=gqa_bwd_split_ref, inplace=(6, 7, 8), out_idx=())),
        Kernel("flashattn_bwd_split", (1, 32, 256, 192, 128, True, 128, 32),
               dict(threads=256, num_stages=2, groups=16), name="flashattn_bwd_split_causal",
               cpu=CpuCase(args=(1, 2, 128, 192, 128, True, 128, 32), kwargs=dict(groups=2),
                           inputs=lambda g: attn_bwd_inputs(g, 1, 128, 2, 192, hkv=1, dv=128, causal=True,
                                                            split_groups=True),
                           ref=lambda *a: gqa_bwd_split_ref(*a, causal=True), inplace=(6, 7, 8), out_idx=())),),
        run=Call("main", kwargs=dict(BATCH=1, H=32, N_CTX=256, D_HEAD_QK=192, D_HEAD_V=128, groups=16))),
    Recipe("deepseek_mla/example_mla_decode_persistent.py", (
        Kernel("flashattn", (128, 128, 1, 8192, 512, 64, 64, 64, 2)),)),
    Recipe("deepseek_mla/example_mla_decode_ws.py", (
        Kernel("flashattn", (1, 128, 1, 8192, 512, 64, 64, 64, 1, (512 + 64) ** -0.5)),)),
    Recipe("deepseek_mla/example_mla_decode_paged.py", (
        # main's defaults: b=128, h_q=128, h_kv=1, cache_seqlen=8192 (max_seqlen_pad), d=576, dv=512,
        # block_size=64
        Kernel("mla_decode_tilelang", (128, 128, 1, 8192, 512, 64, 64, 64, 1, 64, 576 ** -0.5),
               # 2 sequences of 200 and 137 tokens in 64-token pages, the page table a permutation
               cpu=CpuCase(args=(2, 64, 1, 256, 128, 64, 64, 64, 1, 64, 192 ** -0.5), inputs=mla_paged_inputs,
                           ref=mla_paged_ref)),
        Kernel("mla_decode_tilelang", (128, 128, 1, 8192, 512, 64, 64, 64, 4, 64, 576 ** -0.5),
               name="mla_decode_tilelang_split",
               cpu=CpuCase(args=(2, 64, 1, 256, 128, 64, 64, 64, 2, 64, 192 ** -0.5),
                           inputs=lambda g: mla_paged_inputs(g, num_split=2), ref=mla_paged_ref)),)),
    Recipe("deepseek_nsa/example_tilelang_nsa_decode.py", (
        Kernel("native_sparse_attention", (Tensor((2, 1, 16, 16)), Tensor((2, 64, 1, 16)), Tensor((2, 64, 1, 16)),
                                           Tensor((2, 1, 1, 1), "int32")),
               dict(dim=16, block_size=32, groups=16, selected_blocks=1),
               cpu=CpuCase(inputs=lambda g: nsa_inputs(g, 2, 64, 16, 1, 16, 1, q_len=1), ref=nsa_decode_ref)),
        Kernel("native_sparse_attention", (Tensor((2, 1, 16, 16)), Tensor((2, 128, 1, 16)), Tensor((2, 128, 1, 16)),
                                           Tensor((2, 1, 1, 2), "int32")),
               dict(dim=16, block_size=32, groups=16, selected_blocks=2), name="native_sparse_attention_2_blocks",
               # two blocks: the reference follows the kernel, which does not rescale its output accumulator
               cpu=CpuCase(inputs=lambda g: nsa_inputs(g, 2, 128, 16, 1, 16, 2, q_len=1), ref=nsa_decode_ref)),)),
    Recipe("deepseek_v32/sparse_mla_fwd.py", (
        Kernel("sparse_mla_fwd", (Tensor((1, 4096, 128, 576), "bfloat16"), Tensor((1, 8192, 1, 576), "bfloat16"),
                                  Tensor((1, 4096, 1, 2048), "int32"), 128, 512, 64, 2048, 1, None, True),
               dict(block_I=64, num_stages=2, threads=256)),)),
)
