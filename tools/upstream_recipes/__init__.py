"""Recipes for tools/upstream_examples.py: how to get each upstream example's kernels.

A recipe names an example file (relative to upstream's examples/), the kernels in it (a
module attribute plus the arguments its main() or test passes -- copied from that call,
never tuned) and what --mode run calls. The kernel code itself is never touched.

Argument placeholders: ``ModAttr("name")`` is a value from the example module (a config
dict, a dtype constant); ``Tensor(shape, dtype)`` is an empty torch CPU tensor, for eager
kernels (``T.const``/``T.empty``) that take their sizes from tensors as their main() does;
``Splat(fn)`` splices ``fn(module)`` into the arguments.

The table is split by family (gemm, attention, linear_attention, misc: one module each, the
types in base.py); RECIPES lists them in _ORDER, the order the examples were added in (--list
and every mode run them in it). A new recipe goes in its family's module and in _ORDER.
"""

from __future__ import annotations

from . import attention, gemm, linear_attention, misc
from .base import Call, CpuCase, Kernel, ModAttr, Recipe, Splat, Tensor

__all__ = ["RECIPES", "Call", "CpuCase", "Kernel", "ModAttr", "Recipe", "Splat", "Tensor"]

_ORDER: tuple[str, ...] = (
    "gemm/example_gemm.py",
    "flash_attention/example_mha_fwd_varlen.py",
    "gemm/example_gemm_persistent.py",
    "gemm/example_gemm_intrinsics.py",
    "gemm/example_gemm_autotune.py",
    "gemm_splitk/example_tilelang_gemm_splitk.py",
    "gemm_splitk/example_tilelang_gemm_splitk_vectorize_atomicadd.py",
    "gemm_streamk/example_tilelang_gemm_streamk.py",
    "elementwise/example_elementwise_add.py",
    "norm/rms_norm.py",
    "norm/layernorm.py",
    "flash_attention/example_mha_fwd_bhsd.py",
    "flash_attention/example_mha_fwd_bshd.py",
    "flash_attention/example_gqa_fwd_bshd.py",
    "flash_attention/example_mha_bwd_bshd.py",
    "flash_decoding/example_gqa_decode.py",
    "flash_decoding/example_mha_inference.py",
    "deepseek_mla/example_mla_decode.py",
    "linear_attention/example_linear_attn_fwd.py",
    "linear_attention/example_retention_fwd.py",
    "convolution/example_convolution.py",
    "cast/example_per_token_cast_to_fp8.py",
    "cast/example_group_per_split_token_cast_to_fp8.py",
    "gemv/example_gemv.py",
    "topk/example_topk.py",
    "blocksparse_gemm/example_blocksparse_gemm.py",
    "dynamic_shape/example_dynamic.py",
    "hadamard_transform/example_hadamard.py",
    "gemm_fp8/example_tilelang_gemm_fp8.py",
    "gemm_sp/example_gemm_sp.py",
    "warp_specialize/example_warp_specialize_gemm_copy_0_gemm_1.py",
    "warp_specialize/example_warp_specialize_gemm_copy_1_gemm_0.py",
    "warp_specialize/example_warp_specialize_gemm_barrierpipe_stage2.py",
    "warp_specialize/example_warp_specialize_gemm_softpipe_stage2.py",
    "attention_sink/example_mha_sink_fwd_bhsd.py",
    "blocksparse_attention/example_tilelang_block_sparse_attn.py",
    "seer_attention/block_sparse_attn_tilelang.py",
    "deepseek_nsa/example_tilelang_nsa_fwd.py",
    "grouped_gemm/example_grouped_gemm_fwd.py",
    "dequantize_gemm/example_dequant_gemm_fp4_hopper.py",
    "dequantize_gemm/example_dequant_gemv_fp16xint4.py",
    "gdn/example_chunk_o.py",
    "gdn/example_chunk_delta_h.py",
    "gdn/example_chunk_scaled_dot_kkt.py",
    "gdn/example_wy_fast.py",
    "gdn/example_cumsum.py",
    "flash_attention/example_mha_bwd_bhsd.py",
    "flash_attention/example_gqa_bwd.py",
    "deepseek_mla/example_mla_decode_persistent.py",
    "deepseek_mla/example_mla_decode_ws.py",
    "deepseek_mla/example_mla_decode_paged.py",
    "deepseek_nsa/example_tilelang_nsa_decode.py",
    "deepseek_v32/sparse_mla_fwd.py",
    "deepseek_v32/topk_selector.py",
)


def _ordered() -> tuple[Recipe, ...]:
    by_path = {r.path: r for family in (gemm, attention, linear_attention, misc) for r in family.RECIPES}
    missing, unlisted = set(_ORDER) - set(by_path), set(by_path) - set(_ORDER)
    if missing or unlisted or len(by_path) != len(_ORDER):
        raise AssertionError(f"upstream_recipes._ORDER: missing {sorted(missing)}, unlisted {sorted(unlisted)}")
    return tuple(by_path[path] for path in _ORDER)


RECIPES: tuple[Recipe, ...] = _ordered()
