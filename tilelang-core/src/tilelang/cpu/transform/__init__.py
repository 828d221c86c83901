"""CPU-only passes."""

from .alignment import RelaxParamAlignment
from .atomics import LowerAtomics
from .bf16_round import RoundBF16Stores
from .bool_compare import LegalizeBoolCompare
from .compute_function import (
    AllocateOnStack,
    KeepComputeFunctions,
    OutlineComputeFunction,
)
from .device_attrs import NameTheCpuDevice
from .dtypes import RefuseNarrowFloats
from .extern_calls import CheckExternCalls
from .float_minmax import LegalizeFloatMinMax
from .fp8 import ComputeFp8
from .gemm import LowerGemmToMicroKernels
from .launch_to_loops import LowerKernelLaunchToLoops
from .local_allocations import PlaceLocalAllocations
from .thread_loops import RefuseForeignThreadLoops
from .warp_roles import LowerWarpRoles

__all__ = [
    "AllocateOnStack",
    "CheckExternCalls",
    "ComputeFp8",
    "KeepComputeFunctions",
    "LegalizeBoolCompare",
    "LegalizeFloatMinMax",
    "LowerAtomics",
    "LowerGemmToMicroKernels",
    "LowerKernelLaunchToLoops",
    "LowerWarpRoles",
    "NameTheCpuDevice",
    "OutlineComputeFunction",
    "PlaceLocalAllocations",
    "RefuseForeignThreadLoops",
    "RefuseNarrowFloats",
    "RelaxParamAlignment",
    "RoundBF16Stores",
]
