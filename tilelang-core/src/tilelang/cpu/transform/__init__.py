"""CPU-only passes."""

from .launch_to_loops import LowerKernelLaunchToLoops

__all__ = ["LowerKernelLaunchToLoops"]
