"""CPU-only passes."""

from .alignment import RelaxParamAlignment
from .atomics import LowerAtomics
from .compute_function import (
    AllocateOnStack,
    KeepComputeFunctions,
    OutlineComputeFunction,
)
from .launch_to_loops import LowerKernelLaunchToLoops

__all__ = [
    "AllocateOnStack",
    "KeepComputeFunctions",
    "LowerAtomics",
    "LowerKernelLaunchToLoops",
    "OutlineComputeFunction",
    "RelaxParamAlignment",
]
