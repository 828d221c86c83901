"""The ROCm backend's complete lowering sequence, in order: core's GPU passes for 64-lane
wavefronts, with AMD's instruction selection (MFMA GEMMs, HIP atomics) in front."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tilelang.plugin import DropDeadBindings, PassPipeline

# global_load_dwordx4 / ds_read_b128: AMD GPUs move 16 bytes per lane at most, as CUDA does
VECTOR_BYTES = 16


def lowering_passes(context: Any) -> Sequence[Any]:
    """Up to MakePackedAPI. The TVM passes that read the wavefront size
    (LowerThreadAllreduce, LowerWarpMemory) take it from the rocm target (64 lanes).

    bfloat16 stays bfloat16 (no BF16Compute/StorageLegalize): hip_device.h gives it
    hip_bfloat16's operators, which compute in fp32 and round to nearest even as the
    legalization would, while the legalized form (fp32 lanes in uint32 vectors, 8 lanes
    for a 16-byte bf16 vector) is a 32-byte vector TVM's C printer cannot build."""
    from tilelang.plugin import (
        ApplyGlobalLayouts,
        CaptureLaunchMetadata,
        GuardEmptyLaunches,
        LowerGridDependencies,
        LowerSubByteAccess,
        LowerTileOps,
        gpu_block_passes,
    )
    from tvm import tirx

    from .transform import FindFirstSet, LowerAtomics, LowerMfmaGemm, LowerWarpOps

    return [
        FindFirstSet(),  # T.__ffs: clang's __builtin_ffs / __builtin_ffsll, while its expression is as core built it
        LowerGridDependencies(),  # T.pdl_*: no programmatic dependent launch on HIP; dropped
        LowerMfmaGemm(),
        # rows reduced one thread each: TVM's all-reduce declares shared staging inside the
        # row loop as `__shared__ alignas(64)`, which hipcc (clang) rejects there
        LowerTileOps(),
        ApplyGlobalLayouts(),
        LowerSubByteAccess(),  # fp4/int4 elements: nibbles of bytes
        LowerAtomics(),
        LowerWarpOps(),  # T.shfl_*, votes, T.warp_reduce_*: HIP's functions over 64 lanes
        *gpu_block_passes(VECTOR_BYTES, legalize_bf16=False),
        tirx.transform.VerifyMemory(),
        GuardEmptyLaunches(),  # a grid of 0 blocks: no launch (TVM's runtime would launch one)
        tirx.transform.AnnotateEntryFunc(),
        tirx.transform.SplitHostDevice(),
        CaptureLaunchMetadata(),
        tirx.transform.MakePackedAPI(),
    ]


def finalize_host_passes(context: Any) -> Sequence[Any]:
    from tvm import tirx

    return [tirx.transform.LowerTVMBuiltin(), tirx.transform.LowerIntrin()]


def finalize_device_passes(context: Any) -> Sequence[Any]:
    """Warp memory is lowered for 64 lanes (the rocm target); the intrinsics are then
    lowered for the C++ printer that writes HIP source (see codegen.py): TVM's rocm rules
    would emit LLVM intrinsics, which a source printer cannot write."""
    from tvm import tirx

    from .codegen import ForHipSource

    return [tirx.transform.LowerWarpMemory(), tirx.transform.StmtSimplify(), DropDeadBindings(),
            ForHipSource(), tirx.transform.LowerIntrin()]


ROCM_PIPELINE = PassPipeline("tl.rocm", lowering_passes, finalize_host_passes, finalize_device_passes)
