"""CUDA-only passes."""

from .fragments import PlaceFragmentsInSharedMemory
from .partition_parallel import PartitionParallelLoops

__all__ = ["PartitionParallelLoops", "PlaceFragmentsInSharedMemory"]
