"""CUDA-only passes."""

from .partition_parallel import PartitionParallelLoops

__all__ = ["PartitionParallelLoops"]
