"""The CPU backend's complete lowering sequence, in order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..backend import PassPipeline
from ..backend.pass_pipeline import flatten_and_vectorize


def lowering_passes(context: Any) -> Sequence[Any]:
    """Up to MakePackedAPI. Storage scopes (shared.dyn, local) need no pass: TVM's CPU
    codegen allocates every scope as ordinary memory."""
    from tvm import s_tir, tirx

    from ..transform import LowerTileOps
    from .transform import LowerKernelLaunchToLoops, RelaxParamAlignment

    return [
        LowerTileOps(),
        LowerKernelLaunchToLoops(),
        s_tir.transform.UnifyThreadBinding(),
        *flatten_and_vectorize(),
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
