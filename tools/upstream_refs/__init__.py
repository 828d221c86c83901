"""Torch references and seeded inputs for the cpu and emulate modes of
tools/upstream_examples.py: what each upstream example's kernel should compute, written from
the kernel's definition (small sizes, float64 where the kernel accumulates in float32).

One module per family of examples; this package re-exports every public name, so the recipe
table imports them from ``upstream_refs``.
"""

from .attention import (
    attn_bhsd_ref,
    attn_bshd_ref,
    attn_bwd_core,
    attn_bwd_inputs,
    attn_core,
    attn_fwd_lse_ref,
    attn_inputs,
    block_mask_inputs,
    block_sparse_ref,
    bwd_post_inputs,
    bwd_post_ref,
    bwd_prep_ref,
    dq_laid,
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
    split_kv_combine,
    varlen_inputs,
    varlen_ref,
)
from .common import (
    mm64,
    mm_ref,
    randn,
)
from .gemm import (
    blocksparse_inputs,
    blocksparse_ref,
    conv_ref,
    fp4_gemm_inputs,
    fp4_gemm_ref,
    fp8_gemm_inputs,
    fp8_gemm_ref,
    gemm_nt_ref,
    gemm_ref,
    gemv_reducer_ref,
    gemv_ref,
    grouped_gemm_inputs,
    grouped_gemm_ref,
    int4_gemv_inputs,
    int4_gemv_ref,
    splitk_atomic_inputs,
    splitk_atomic_ref,
    streamk_inputs,
    streamk_ref,
)
from .linear_attention import (
    chunk_cumsum_ref,
    chunk_o_inputs,
    chunk_o_ref,
    delta_h_inputs,
    delta_h_ref,
    kkt_inputs,
    kkt_ref,
    retention_ref,
    wy_fast_inputs,
    wy_fast_ref,
)
from .misc import (
    group_cast_inputs,
    group_cast_ref,
    per_token_cast_ref,
    topk_inputs,
    topk_ref,
    topk_selector_inputs,
    topk_selector_ref,
)
from .norm import (
    layernorm_bwd_inputs,
    layernorm_bwd_ref,
    layernorm_fwd_inputs,
    layernorm_fwd_ref,
    rms_ref,
)
from .sparse import (
    sparse_gemm_inputs,
    sparse_gemm_ref,
)

__all__ = [
    "attn_bhsd_ref", "attn_bshd_ref", "attn_bwd_core", "attn_bwd_inputs", "attn_core", "attn_fwd_lse_ref",
    "attn_inputs", "block_mask_inputs", "block_sparse_ref", "blocksparse_inputs", "blocksparse_ref",
    "bwd_post_inputs", "bwd_post_ref", "bwd_prep_ref", "chunk_cumsum_ref", "chunk_o_inputs", "chunk_o_ref",
    "conv_ref", "delta_h_inputs", "delta_h_ref", "dq_laid", "fp4_gemm_inputs", "fp4_gemm_ref",
    "fp8_gemm_inputs", "fp8_gemm_ref", "gemm_nt_ref", "gemm_ref", "gemv_reducer_ref", "gemv_ref",
    "gqa_bwd_inputs", "gqa_bwd_ref", "gqa_bwd_split_ref", "gqa_decode_ref", "gqa_fwd_bshd_ref",
    "group_cast_inputs", "group_cast_ref", "grouped_gemm_inputs", "grouped_gemm_ref", "int4_gemv_inputs",
    "int4_gemv_ref", "kkt_inputs", "kkt_ref", "layernorm_bwd_inputs", "layernorm_bwd_ref",
    "layernorm_fwd_inputs", "layernorm_fwd_ref", "mha_bwd_ref", "mha_inference_ref", "mla_decode_inputs",
    "mla_decode_ref", "mla_paged_inputs", "mla_paged_ref", "mm64", "mm_ref", "nsa_decode_ref", "nsa_fwd_ref",
    "nsa_inputs", "per_token_cast_ref", "randn", "retention_ref", "rms_ref", "sink_ref", "sparse_gemm_inputs",
    "sparse_gemm_ref", "split_kv_combine", "splitk_atomic_inputs", "splitk_atomic_ref", "streamk_inputs",
    "streamk_ref", "topk_inputs", "topk_ref", "topk_selector_inputs", "topk_selector_ref", "varlen_inputs",
    "varlen_ref", "wy_fast_inputs", "wy_fast_ref",
]
