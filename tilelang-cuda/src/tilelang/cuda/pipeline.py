"""The CUDA backend's complete lowering sequence, in order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tilelang.plugin import DropDeadBindings, PassPipeline

VECTOR_BYTES = 16  # the widest CUDA load/store (ld.global.v4.b32)


def lowering_passes(context: Any) -> Sequence[Any]:
    """Up to MakePackedAPI. ThreadSync inserts __syncthreads() where shared memory written
    by some threads is read by others; the launch metadata is captured right after the
    host/device split, for execution backends that launch kernels themselves."""
    from tilelang.plugin import (
        ApplyGlobalLayouts,
        CaptureLaunchMetadata,
        GuardEmptyLaunches,
        KernelClusterDims,
        KernelLaunchBounds,
        LowerClusterOps,
        LowerGridDependencies,
        LowerGridSync,
        LowerSourceKernels,
        LowerSubByteAccess,
        LowerTileOps,
        WaitingKernelsMayAlias,
        gpu_block_passes,
    )
    from tvm import tirx
    from tvm.backend.cuda.transforms import LowerIket

    from .codegen import CLUSTER_DIMS_KERNEL_ATTR, SOURCE_KERNEL_ATTR, CheckClusterArch
    from .target import arch_number, arch_of
    from .transform import (
        LowerAtomics,
        LowerTensorCoreGemm,
        LowerWarpOps,
        SpecializeWarps,
    )
    from .transform.async_copies import IssueAsyncCopies
    from .transform.atomics import PackAtomicAdds
    from .transform.explicit_sync import (
        LowerExplicitSync,
        LowerNamedBarriers,
        NameRoleBarriers,
    )
    from .transform.fp8_arith import ComputeFp8InFloat32, ConvertE8M0
    from .transform.gemm_overlap import OverlapSecondGemm
    from .transform.mask_after_gemm import MaskAfterGemm
    from .transform.merge_k_steps import MergeShortKSteps
    from .transform.pingpong import AlternateWarpgroupGemms
    from .transform.random import LowerRandom
    from .transform.shared_epilogue import StageEpilogueInShared
    from .transform.shared_memory import CheckSharedMemory
    from .transform.tma_copy import LowerTmaCopies
    from .transform.tma_reduce import LowerTmaReductions
    from .transform.warp_ops import FindFirstSet

    # TMA tensor maps are encoded by the kernel's host code, or by a launcher that reads
    # them from the launch metadata
    tensor_maps = context.execution_spec.requires_host_codegen or "tensormap" in context.execution_spec.operand_kinds
    # below sm_80 bfloat16 stays bfloat16: TVM's legalization to uint16 bits and float math
    # (which it applies there) vectorizes into types its codegen cannot print, and cuda_bf16.h
    # computes bfloat16 in float there itself (codegen.py); from sm_80 TVM's passes stay
    native_bf16 = arch_number(arch_of(context.target)) >= 80
    native_fp8 = arch_number(arch_of(context.target)) >= 89
    return [
        FindFirstSet(),  # T.__ffs: CUDA's __ffs / __ffsll, while its expression is as core built it
        LowerGridDependencies("tl_pdl_trigger", "tl_pdl_wait"),  # T.pdl_*: griddepcontrol on sm_90+
        CheckClusterArch(),  # T.ClusterKernel: sm_90 and newer
        LowerClusterOps("tl_cluster_ctarank", "tl_cluster_arrive", "tl_cluster_arrive_relaxed", "tl_cluster_wait",
                        store="tl_cluster_store"),
        LowerExplicitSync(),  # T.alloc_barrier, T.mbarrier_*, T.ws: the user's own schedule
        MaskAfterGemm(tensor_maps=tensor_maps),  # sm_90: a mask given as a GEMM's starting value applied after it, where it masks
        MergeShortKSteps(),  # sm_90: K steps under 128 bytes, several per pipeline stage
        StageEpilogueInShared(),  # sm_90: a GEMM's C goes to global memory through a shared tile
        LowerTensorCoreGemm(tensor_maps=tensor_maps),
        # T.tma_copy, once the tensor-core pass laid its tiles out (T.tma_copy has no form without
        # tensor maps; a codegen-only lowering shows the source tvm_ffi would run)
        LowerTmaCopies(tensor_maps=tensor_maps or context.execution_backend is None),
        IssueAsyncCopies(),  # T.ptx_cp_async before a T.cp_async_barrier_noinc: real cp.async
        LowerTileOps(cross_thread=True),  # long rows reduced by the block (LowerThreadAllreduce below)
        ApplyGlobalLayouts(),
        LowerSubByteAccess(),  # fp4/int4 elements: nibbles of bytes
        ConvertE8M0(),  # float8_e8m0fnu conversions: CUDA's rounding on every arch (before vectorizing)
        # T.atomic_add(..., use_tma=True) of a shared tile: TMA bulk reductions from sm_90 (after
        # the global layouts, so a remapped destination keeps its element atomics)
        *([LowerTmaReductions(tensor_maps=tensor_maps or context.execution_backend is None)] if arch_number(arch_of(context.target)) >= 90 else []),
        LowerAtomics(native_bf16),
        LowerRandom(),  # T.rng_*: Philox4x32-10, one state per thread
        LowerWarpOps(),  # T.shfl_*, votes, T.warp_reduce_*: CUDA's warp functions
        # fragments, T.Parallel over the threads, TVM's middle end, barriers (T.tvm_thread_allreduce:
        # upstream's splitk_gemv_vectorized_tvm calls TVM's builtin directly), shared memory merged
        *gpu_block_passes(VECTOR_BYTES, legalize_bf16=native_bf16, named_barriers=True,  # bar.sync id, count (LowerNamedBarriers)
                          vector_fp8=native_fp8),  # fp8 vectors where fp8 is a CUDA type
        PackAtomicAdds(arch_number(arch_of(context.target))),  # atomicAdd of 2 / 4 elements at once where the arch has it
        SpecializeWarps(),  # a TMA ring's producer loop gets a warp of its own (after partitioning)
        NameRoleBarriers(),  # block barriers inside a T.ws role: named barriers over its threads
        LowerNamedBarriers(),  # T.sync_threads(barrier_id, arrive_count): bar.sync id, count
        OverlapSecondGemm(),  # a loop's second GEMM runs under the next iteration's register work (FA3)
        AlternateWarpgroupGemms(),  # two consumer warpgroups take turns issuing GEMMs (FA3's pingpong)
        ComputeFp8InFloat32(),  # fp8 + - * / min max: CUDA's fp8 types are storage types
        # below sm_89 TVM computes fp8 as integer bits, which its C++ printing gets wrong (a uchar
        # shift promotes to int: the sign bit lands in the exponent; no zero or subnormal case):
        # there cuda_fp8.h's own conversions (software ones below sm_89) are used (codegen.py)
        *([tirx.transform.FP8ComputeLegalize()] if native_fp8 else []),
        tirx.transform.VerifyMemory(),
        GuardEmptyLaunches(),  # a grid of 0 blocks: no launch (not one block over a null pointer)
        tirx.transform.AnnotateEntryFunc(),
        tirx.transform.SplitHostDevice(),
        LowerSourceKernels(SOURCE_KERNEL_ATTR),  # T.CUDASourceCodeKernel: named after its entry; codegen.py puts its source in
        KernelLaunchBounds("tirx.launch_bounds_min_blocks_per_sm"),  # T.annotate_min_blocks_per_sm
        KernelClusterDims(CLUSTER_DIMS_KERNEL_ATTR),  # T.ClusterKernel: printed as __cluster_dims__ (codegen.py)
        WaitingKernelsMayAlias("tl_pdl_wait"),  # T.pdl_sync: no __restrict__ (reads may not pass the wait)
        LowerGridSync("tl_sync_grid"),  # T.sync_grid: cooperative_groups' grid barrier, a cooperative launch
        LowerIket(),
        CaptureLaunchMetadata(),
        CheckSharedMemory(),  # more shared memory than a block may have: a compile error, not a launch failure
        tirx.transform.MakePackedAPI(),
        *([tirx.transform.FP8StorageLegalize()] if native_fp8 else []),
        # the host code's bfloat16 buffers are 16-bit words on every arch: LLVM's host codegen
        # died (a segfault, tvm_ffi) on bfloat16 pointers, which an sm_75 kernel's host code kept
        tirx.transform.BF16StorageLegalize() if native_bf16 else _on_host(tirx.transform.BF16StorageLegalize()),
    ]


def _on_host(legalize: Any) -> Any:
    """``legalize`` (a pass over the split module) applied to its host functions only: the
    device kernels (TVM's calling convention 2, kDeviceKernelLaunch) keep their types."""
    import tvm

    def run(mod: Any, ctx: Any) -> Any:
        host = {gvar: func for gvar, func in mod.functions.items()
                if func.attrs is None or int(func.attrs.get("calling_conv", 0)) != 2}
        if not host:
            return mod
        for gvar, func in legalize(tvm.IRModule(host)).functions.items():
            mod[gvar] = func
        return mod

    return tvm.transform.module_pass(run, opt_level=0, name="tl.cuda.HostOnly")


def finalize_host_passes(context: Any) -> Sequence[Any]:
    from tvm import tirx

    return [tirx.transform.LowerTVMBuiltin(), tirx.transform.LowerIntrin()]


def finalize_device_passes(context: Any) -> Sequence[Any]:
    from tvm import tirx

    from .target import arch_number, arch_of
    from .transform.conversions import PairConversions
    from .transform.narrow_broadcast import PackByteBroadcasts

    # the simplification puts the middle end's CSE values back into their uses and keeps the
    # bindings: dropped; byte vectors after the last simplification, which folds a narrowing
    # cast back into a ramp; paired conversions last: no TVM pass sees their calls
    return [tirx.transform.LowerWarpMemory(), tirx.transform.StmtSimplify(), DropDeadBindings(),
            tirx.transform.LowerIntrin(), PackByteBroadcasts(),
            PairConversions(arch_number(arch_of(context.target)))]


def trial_lowering_passes(context: Any) -> Sequence[Any]:
    """``lowering_passes`` with the tensor-core lowering through OverlapSecondGemm run as one
    pass that decides the intra-warpgroup overlap where its pass config is unset (the
    passes run with it on, and again without it where it does not pay:
    transform/overlap_policy.py). ``lowering_passes`` stays a flat list: another slice
    (tilelang-cutedsl) composes its own pipeline from it by pass name."""
    from .transform.overlap_policy import OverlapWherePays

    passes = list(lowering_passes(context))
    names = [p.info.name for p in passes]
    first, last = names.index("tl.cuda.LowerTensorCoreGemm"), names.index("tl.cuda.OverlapSecondGemm")
    return [*passes[:first], OverlapWherePays(passes[first:last + 1]), *passes[last + 1:]]


CUDA_PIPELINE = PassPipeline("tl.cuda", trial_lowering_passes, finalize_host_passes, finalize_device_passes)
