"""The CPU backend's complete lowering sequence, in order.

Two entry conventions, chosen by how the execution backend is declared in the manifest
(:class:`CPUExecutionBackendSpec`): TVM's packed entry point, which tvm_ffi loads and calls
with DLTensor arguments, or the compute function alone as plain C with data pointers,
scalars and symbolic dimensions as parameters, which an execution backend (cython) compiles
into its own wrapper and calls after checking the arguments itself
(transform/compute_function.py says how it is produced).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..backend import ExecutionBackendSpec, PassPipeline
from ..backend.pass_pipeline import CaptureLaunchMetadata, flatten_and_vectorize
from .target import is_c_target


@dataclass(frozen=True)
class CPUExecutionBackendSpec(ExecutionBackendSpec):
    """An execution backend's declaration in the CPU manifest.

    direct_call: the execution backend calls the compute function itself (plain C, recorded
    as the artifact's launch metadata) instead of TVM's packed entry point.
    """

    direct_call: bool = False


def calls_compute_function(context: Any) -> bool:
    """Whether this compilation produces the bare compute function (see the module doc).
    Contexts of other manifests' specs, and codegen-only ones, get the packed entry."""
    return bool(getattr(context.execution_spec, "direct_call", False))


def lowering_passes(context: Any) -> Sequence[Any]:
    """Up to MakePackedAPI (or, for a direct call, up to the outlined compute function).
    Storage scopes (shared.dyn, local) need no pass for the packed entry: TVM's CPU codegen
    allocates every scope as ordinary memory (through workspace calls)."""
    from tvm import s_tir, tirx

    from ..backend.pass_pipeline.bounds_checks import InstrumentBoundsChecks
    from ..transform import ApplyGlobalLayouts, LowerSubByteAccess, LowerTileOps
    from ..transform.assumes import LowerAssumes
    from ..transform.gpu.thread_loops import BindNestedThreadLoops
    from ..transform.grid_dependencies import LowerGridDependencies
    from . import intrinsics  # noqa: F401 - registers the c kind's missing math rules
    from .transform import (
        AllocateOnStack,
        CheckExternCalls,
        ComputeFp8,
        KeepComputeFunctions,
        LegalizeBoolCompare,
        LegalizeFloatMinMax,
        LowerAtomics,
        LowerGemmToMicroKernels,
        LowerKernelLaunchToLoops,
        LowerWarpRoles,
        NameTheCpuDevice,
        OutlineComputeFunction,
        PlaceLocalAllocations,
        RefuseForeignThreadLoops,
        RefuseNarrowFloats,
        RelaxParamAlignment,
        RoundBF16Stores,
    )
    from .transform.c_vectors import RefuseVectorsInC

    middle_end = [
        CheckExternCalls(c_source=is_c_target(context.target)),
        LowerGridDependencies(),  # T.pdl_*: a CPU has no dependent launches
        LowerWarpRoles(),  # T.ws roles as agents in program order, barriers as phase counters
        *([RefuseVectorsInC()] if is_c_target(context.target) else []),
        RefuseNarrowFloats(),
        LowerGemmToMicroKernels(),  # T.gemm as vectorized micro-kernels; LowerTileOps the rest
        LowerTileOps(),
        ApplyGlobalLayouts(),
        LowerSubByteAccess(),  # fp4/int4 elements: nibbles of bytes
        BindNestedThreadLoops(),  # T.thread_binding of the kernel's own index: that index
        RefuseForeignThreadLoops(),  # any other thread-bound loop (cpu/transform/thread_loops.py)
        LowerKernelLaunchToLoops(),
        LowerAtomics(),
        ComputeFp8(),  # e4m3 / e5m2 tiles as bytes, computed in float32 (cuda_fp8.h's rounding)
        LegalizeBoolCompare(),
        LegalizeFloatMinMax(),
        s_tir.transform.UnifyThreadBinding(),
        InstrumentBoundsChecks(),  # only with tl.bounds_check / tirx.instrument_bound_checkers
        RoundBF16Stores(),  # before BF16ComputeLegalize turns bfloat16 tiles into float32
        *flatten_and_vectorize(),
        LowerAssumes(),  # over parameters only, a check of the packed entry's host code
        tirx.transform.VerifyMemory(),
        tirx.transform.AnnotateEntryFunc(),
    ]
    if calls_compute_function(context):
        return [
            *middle_end,
            AllocateOnStack(),
            OutlineComputeFunction(),
            tirx.transform.SplitHostDevice(),
            CaptureLaunchMetadata(host_calls=True),
            KeepComputeFunctions(),
            tirx.transform.BF16StorageLegalize(),
        ]
    return [
        *middle_end,
        PlaceLocalAllocations(),  # scalars on the stack, no workspace inside a while body
        tirx.transform.SplitHostDevice(),
        NameTheCpuDevice(),  # a kernel without tensors: its workspace is on (kDLCPU, 0)
        tirx.transform.MakePackedAPI(),
        RelaxParamAlignment(),
        tirx.transform.BF16StorageLegalize(),
    ]


def finalize_host_passes(context: Any) -> Sequence[Any]:
    """The bare compute function calls no TVM builtin (no packed arguments, buffers on the
    stack), so it skips LowerTVMBuiltin, which would ask for a device type it has none of."""
    from tvm import tirx

    if calls_compute_function(context):
        return [tirx.transform.LowerIntrin()]
    return [tirx.transform.LowerTVMBuiltin(), tirx.transform.LowerIntrin()]


def finalize_device_passes(context: Any) -> Sequence[Any]:
    return []


CPU_PIPELINE = PassPipeline("tl.cpu", lowering_passes, finalize_host_passes, finalize_device_passes)
