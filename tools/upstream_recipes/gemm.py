"""The GEMM family's recipes: plain, persistent, intrinsics, autotuned, split-K, stream-K, convolution,
GEMV, block-sparse, dynamic-shape, fp8, 2:4 sparse, warp-specialized, grouped and dequantizing GEMMs."""

from __future__ import annotations

from typing import Any

from upstream_refs.common import mm_ref, randn
from upstream_refs.gemm import (
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
from upstream_refs.sparse import sparse_gemm_inputs, sparse_gemm_ref

from .base import Call, CpuCase, Kernel, ModAttr, Recipe, Splat, Tensor


def _gemm_case(m: int, n: int, k: int, **kwargs: Any) -> CpuCase:
    return CpuCase(kwargs=dict(M=m, N=n, K=k, **kwargs), out_idx=(-1,), ref=mm_ref,
                   inputs=lambda g: [randn(g, m, k, dtype="float16"), randn(g, k, n, dtype="float16")])


_GEMM = dict(block_M=128, block_N=128, block_K=32)

RECIPES: tuple[Recipe, ...] = (
    Recipe("gemm/example_gemm.py", (
        Kernel("matmul", kwargs=dict(M=1024, N=1024, K=1024, **_GEMM),
               cpu=_gemm_case(128, 128, 64, block_M=64, block_N=64, block_K=32)),)),
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
               # The regression case of the CPU's while-body locals (fixed in be5c1d8: they were
               # allocated in the loop, freed after it); the emulator has no While
               cpu=CpuCase(inputs=streamk_inputs, ref=streamk_ref, out_idx=(), inplace=(2,),
                           rtol=1e-4, atol=1e-3)),), cuda_shim=True),
    Recipe("convolution/example_convolution.py", (
        Kernel("convolution", (Tensor((128, 64, 64, 128)), Tensor((3, 3, 128, 128)), 1, 1, 1,
                               64, 128, 32, 3, 256),
               # N*OH*OW = 128 rows (2 blocks), KH*KW*C = 288 (9 K steps), F = 128
               cpu=CpuCase(args=(Tensor((2, 8, 8, 32)), Tensor((3, 3, 32, 128)), 1, 1, 1, 64, 128, 32, 3, 256),
                           inputs=lambda g: [randn(g, 2, 8, 8, 32, dtype="float16"),
                                             randn(g, 3, 3, 32, 128, dtype="float16")], ref=conv_ref(1, 1, 1))),),
        run=Call("main", ([],))),
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
    Recipe("gemm_fp8/example_tilelang_gemm_fp8.py", (
        # C is fp8 too: a float32 sum that rounds the other way is one fp8 step, 2^-3 (e4m3) or
        # 2^-2 (e5m2) of the value at most. The CPU backend refuses fp8; the emulator does not
        # convert float to fp8 (C), on sm_90 or sm_80. (sm_80's fp8 widening was wrong for zero,
        # subnormals and negatives before ac82d5d: tilelang-cuda/tests/test_fp8_below_sm89.py)
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
    # on the CPU the roles run as agents in program order (tilelang/cpu/transform/warp_roles.py):
    # K = 4 blocks, so each barrier goes through four phases (and the stage ring wraps twice)
    *[Recipe(f"warp_specialize/example_warp_specialize_gemm_{variant}.py", (
        Kernel(attr, (Tensor((1024, 1024)), Tensor((1024, 1024)), 128, 128, 64),
               cpu=CpuCase(args=(Tensor((256, 256)), Tensor((256, 128)), 128, 128, 64), ref=gemm_ref,
                           inputs=lambda g: [randn(g, 256, 256, dtype="float16"),
                                             randn(g, 256, 128, dtype="float16")])),),
        run=Call("main", kwargs=dict(M=1024, N=1024, K=1024)))
      for variant, attr in (("copy_0_gemm_1", "matmul_warp_specialize_copy_0_gemm_1"),
                            ("copy_1_gemm_0", "matmul_warp_specialize_copy_1_gemm_0"),
                            ("barrierpipe_stage2", "matmul"), ("softpipe_stage2", "matmul"))],
    Recipe("grouped_gemm/example_grouped_gemm_fwd.py", (
        Kernel("grouped_gemm", (Splat(lambda m: m.construct_inputs([5, 9, 13], 64, 96, False, 64, "cpu",
                                                                   __import__("torch").float16)),
                                (5, 9, 13), 64, 64, 32, False, 2, 256),
               # groups of 63, 77, 20 rows: M tiles that end inside a group and one past A's end; N = 96
               # as above, not a multiple of block_N: the kernel's T.Parallel store to C leaves N unless
               # guarded as upstream's LegalizeSafeMemoryAccess guards it (transform/safe_memory.py since
               # f2bc082; before, the emulator reported the write past C and the CPU run corrupted the heap)
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
               # The regression case of T.thread_binding on the CPU (762c940: BindNestedThreadLoops in
               # the CPU pipeline); threads (32, 4) are not emulated
               cpu=CpuCase(args=(2, 64, 512, "float16", "float16", "float16", 4, "int8", "uint", 4,
                                 32, False, False, True, -1, False), inputs=int4_gemv_inputs, ref=int4_gemv_ref,
                           out_idx=(), inplace=(2,))),)),
)
