"""CUDA-only passes."""

from .atomics import LowerAtomics
from .fragments import PlaceFragments
from .hoist_shared_reads import HoistSharedReads
from .partition_parallel import PartitionParallelLoops
from .rasterize import RasterizeBlocks
from .shared_sync import SyncSharedWritesOfSeveralThreads
from .tensor_core import LowerTensorCoreGemm

__all__ = ["HoistSharedReads", "LowerAtomics", "LowerTensorCoreGemm", "PartitionParallelLoops", "PlaceFragments", "RasterizeBlocks",
           "SyncSharedWritesOfSeveralThreads"]
