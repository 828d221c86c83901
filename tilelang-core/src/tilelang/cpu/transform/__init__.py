"""CPU-only passes."""

from .launch_to_loops import LowerKernelLaunchToLoops
from .storage import LowerScopesToCPU

__all__ = ["LowerKernelLaunchToLoops", "LowerScopesToCPU"]
