"""CPU-only passes."""

from .alignment import RelaxParamAlignment
from .launch_to_loops import LowerKernelLaunchToLoops

__all__ = ["LowerKernelLaunchToLoops", "RelaxParamAlignment"]
