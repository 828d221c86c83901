"""The CPU backend's complete lowering sequence, in order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..backend import PassPipeline, pass_config


def lowering_passes(context: Any) -> Sequence[Any]:
    """Up to MakePackedAPI. Storage scopes (shared.dyn, local) need no pass: TVM's CPU
    codegen allocates every scope as ordinary memory."""
    from tvm import s_tir, tirx

    from .transform import LowerKernelLaunchToLoops, RelaxParamAlignment

    vectorize = not pass_config("tl.disable_vectorize", False)
    return [
        LowerKernelLaunchToLoops(),
        s_tir.transform.UnifyThreadBinding(),
        tirx.transform.StmtSimplify(),
        tirx.transform.FlattenBuffer(),
        tirx.transform.BF16ComputeLegalize(),
        tirx.transform.NarrowDataType(32),
        tirx.transform.VectorizeLoop(vectorize),
        tirx.transform.UnrollLoop(),
        tirx.transform.StmtSimplify(),
        tirx.transform.CommonSubexprElim(),
        tirx.transform.VerifyMemory(),
        tirx.transform.AnnotateEntryFunc(),
        tirx.transform.SplitHostDevice(),
        tirx.transform.MakePackedAPI(),
        RelaxParamAlignment(),
        tirx.transform.BF16StorageLegalize(),
    ]


def finalize_host_passes(context: Any) -> Sequence[Any]:
    from tvm import tirx

    return [tirx.transform.LowerTVMBuiltin(), tirx.transform.LowerIntrin()]


def finalize_device_passes(context: Any) -> Sequence[Any]:
    return []


CPU_PIPELINE = PassPipeline("tl.cpu", lowering_passes, finalize_host_passes, finalize_device_passes)
