"""The CUDA backend's complete lowering sequence, in order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tilelang.plugin import PassPipeline, flatten_and_vectorize

VECTOR_BYTES = 16  # the widest CUDA load/store (ld.global.v4.b32)


def lowering_passes(context: Any) -> Sequence[Any]:
    """Up to MakePackedAPI. ThreadSync inserts __syncthreads() where shared memory written
    by some threads is read by others; the launch metadata is captured right after the
    host/device split, for execution backends that launch kernels themselves."""
    from tilelang.plugin import (
        ApplyGlobalLayouts,
        CaptureLaunchMetadata,
        GuardEmptyLaunches,
        HoistSharedReads,
        LowerTileOps,
        PadTinySharedAllocations,
        PartitionParallelLoops,
        PlaceFragments,
        RasterizeBlocks,
        SyncSharedWritesOfSeveralThreads,
    )
    from tvm import s_tir, tirx
    from tvm.backend.cuda.transforms import LowerIket

    from .transform import LowerAtomics, LowerTensorCoreGemm

    return [
        LowerTensorCoreGemm(),
        LowerTileOps(),
        ApplyGlobalLayouts(),
        LowerAtomics(),
        PlaceFragments(),
        PartitionParallelLoops(max_vector_bytes=VECTOR_BYTES),
        RasterizeBlocks(),
        *flatten_and_vectorize(),
        SyncSharedWritesOfSeveralThreads(),
        HoistSharedReads(),
        s_tir.transform.ThreadSync("shared"),
        s_tir.transform.ThreadSync("shared.dyn"),
        # T.tvm_thread_allreduce (upstream's splitk_gemv_vectorized_tvm calls TVM's
        # builtin directly): warp shuffles plus a shared staging buffer with its own
        # barriers, so after ThreadSync and before the shared allocations are merged
        s_tir.transform.LowerThreadAllreduce(),
        PadTinySharedAllocations(),
        s_tir.transform.MergeSharedMemoryAllocations(),
        tirx.transform.FP8ComputeLegalize(),
        tirx.transform.VerifyMemory(),
        GuardEmptyLaunches(),  # a grid of 0 blocks: no launch (not one block over a null pointer)
        tirx.transform.AnnotateEntryFunc(),
        tirx.transform.SplitHostDevice(),
        LowerIket(),
        CaptureLaunchMetadata(),
        tirx.transform.MakePackedAPI(),
        tirx.transform.FP8StorageLegalize(),
        tirx.transform.BF16StorageLegalize(),
    ]


def finalize_host_passes(context: Any) -> Sequence[Any]:
    from tvm import tirx

    return [tirx.transform.LowerTVMBuiltin(), tirx.transform.LowerIntrin()]


def finalize_device_passes(context: Any) -> Sequence[Any]:
    from tvm import tirx

    return [tirx.transform.LowerWarpMemory(), tirx.transform.StmtSimplify(), tirx.transform.LowerIntrin()]


CUDA_PIPELINE = PassPipeline("tl.cuda", lowering_passes, finalize_host_passes, finalize_device_passes)
