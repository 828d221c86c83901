"""LowerWarpOps (CUDA): core's warp-op lowering with CUDA's warp functions (CUDA C++
Programming Guide, "Warp Shuffle Functions", "Warp Vote Functions", "Warp Match Functions",
"Synchronization Functions"): 32 lanes, the member mask first, a 32-bit ballot (widened to
upstream's uint64). ``__match_all_sync`` reports through a pointer; ``tl_match_all_sync``
(tl_device.h) returns its value alone."""

from __future__ import annotations

from typing import Any

from tilelang.plugin import FindFirstSet as _FindFirstSet
from tilelang.plugin import LowerWarpOps as _LowerWarpOps
from tilelang.plugin import WarpFunctions

# the op names of tilelang.language.ops (the plugin API lists functions, not constants)
CUDA_WARP = WarpFunctions(
    vendor="CUDA",
    warp_size=32,
    functions={
        "tl.shfl_sync": "__shfl_sync",
        "tl.shfl_xor_sync": "__shfl_xor_sync",
        "tl.shfl_down_sync": "__shfl_down_sync",
        "tl.shfl_up_sync": "__shfl_up_sync",
        "tl.sync_warp": "__syncwarp",
        "tl.any_sync": "__any_sync",
        "tl.all_sync": "__all_sync",
        "tl.ballot_sync": "__ballot_sync",
        "tl.activemask": "__activemask",
        "tl.match_any_sync": "__match_any_sync",
        "tl.match_all_sync": "tl_match_all_sync",
        "tl.syncthreads_count": "__syncthreads_count",
        "tl.syncthreads_and": "__syncthreads_and",
        "tl.syncthreads_or": "__syncthreads_or",
        "tl.fns": "__fns",  # T.__fns: not a warp function, but CUDA's alone as they are
    },
    masked=True,
    ballot_bits=32,
)


def LowerWarpOps() -> Any:
    return _LowerWarpOps(CUDA_WARP, "tl.cuda.LowerWarpOps")


def FindFirstSet() -> Any:
    """``T.__ffs(x)`` as CUDA's ``__ffs`` / ``__ffsll`` (upstream's source has them), ``x``
    once (core's arithmetic names it three times: a ballot in it was taken three times)."""
    return _FindFirstSet("__ffs", "__ffsll", "tl.cuda.FindFirstSet")
