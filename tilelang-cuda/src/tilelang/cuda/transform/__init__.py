"""CUDA-only passes."""

from .fragments import PlaceFragments
from .partition_parallel import PartitionParallelLoops
from .rasterize import RasterizeBlocks
from .tensor_core import LowerTensorCoreGemm

__all__ = ["LowerTensorCoreGemm", "RasterizeBlocks", "PartitionParallelLoops", "PlaceFragments"]
