"""Recipes of the other examples: elementwise, normalizations, fp8 casts, hadamard and the top-k kernels."""

from __future__ import annotations

from upstream_refs.common import randn
from upstream_refs.misc import (
    group_cast_inputs,
    group_cast_ref,
    per_token_cast_ref,
    topk_inputs,
    topk_ref,
    topk_selector_inputs,
    topk_selector_ref,
)
from upstream_refs.norm import (
    layernorm_bwd_inputs,
    layernorm_bwd_ref,
    layernorm_fwd_inputs,
    layernorm_fwd_ref,
    rms_ref,
)

from .base import Call, CpuCase, Kernel, Recipe, Tensor

RECIPES: tuple[Recipe, ...] = (
    Recipe("elementwise/example_elementwise_add.py", (
        Kernel("elementwise_add", (Tensor((1024, 1024), "float32"), Tensor((1024, 1024), "float32")),
               dict(block_M=32, block_N=32, threads=128, in_dtype="float32", out_dtype="float32"),
               cpu=CpuCase(args=(Tensor((96, 64), "float32"), Tensor((96, 64), "float32")), out_idx=(-1,),
                           inputs=lambda g: [randn(g, 96, 64), randn(g, 96, 64)],
                           ref=lambda a, b: a + b, rtol=1e-6, atol=1e-6)),)),
    Recipe("norm/rms_norm.py", (
        Kernel("rms_norm", kwargs=dict(M=1024, N=1024, blk_m=1),
               cpu=CpuCase(kwargs=dict(M=64, N=256), out_idx=(-1,),
                           inputs=lambda g: [randn(g, 64, 256)], ref=rms_ref, rtol=1e-4, atol=1e-4)),
        Kernel("rms_norm_splitk", kwargs=dict(M=1024, N=1024, blk_m=1, blk_k=512),
               # two k steps of blk_k = 512 (the second pass reversed), fp32 throughout
               cpu=CpuCase(kwargs=dict(M=16, N=1024), out_idx=(-1,),
                           inputs=lambda g: [randn(g, 16, 1024)], ref=rms_ref, rtol=1e-4, atol=1e-4)),),
        run=Call("test_rms_norm")),
    Recipe("norm/layernorm.py", (
        # bfloat16 outputs: rtol = atol = 1e-2 (1 ulp is 2^-8 relative); Mean / Rstd in float32 share them
        Kernel("_layernorm_fwd", (4096, 8192), dict(in_dtype="bfloat16", out_dtype="bfloat16"),
               cpu=CpuCase(args=(8, 1024), inputs=layernorm_fwd_inputs, ref=layernorm_fwd_ref)),
        # two blocks of blk_m = 32 rows: DGamma / DBeta are atomically added by both
        Kernel("_layernorm_bwd", (4096, 8192), dict(in_dtype="bfloat16"),
               cpu=CpuCase(args=(64, 512), inputs=layernorm_bwd_inputs, ref=layernorm_bwd_ref, inplace=(5, 6))),),
        run=Call("__main__")),
    Recipe("cast/example_per_token_cast_to_fp8.py", (
        Kernel("per_token_cast_to_fp8", (Tensor((2048, 512), "float32"), 8),
               # fp8 outputs: the reference rounds as the kernel does, so any difference is >= 1 fp8 ulp;
               # not emulated (the emulator does not convert float to fp8; on sm_80 it did while TVM's integer
               # legalization of fp8 ran there, before ac82d5d), no fp8 on the CPU
               cpu=CpuCase(args=(Tensor((16, 256), "float32"), 8), inputs=lambda g: [randn(g, 16, 256) * 3],
                           ref=per_token_cast_ref)),),
        run=Call("main", kwargs=dict(M=2048, N=512, blk_m=8))),
    Recipe("cast/example_group_per_split_token_cast_to_fp8.py", (
        Kernel("group_per_split_token_cast_to_fp8",
               (Tensor((1024, 1024), "bfloat16"), Tensor((2,), "int32"), 896, 4),
               cpu=CpuCase(args=(Tensor((62, 256), "bfloat16"), Tensor((2,), "int32"), 40, 4),
                           inputs=group_cast_inputs, ref=group_cast_ref)),),
        run=Call("main", kwargs=dict(M=1024, N=1024, BG=2, blk_m=4, batch_sizes=[128, 896]))),
    Recipe("topk/example_topk.py", (
        Kernel("tl_topk", (Tensor((320, 128), "float32"), 6), dict(blk_m=64),
               # two blocks of blk_m = 64 rows; values and indices exact
               cpu=CpuCase(args=(Tensor((128, 128), "float32"), 6), inputs=topk_inputs, ref=topk_ref,
                           rtol=0, atol=0)),)),
    Recipe("hadamard_transform/example_hadamard.py", (
        Kernel("hadamard", (Tensor((64, 32768), "float32"), 32768, "float32")),), run=Call("__main__")),
    Recipe("deepseek_v32/topk_selector.py", (
        Kernel("tl_topk_impl", (Tensor((64, 32 * 1024), "float32"), Tensor((64, 2048), "int32"),
                                Tensor((64,), "int32"), Tensor((64,), "int32")),
               # topk = 32 of 2048, inputs built so the output order is defined (see topk_selector_inputs);
               # the CPU target refuses the kernel (barriers in loops over a shared count), the emulator lacks ~x
               cpu=CpuCase(args=(Tensor((4, 2048), "float32"), Tensor((4, 32), "int32"), Tensor((4,), "int32"),
                                 Tensor((4,), "int32")), inputs=topk_selector_inputs, ref=topk_selector_ref,
                           out_idx=(), inplace=(1,), rtol=0, atol=0)),),
        run=Call("test_topk_selector")),  # no main(); the file's test checks against torch.topk
)
