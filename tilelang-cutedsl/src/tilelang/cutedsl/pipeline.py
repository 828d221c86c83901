"""The cutedsl lowering sequence: the CUDA backend's passes, composed explicitly.

The declared exception to "plugins import only core": tilelang-cutedsl depends on
tilelang-cuda and reuses its pass order, minus what emits inline PTX or CUDA C that the
CuTe DSL printer cannot express (tensor-core GEMMs and cp.async rings, which LowerCuteGemm
maps to CuTe MMA atoms and tiled copies instead; CUDA atomics), TVM's vectorization (the
vectorized loops reach the printer, which writes CuTe vector copies: vector_access.py),
and the merge of shared allocations (each shared buffer is its own ``SmemAllocator``
tensor, typed, so that a swizzled layout can apply to one of them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tilelang.plugin import LowerTileOps, PassPipeline

from .atomics import LowerAtomics
from .gemm import LowerCuteGemm
from .transform import CollectExtensions, StaticSharedBuffers, SwizzlesToModule

#: CUDA passes left out, and why (pass name -> reason)
LEFT_OUT = {
    "tl.cuda.LowerTensorCoreGemm": "inline-PTX mma/wgmma and cp.async rings (LowerCuteGemm instead)",
    "tl.cuda.SpecializeWarps": "a producer warp for tilelang-cuda's TMA rings, which this backend has none of",
    "tl.cuda.AlternateWarpgroupGemms": "turns between the consumer warpgroups SpecializeWarps makes",
    "tl.cuda.OverlapSecondGemm": "works on the consumer loop SpecializeWarps makes",
    "tl.cuda.MergeShortKSteps": "measured on tilelang-cuda's rings only; LowerCuteGemm's keep the kernel's K step",
    "tl.cuda.StageEpilogueInShared": "measured on tilelang-cuda's wgmma epilogue only",
    "tl.cuda.MaskAfterGemm": "measured on tilelang-cuda's wgmma kernels only",
    "tirx.UnrollLoop": "the printer keeps loops; CuTe DSL's compiler unrolls",
    "tl.cuda.FindFirstSet": "CUDA C's __ffs / __ffsll; the printer keeps T.__ffs's arithmetic",
    "tl.LowerSourceKernels": "T.CUDASourceCodeKernel is CUDA C++, which this backend does not compile (refused by name)",
    # it binds a parameter's flattened size (M * N) in the host function, and the device
    # function's buffers then name a variable the launch cannot see; CuTe DSL's compiler
    # eliminates common subexpressions itself
    "tirx.CommonSubexprElim": "binds parameter sizes in host code the launch does not run",
    "s_tir.LowerThreadAllreduce": "TVM's warp-shuffle builtins",
    "tl.PadTinySharedAllocations": "only needed before MergeSharedMemoryAllocations",
    "s_tir.MergeSharedMemoryAllocations": "each shared buffer is its own typed SmemAllocator tensor",
    "tirx.FP8ComputeLegalize": "fp8 stays on cuda (router)",
    "tirx.FP8StorageLegalize": "fp8 stays on cuda (router)",
    "tirx.BF16StorageLegalize": "CuTe DSL has a BFloat16 type: no uint16 storage",
}


def lowering_passes(context: Any) -> Sequence[Any]:
    """The CUDA backend's lowering passes in its order, less LEFT_OUT and TVM's VectorizeLoop,
    after this backend's CollectExtensions and LowerCuteGemm."""
    from tilelang.cuda.pipeline import lowering_passes as cuda_lowering_passes

    passes: list[Any] = [CollectExtensions(), LowerCuteGemm()]
    for p in cuda_lowering_passes(context):
        name = p.info.name
        if name in LEFT_OUT:
            continue
        if name == "tirx.SplitHostDevice":
            passes.append(StaticSharedBuffers())
        if name == "tl.LowerGridDependencies":  # T.pdl_*: dropped (the launcher launches without PDL)
            from tilelang.plugin import LowerGridDependencies

            passes.append(LowerGridDependencies())
            continue
        if name == "tl.cuda.LowerAtomics":  # CuTe DSL's atomic functions instead of CUDA C's
            passes.append(LowerAtomics())
        elif name == "tl.LowerTileOps":  # rows reduced one thread each: no thread all-reduce here
            passes.append(LowerTileOps())
        elif name != "tirx.VectorizeLoop":  # vectorized loops reach the printer (vector_access.py)
            passes.append(p)
        if name == "tirx.SplitHostDevice":
            passes.append(SwizzlesToModule())
    return passes


def finalize_host_passes(context: Any) -> Sequence[Any]:
    from tvm import tirx

    return [tirx.transform.LowerTVMBuiltin(), tirx.transform.LowerIntrin()]


def finalize_device_passes(context: Any) -> Sequence[Any]:
    from tvm import tirx

    # no LowerIntrin: the printer maps TVM's math ops to cute.math itself
    return [tirx.transform.StmtSimplify()]


CUTEDSL_PIPELINE = PassPipeline("tl.cutedsl", lowering_passes, finalize_host_passes, finalize_device_passes)
