"""The linear-attention family's recipes: linear attention, retention and the gated delta net (gdn)."""

from __future__ import annotations

from upstream_refs.common import randn
from upstream_refs.linear_attention import (
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

from .base import CpuCase, Kernel, Recipe

RECIPES: tuple[Recipe, ...] = (
    Recipe("linear_attention/example_linear_attn_fwd.py", (
        Kernel("tl_fused_chunk_fwd_kernel", (1, 512, 16, 128, 128)),)),
    Recipe("linear_attention/example_retention_fwd.py", (
        Kernel("chunk_retention_fwd_kernel", (8, 4096, 32, 128, 128),
               # NK = NV = 2 (DK = DV = 128, BK = BV = 64), two chunks; fp16 output
               cpu=CpuCase(args=(1, 128, 2, 128, 128), ref=retention_ref,
                           inputs=lambda g: [randn(g, 1, 128, 2, 128, dtype="float16") for _ in range(3)])),)),
    *[Recipe(f"gdn/example_{stem}.py", (Kernel(attr, args, kwargs, cpu=cpu),)) for stem, attr, args, kwargs, cpu in (
        ("chunk_o", "tilelang_chunk_fwd_o",
         (1, 1024, 32, 128, 128, "bfloat16", "bfloat16", "float32", "float32", 64, 128 ** -0.5, True, 64, 64,
          32, 128, 0), {},
         CpuCase(args=(1, 128, 2, 64, 64, "float16", "float16", "float32", "float32", 64, 64 ** -0.5, True, 64, 64,
                       64, 128, 0), inputs=chunk_o_inputs, ref=chunk_o_ref, out_idx=(-1,))),
        ("chunk_delta_h", "tilelang_chunk_gated_delta_rule_fwd_h",
         (1, 1024, 32, 128, 128, "bfloat16", "bfloat16", "float32", "float32", "float32", 64, True, True,
          True, True, 64, 32, 128, 0), {},
         CpuCase(args=(1, 128, 2, 64, 64, "float16", "float16", "float32", "float32", "float32", 64, True, True,
                       True, True, 64, 32, 128, 0), inputs=delta_h_inputs, ref=delta_h_ref)),)],
    Recipe("gdn/example_chunk_scaled_dot_kkt.py", tuple(
        Kernel("tilelang_chunk_scaled_dot_kkt_fwd",
               (1, 1024, 32, 128, 64, "bfloat16", "bfloat16", "float32", True, 64, 64, 128, stages),
               # two block_DK steps; bfloat16 output: rtol = atol = 1e-2. The regression case of the CPU's
               # bfloat16 tiles (68b94ba: they were held in float32, unrounded)
               cpu=CpuCase(args=(1, 128, 2, 128, 64, "bfloat16", "bfloat16", "float32", True, 64, 64, 128, stages),
                           inputs=kkt_inputs, ref=kkt_ref), name=name)
        # the test's call (num_stages=0), and main()'s (num_stages=2)
        for name, stages in (("kkt", 0), ("kkt_stages2", 2)))),
    Recipe("gdn/example_wy_fast.py", tuple(
        Kernel("tilelang_recompute_w_u_fwd", (1, 1024, 32, 128, 128, "bfloat16", "bfloat16", "float32", "float32", 64),
               dict(block_S=64, block_DK=64, block_DV=32, threads=128, num_stages=stages),
               # two block_DK and four block_DV steps; bfloat16 outputs: rtol = atol = 1e-2. The regression
               # case of the CPU's bfloat16 tiles and products (68b94ba, 56826e8: K * Beta rounds to bf16)
               cpu=CpuCase(args=(1, 128, 2, 128, 128, "bfloat16", "bfloat16", "float32", "float32", 64),
                           inputs=lambda g: wy_fast_inputs(g, dv=128), ref=wy_fast_ref), name=name)
        # the test's call (num_stages=0), and main()'s (num_stages=3)
        for name, stages in (("wy_fast", 0), ("wy_fast_stages3", 3)))),
    Recipe("gdn/example_cumsum.py", tuple(
        Kernel("tilelang_chunk_local_cumsum_scalar", (),
               dict(B=1, S=1024, H=32, chunk_size=64, reverse=reverse, head_first=False, input_dtype="float32",
                    output_dtype="float32", block_S=64, threads=threads, use_fragment=False),
               # float32 sums of 64 values: rtol = atol = 1e-4
               cpu=CpuCase(kwargs=dict(S=256, H=4), inputs=lambda g: [randn(g, 1, 256, 4)], rtol=1e-4, atol=1e-4,
                           ref=lambda x, reverse=reverse: chunk_cumsum_ref(x, reverse=reverse)), name=name)
        # the test's call, and main()'s (reversed, 256 threads)
        for name, reverse, threads in (("cumsum", False, 128), ("cumsum_reverse", True, 256)))),
)
