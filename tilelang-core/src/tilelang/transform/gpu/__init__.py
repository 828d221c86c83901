"""GPU-neutral lowering that every GPU backend composes: T.Parallel nests dealt to a block's
threads in vectors (``PartitionParallelLoops(max_vector_bytes)``), fragments placed in
registers or shared memory (``PlaceFragments``), the barriers TVM's ThreadSync misses
(``SyncSharedWritesOfSeveralThreads``, ``HoistSharedReads``), block rasterization
(``RasterizeBlocks``) and atomics lowered to a dialect's functions given as data
(``LowerAtomics(AtomicFunctions(...))``), and warp shuffles, votes and reductions lowered to
a dialect's functions over its warp size (``LowerWarpOps(WarpFunctions(...))``), and
``T.__ffs`` as a dialect's find-first-set functions (``FindFirstSet``). Nothing here knows a vendor: what differs
between GPUs is a parameter the backend passes. The IR helpers (``ir_util``,
``fragments``) are shared with the backends' own instruction-selection passes;
``gpu_block_passes`` is the whole run, in order, that a GPU pipeline splices in.
"""

from .atomics import AtomicFunctions, LowerAtomics
from .block_passes import gpu_block_passes
from .find_first_set import FindFirstSet
from .fragments import FRAGMENT_SCOPE, PlaceFragments
from .hoist_shared_reads import HoistSharedReads
from .partition_parallel import ALIGNMENT_ATTR, PartitionParallelLoops
from .rasterize import RasterizeBlocks
from .shared_sync import SyncSharedWritesOfSeveralThreads
from .warp_ops import LowerWarpOps, WarpFunctions

__all__ = [
    "ALIGNMENT_ATTR",
    "FRAGMENT_SCOPE",
    "AtomicFunctions",
    "FindFirstSet",
    "HoistSharedReads",
    "LowerAtomics",
    "LowerWarpOps",
    "PartitionParallelLoops",
    "PlaceFragments",
    "RasterizeBlocks",
    "SyncSharedWritesOfSeveralThreads",
    "WarpFunctions",
    "gpu_block_passes",
]
