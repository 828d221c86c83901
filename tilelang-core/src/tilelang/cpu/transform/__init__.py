"""CPU-only passes."""

from .alignment import RelaxParamAlignment
from .atomics import LowerAtomics
from .bool_compare import LegalizeBoolCompare
from .compute_function import (
    AllocateOnStack,
    KeepComputeFunctions,
    OutlineComputeFunction,
)
from .dtypes import RefuseNarrowFloats
from .launch_to_loops import LowerKernelLaunchToLoops

__all__ = [
    "AllocateOnStack",
    "KeepComputeFunctions",
    "LegalizeBoolCompare",
    "LowerAtomics",
    "LowerKernelLaunchToLoops",
    "OutlineComputeFunction",
    "RefuseNarrowFloats",
    "RelaxParamAlignment",
]
