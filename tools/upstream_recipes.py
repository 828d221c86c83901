"""Recipes for tools/upstream_examples.py: how to get each upstream example's kernels.

A recipe names an example file (relative to upstream's examples/), the kernels in it (a
module attribute plus the arguments its main() or test passes -- copied from that call,
never tuned) and what --mode run calls. The kernel code itself is never touched.

Argument placeholders: ``ModAttr("name")`` is a value from the example module (a config
dict, a dtype constant); ``Tensor(shape, dtype)`` is an empty torch CPU tensor, for eager
kernels (``T.const``/``T.empty``) that take their sizes from tensors as their main() does;
``Splat(fn)`` splices ``fn(module)`` into the arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from upstream_refs import (
    attn_bhsd_ref,
    attn_bshd_ref,
    attn_bwd_inputs,
    attn_fwd_lse_ref,
    attn_inputs,
    block_mask_inputs,
    block_sparse_ref,
    blocksparse_inputs,
    blocksparse_ref,
    bwd_post_inputs,
    bwd_post_ref,
    bwd_prep_ref,
    chunk_cumsum_ref,
    chunk_o_inputs,
    chunk_o_ref,
    conv_ref,
    delta_h_inputs,
    delta_h_ref,
    fp4_gemm_inputs,
    fp4_gemm_ref,
    fp8_gemm_inputs,
    fp8_gemm_ref,
    gemm_nt_ref,
    gemm_ref,
    gemv_reducer_ref,
    gemv_ref,
    gqa_bwd_inputs,
    gqa_bwd_ref,
    gqa_bwd_split_ref,
    gqa_decode_ref,
    gqa_fwd_bshd_ref,
    group_cast_inputs,
    group_cast_ref,
    grouped_gemm_inputs,
    grouped_gemm_ref,
    int4_gemv_inputs,
    int4_gemv_ref,
    kkt_inputs,
    kkt_ref,
    layernorm_bwd_inputs,
    layernorm_bwd_ref,
    layernorm_fwd_inputs,
    layernorm_fwd_ref,
    mha_bwd_ref,
    mha_inference_ref,
    mla_decode_inputs,
    mla_decode_ref,
    mla_paged_inputs,
    mla_paged_ref,
    mm_ref,
    nsa_decode_ref,
    nsa_fwd_ref,
    nsa_inputs,
    per_token_cast_ref,
    randn,
    retention_ref,
    rms_ref,
    sink_ref,
    sparse_gemm_inputs,
    sparse_gemm_ref,
    splitk_atomic_inputs,
    splitk_atomic_ref,
    streamk_inputs,
    streamk_ref,
    topk_inputs,
    topk_ref,
    topk_selector_inputs,
    topk_selector_ref,
    varlen_inputs,
    varlen_ref,
    wy_fast_inputs,
    wy_fast_ref,
)


@dataclass(frozen=True)
class ModAttr:
    """A (dotted) attribute of the example module, resolved after import."""

    name: str


@dataclass(frozen=True)
class Tensor:
    """An empty torch CPU tensor of this shape and dtype (a torch dtype name)."""

    shape: tuple[int, ...]
    dtype: str = "float16"


@dataclass(frozen=True)
class Splat:
    """Arguments computed from the example module (e.g. its own input constructor),
    spliced into the argument list in place."""

    make: Callable[[Any], Sequence[Any]]


@dataclass(frozen=True)
class CpuCase:
    """--mode cpu for one kernel: small sizes (overrides of the kernel's kwargs or args),
    torch inputs made from a seeded generator, a torch reference returning the expected
    outputs -- the kernel's returned outputs followed by the in-place ones (``inplace``:
    indices into the inputs). ``inputs=None`` compiles only."""

    kwargs: Mapping[str, Any] = field(default_factory=dict)
    args: tuple[Any, ...] | None = None
    inputs: Callable[[Any], list[Any]] | None = None
    ref: Callable[..., Any] | None = None
    out_idx: tuple[int, ...] | None = None  # None: the @tilelang.jit's own out_idx
    inplace: tuple[int, ...] = ()
    rtol: float = 1e-2
    atol: float = 1e-2


@dataclass(frozen=True)
class Kernel:
    attr: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    cpu: CpuCase | None = None
    name: str = ""

    @property
    def label(self) -> str:
        return self.name or self.attr


@dataclass(frozen=True)
class Call:
    """What --mode run calls: a module function (``"__main__"``: the file as a script)."""

    attr: str = "main"
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Recipe:
    path: str
    kernels: tuple[Kernel, ...]
    run: Call = Call()
    cuda_shim: bool = False  # the module makes CUDA tensors at import time
    # the SM count a kernel asks the device for (tilelang.carver.arch.driver.get_num_sms),
    # declared for lower/cpu modes where no GPU answers (the library itself refuses to guess)
    num_sms: int | None = None

    @property
    def name(self) -> str:
        return self.path.removesuffix(".py")


# ---------------------------------------------------------------- cpu cases


def _gemm_case(m: int, n: int, k: int, **kwargs: Any) -> CpuCase:
    return CpuCase(kwargs=dict(M=m, N=n, K=k, **kwargs), out_idx=(-1,), ref=mm_ref,
                   inputs=lambda g: [randn(g, m, k, dtype="float16"), randn(g, k, n, dtype="float16")])


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

# ---------------------------------------------------------------- the table

_GEMM = dict(block_M=128, block_N=128, block_K=32)
_MHA_BHSD = dict(block_M=64, block_N=64, num_stages=1, threads=128)

RECIPES: tuple[Recipe, ...] = (
    Recipe("gemm/example_gemm.py", (
        Kernel("matmul", kwargs=dict(M=1024, N=1024, K=1024, **_GEMM),
               cpu=_gemm_case(128, 128, 64, block_M=64, block_N=64, block_K=32)),)),
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
    Recipe("gemm/example_gemm_persistent.py", (
        # 12 x 12 tiles on the declared 132 SMs: 12 blocks run a second tile (the persistent loop)
        Kernel("matmul_persistent", kwargs=dict(M=4096, N=4096, K=4096, block_M=128, block_N=256,
                                                block_K=64, threads=256, num_stages=3),
               cpu=CpuCase(kwargs=dict(M=1536, N=3072, K=192), ref=gemm_ref,
                           inputs=lambda g: [randn(g, 1536, 192, dtype="float16"),
                                             randn(g, 192, 3072, dtype="float16")])),
        Kernel("matmul_non_persistent", kwargs=dict(M=4096, N=4096, K=4096, block_M=128, block_N=256,
                                                    block_K=64, threads=256, num_stages=3),
               cpu=CpuCase(kwargs=dict(M=384, N=768, K=192), ref=gemm_ref,
                           inputs=lambda g: [randn(g, 384, 192, dtype="float16"),
                                             randn(g, 192, 768, dtype="float16")])),),
        num_sms=132),  # an H200's
    Recipe("gemm/example_gemm_intrinsics.py", (
        Kernel("tl_matmul", kwargs=dict(M=1024, N=1024, K=1024, in_dtype="float16",
                                        out_dtype="float16", accum_dtype="float32"),
               # its ldmatrix / mma / stmatrix are CUDA's: the CPU target cannot run them
               cpu=CpuCase(kwargs=dict(M=256, N=128, K=64), ref=gemm_nt_ref,
                           inputs=lambda g: [randn(g, 256, 64, dtype="float16"),
                                             randn(g, 128, 64, dtype="float16")])),),
        run=Call("main", kwargs=dict(M=1024, N=1024, K=1024))),
    Recipe("gemm/example_gemm_autotune.py", (
        Kernel("matmul", (4096, 4096, 4096), dict(block_M=128, block_N=256, block_K=32, num_stages=3,
                                                  thread_num=128, enable_rasteration=True),
               cpu=CpuCase(args=(256, 512, 128), ref=gemm_nt_ref,
                           inputs=lambda g: [randn(g, 256, 128, dtype="float16"),
                                             randn(g, 512, 128, dtype="float16")])),)),
    Recipe("gemm_splitk/example_tilelang_gemm_splitk.py", (
        Kernel("matmul", (Tensor((1024, 1024)), Tensor((1024, 1024)), Tensor((1024, 1024), "float32"),
                          128, 128, 32, 4),
               cpu=CpuCase(args=(Tensor((128, 256)), Tensor((256, 128)), Tensor((128, 128), "float32"),
                                 64, 64, 32, 4),
                           inputs=lambda g: [randn(g, 128, 256, dtype="float16"),
                                             randn(g, 256, 128, dtype="float16"), randn(g, 128, 128) * 0],
                           ref=lambda a, b, c: c + a.float() @ b.float(), out_idx=(), inplace=(2,))),)),
    Recipe("gemm_splitk/example_tilelang_gemm_splitk_vectorize_atomicadd.py", (
        Kernel("matmul", (Tensor((1024, 1024)), Tensor((1024, 1024)), Tensor((1024, 1024), "float32"),
                          128, 128, 32, 4),
               # float32 C from float32 sums of 256 products ~1: 1e-4 relative, 1e-3 absolute
               cpu=CpuCase(args=(Tensor((256, 256)), Tensor((256, 256)), Tensor((256, 256), "float32"),
                                 128, 128, 32, 4), inputs=splitk_atomic_inputs, ref=splitk_atomic_ref,
                           out_idx=(), inplace=(2,), rtol=1e-4, atol=1e-3)),)),
    Recipe("gemm_streamk/example_tilelang_gemm_streamk.py", (
        Kernel("tl_matmul_streamk", (ModAttr("A"), ModAttr("B"), Tensor((256, 1024), "float32"),
                                     ModAttr("streamk_tiles"), 16, 128, 32, False, True, "float16",
                                     "float32", "float32", 2, 64),
               # the module's own sizes (its globals fix the split); float32 C of 512 products <= 1.
               # On 754ce91 the CPU build fails (names assigned in the while body are allocated in it,
               # freed after it: LLVM's "does not dominate"); the emulator has no While
               cpu=CpuCase(inputs=streamk_inputs, ref=streamk_ref, out_idx=(), inplace=(2,),
                           rtol=1e-4, atol=1e-3)),), cuda_shim=True),
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
    Recipe("linear_attention/example_linear_attn_fwd.py", (
        Kernel("tl_fused_chunk_fwd_kernel", (1, 512, 16, 128, 128)),)),
    Recipe("linear_attention/example_retention_fwd.py", (
        Kernel("chunk_retention_fwd_kernel", (8, 4096, 32, 128, 128),
               # NK = NV = 2 (DK = DV = 128, BK = BV = 64), two chunks; fp16 output
               cpu=CpuCase(args=(1, 128, 2, 128, 128), ref=retention_ref,
                           inputs=lambda g: [randn(g, 1, 128, 2, 128, dtype="float16") for _ in range(3)])),)),
    Recipe("convolution/example_convolution.py", (
        Kernel("convolution", (Tensor((128, 64, 64, 128)), Tensor((3, 3, 128, 128)), 1, 1, 1,
                               64, 128, 32, 3, 256),
               # N*OH*OW = 128 rows (2 blocks), KH*KW*C = 288 (9 K steps), F = 128
               cpu=CpuCase(args=(Tensor((2, 8, 8, 32)), Tensor((3, 3, 32, 128)), 1, 1, 1, 64, 128, 32, 3, 256),
                           inputs=lambda g: [randn(g, 2, 8, 8, 32, dtype="float16"),
                                             randn(g, 3, 3, 32, 128, dtype="float16")], ref=conv_ref(1, 1, 1))),),
        run=Call("main", ([],))),
    Recipe("cast/example_per_token_cast_to_fp8.py", (
        Kernel("per_token_cast_to_fp8", (Tensor((2048, 512), "float32"), 8),
               # fp8 outputs: the reference rounds as the kernel does, so any difference is >= 1 fp8 ulp;
               # emulated on sm_80 only (sm_90's float8_e4m3fnx4 conversion is not emulated), no fp8 on the CPU
               cpu=CpuCase(args=(Tensor((16, 256), "float32"), 8), inputs=lambda g: [randn(g, 16, 256) * 3],
                           ref=per_token_cast_ref)),),
        run=Call("main", kwargs=dict(M=2048, N=512, blk_m=8))),
    Recipe("cast/example_group_per_split_token_cast_to_fp8.py", (
        Kernel("group_per_split_token_cast_to_fp8",
               (Tensor((1024, 1024), "bfloat16"), Tensor((2,), "int32"), 896, 4),
               cpu=CpuCase(args=(Tensor((62, 256), "bfloat16"), Tensor((2,), "int32"), 40, 4),
                           inputs=group_cast_inputs, ref=group_cast_ref)),),
        run=Call("main", kwargs=dict(M=1024, N=1024, BG=2, blk_m=4, batch_sizes=[128, 896]))),
    Recipe("gemv/example_gemv.py", (
        Kernel("naive_gemv", kwargs=dict(N=1024, K=1024, BLOCK_N=128, BLOCK_K=128),
               cpu=CpuCase(kwargs=dict(N=256, K=256), out_idx=(-1,),
                           inputs=lambda g: [randn(g, 256, dtype="float16"), randn(g, 256, 256, dtype="float16")],
                           ref=lambda a, b: (b.float() @ a.float()).half())),
        Kernel("naive_splitk_gemv", kwargs=dict(N=1024, K=1024, BLOCK_N=32, BLOCK_K=32),
               cpu=CpuCase(kwargs=dict(N=256, K=256), out_idx=(-1,), ref=gemv_ref,
                           inputs=lambda g: [randn(g, 256, dtype="float16"), randn(g, 256, 256, dtype="float16")])),
        Kernel("splitk_gemv", kwargs=dict(N=1024, K=1024, BLOCK_N=32, BLOCK_K=32, reduce_threads=32),
               # BLOCK_K = 64 over 32 reduce threads: 2 elements a thread a step
               cpu=CpuCase(kwargs=dict(N=256, K=256, BLOCK_K=64), out_idx=(-1,), ref=gemv_ref,
                           inputs=lambda g: [randn(g, 256, dtype="float16"), randn(g, 256, 256, dtype="float16")])),
        Kernel("splitk_gemv_vectorized", kwargs=dict(N=1024, K=1024, BLOCK_N=2, reduce_threads=32),
               cpu=CpuCase(kwargs=dict(N=256, K=512), out_idx=(-1,), ref=gemv_ref,
                           inputs=lambda g: [randn(g, 512, dtype="float16"), randn(g, 256, 512, dtype="float16")])),
        Kernel("splitk_gemv_vectorized_tvm", kwargs=dict(N=1024, K=1024, BLOCK_N=2, reduce_threads=32),
               # T.tvm_thread_allreduce across 32 threads: on the CPU, in phases (cpu/transform/thread_allreduce.py)
               cpu=CpuCase(kwargs=dict(N=256, K=256), out_idx=(-1,),
                           inputs=lambda g: [randn(g, 256, dtype="float16"), randn(g, 256, 256, dtype="float16")],
                           ref=lambda a, b: (b.float() @ a.float()).half())),
        Kernel("gemv_alloc_reducer", kwargs=dict(M=1024, N=1024, block_M=128, block_N=128),
               cpu=CpuCase(kwargs=dict(M=256, N=384), out_idx=(-1,), ref=gemv_reducer_ref,
                           inputs=lambda g: [randn(g, 256, 384, dtype="float16"), randn(g, 384, dtype="float16")])),),
        run=Call("main", kwargs=dict(do_bench=False))),
    Recipe("topk/example_topk.py", (
        Kernel("tl_topk", (Tensor((320, 128), "float32"), 6), dict(blk_m=64),
               # two blocks of blk_m = 64 rows; values and indices exact
               cpu=CpuCase(args=(Tensor((128, 128), "float32"), 6), inputs=topk_inputs, ref=topk_ref,
                           rtol=0, atol=0)),)),
    Recipe("blocksparse_gemm/example_blocksparse_gemm.py", (
        Kernel("blocksparse_matmul", kwargs=dict(M=1024, N=1024, K=1024, block_M=ModAttr("DEFAULT_BLOCK_M"),
                                                 block_N=ModAttr("DEFAULT_BLOCK_N"),
                                                 block_K=ModAttr("DEFAULT_BLOCK_K"),
                                                 num_stages=ModAttr("DEFAULT_NUM_STAGES"),
                                                 thread_num=ModAttr("DEFAULT_THREAD_NUM"),
                                                 enable_rasteration=ModAttr("DEFAULT_ENABLE_RASTERIZATION")),
               cpu=CpuCase(kwargs=dict(M=256, N=256, K=128), inputs=blocksparse_inputs, ref=blocksparse_ref)),)),
    Recipe("dynamic_shape/example_dynamic.py", (
        Kernel("matmul_dynamic_mnk", (Tensor((1024, 1024)), Tensor((1024, 1024)), 128, 128, 32, False, False,
                                      "float16", "float16", "float32", 3, 128),
               cpu=CpuCase(args=(Tensor((128, 64)), Tensor((64, 96)), 64, 64, 32, False, False,
                                 "float16", "float16", "float32", 2, 128), out_idx=(-1,), ref=mm_ref,
                           inputs=lambda g: [randn(g, 128, 64, dtype="float16"),
                                             randn(g, 64, 96, dtype="float16")])),),
        run=Call("main", kwargs=dict(M=1024, N=1024, K=1024))),
    Recipe("hadamard_transform/example_hadamard.py", (
        Kernel("hadamard", (Tensor((64, 32768), "float32"), 32768, "float32")),), run=Call("__main__")),
    Recipe("gemm_fp8/example_tilelang_gemm_fp8.py", (
        # C is fp8 too: a float32 sum that rounds the other way is one fp8 step, 2^-3 (e4m3) or
        # 2^-2 (e5m2) of the value at most. The CPU backend refuses fp8; emulate mode cannot hand
        # torch's fp8 tensors to numpy yet (then: sm_90's float -> fp8x2 is not emulated, sm_80's
        # fp8 -> float32 legalization is wrong for zero, subnormals and negatives on 754ce91)
        Kernel("matmul", (Tensor((1024, 1024), "float8_e4m3fn"), Tensor((1024, 1024), "float8_e4m3fn"),
                          128, 128, 64, "float8_e4m3fn"), name="matmul_e4m3",
               cpu=CpuCase(args=(Tensor((128, 192), "float8_e4m3fn"), Tensor((256, 192), "float8_e4m3fn"),
                                 128, 128, 64, "float8_e4m3fn"), inputs=lambda g: fp8_gemm_inputs(g, "float8_e4m3fn"),
                           ref=fp8_gemm_ref, rtol=0.125, atol=1e-2)),
        Kernel("matmul", (Tensor((1024, 1024), "float8_e5m2"), Tensor((1024, 1024), "float8_e5m2"),
                          128, 128, 64, "float8_e5m2"), name="matmul_e5m2",
               cpu=CpuCase(args=(Tensor((128, 192), "float8_e5m2"), Tensor((256, 192), "float8_e5m2"),
                                 128, 128, 64, "float8_e5m2"), inputs=lambda g: fp8_gemm_inputs(g, "float8_e5m2"),
                           ref=fp8_gemm_ref, rtol=0.25, atol=1e-2)),)),
    Recipe("gemm_sp/example_gemm_sp.py", (
        Kernel("matmul_sp_fp16", (1024, 1024, 1024, "float32", "int16", 128, 128, 64, 2, 128,
                                  ModAttr("T.GemmWarpPolicy.Square"), True),
               cpu=CpuCase(args=(128, 128, 128, "float32", "int16", 64, 64, 64, 2, 128,
                                 ModAttr("T.GemmWarpPolicy.Square"), True),
                           inputs=sparse_gemm_inputs, ref=sparse_gemm_ref, rtol=1e-4, atol=1e-4)),),
        run=Call("main")),
    *[Recipe(f"warp_specialize/example_warp_specialize_gemm_{variant}.py", (
        Kernel(attr, (Tensor((1024, 1024)), Tensor((1024, 1024)), 128, 128, 64)),),
        run=Call("main", kwargs=dict(M=1024, N=1024, K=1024)))
      for variant, attr in (("copy_0_gemm_1", "matmul_warp_specialize_copy_0_gemm_1"),
                            ("copy_1_gemm_0", "matmul_warp_specialize_copy_1_gemm_0"),
                            ("barrierpipe_stage2", "matmul"), ("softpipe_stage2", "matmul"))],
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
    Recipe("grouped_gemm/example_grouped_gemm_fwd.py", (
        Kernel("grouped_gemm", (Splat(lambda m: m.construct_inputs([5, 9, 13], 64, 96, False, 64, "cpu",
                                                                   __import__("torch").float16)),
                                (5, 9, 13), 64, 64, 32, False, 2, 256),
               # groups of 63, 77, 20 rows: M tiles that end inside a group and one past A's end; N = 96
               # as above, not a multiple of block_N: the kernel's T.Parallel store to C leaves N unless
               # guarded as upstream's LegalizeSafeMemoryAccess guards it (fails on 754ce91: with N = 128
               # this case passes in every mode)
               cpu=CpuCase(args=(Tensor((160, 64)), Tensor((3, 64, 96)), Tensor((3,), "int32"), Tensor((3,), "int32"),
                                 Tensor((3,), "int32"), (63, 77, 20), 64, 64, 32, False, 2, 256),
                           inputs=grouped_gemm_inputs, ref=grouped_gemm_ref)),),
        run=Call("run_tilelang_grouped_gemm", ([5, 9, 13],),
                 dict(K=64, M=96, block_M=64, block_N=64, block_K=32, trans_b=False, num_stages=2,
                      threads=256, profile=False))),
    Recipe("dequantize_gemm/example_dequant_gemm_fp4_hopper.py", (
        Kernel("matmul", (256, 256, 256, "float16", "float16", "float32"),
               dict(num_bits=4, block_M=128, block_N=128, block_K=128, num_stages=2, threads=256, split=1),
               cpu=CpuCase(args=(128, 256, 256, "float16", "float16", "float32"), inputs=fp4_gemm_inputs,
                           ref=fp4_gemm_ref)),)),
    Recipe("dequantize_gemm/example_dequant_gemv_fp16xint4.py", (
        Kernel("dequantize_gemv", (1, 1024, 1024, "float16", "float16", "float16", 4, "int8", "uint", 4,
                                   32, True, False, True, -1, False),
               # fast_decoding=False: the lop3 decoder is CUDA inline asm (the CPU target has none).
               # On 754ce91 the CPU build fails: its T.thread_binding loops reach LLVM (no
               # BindNestedThreadLoops in the CPU pipeline); threads (32, 4) are not emulated
               cpu=CpuCase(args=(2, 64, 512, "float16", "float16", "float16", 4, "int8", "uint", 4,
                                 32, False, False, True, -1, False), inputs=int4_gemv_inputs, ref=int4_gemv_ref,
                           out_idx=(), inplace=(2,))),)),
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
               # two block_DK steps; bfloat16 output: rtol = atol = 1e-2. --mode cpu fails (kept as the check):
               # the CPU target's BF16ComputeLegalize holds the kernel's own bfloat16 tiles in float32, unrounded
               cpu=CpuCase(args=(1, 128, 2, 128, 64, "bfloat16", "bfloat16", "float32", True, 64, 64, 128, stages),
                           inputs=kkt_inputs, ref=kkt_ref), name=name)
        # the test's call (num_stages=0), and main()'s (num_stages=2)
        for name, stages in (("kkt", 0), ("kkt_stages2", 2)))),
    Recipe("gdn/example_wy_fast.py", tuple(
        Kernel("tilelang_recompute_w_u_fwd", (1, 1024, 32, 128, 128, "bfloat16", "bfloat16", "float32", "float32", 64),
               dict(block_S=64, block_DK=64, block_DV=32, threads=128, num_stages=stages),
               # two block_DK and four block_DV steps; bfloat16 outputs: rtol = atol = 1e-2. --mode cpu
               # fails as chunk_scaled_dot_kkt's does (bfloat16 shared tiles held in float32 on the CPU target)
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
