"""CPU-only passes."""

from .alignment import RelaxParamAlignment
from .compute_function import (
    AllocateOnStack,
    KeepComputeFunctions,
    OutlineComputeFunction,
)
from .launch_to_loops import LowerKernelLaunchToLoops

__all__ = [
    "AllocateOnStack",
    "KeepComputeFunctions",
    "LowerKernelLaunchToLoops",
    "OutlineComputeFunction",
    "RelaxParamAlignment",
]
