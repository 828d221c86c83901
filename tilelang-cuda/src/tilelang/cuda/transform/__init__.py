"""CUDA-only passes."""

from .fragments import PlaceFragments
from .partition_parallel import PartitionParallelLoops

__all__ = ["PartitionParallelLoops", "PlaceFragments"]
