"""LowerWarpOps (ROCm): core's warp-op lowering with HIP's warp functions (HIP Programming
Guide, "Warp Cross-Lane Functions"): 64-lane wavefronts, no member masks (a wavefront runs
in lockstep), a 64-bit ``__ballot``. A wavefront needs no ``__syncwarp``: ``T.sync_warp``
is the compiler's wave barrier (it keeps memory operations on their side). HIP has no
warp match functions."""

from __future__ import annotations

from typing import Any

from tilelang.plugin import FindFirstSet as _FindFirstSet
from tilelang.plugin import LowerWarpOps as _LowerWarpOps
from tilelang.plugin import WarpFunctions

from ..language.extensions import WAVEFRONT

# the op names of tilelang.language.ops (the plugin API lists functions, not constants)
HIP_WARP = WarpFunctions(
    vendor="HIP",
    warp_size=WAVEFRONT,
    functions={
        "tl.shfl_sync": "__shfl",
        "tl.shfl_xor_sync": "__shfl_xor",
        "tl.shfl_down_sync": "__shfl_down",
        "tl.shfl_up_sync": "__shfl_up",
        "tl.sync_warp": "__builtin_amdgcn_wave_barrier",
        "tl.any_sync": "__any",
        "tl.all_sync": "__all",
        "tl.ballot_sync": "__ballot",
        "tl.syncthreads_count": "__syncthreads_count",
        "tl.syncthreads_and": "__syncthreads_and",
        "tl.syncthreads_or": "__syncthreads_or",
    },
    masked=False,
    ballot_bits=64,
)


def LowerWarpOps() -> Any:
    return _LowerWarpOps(HIP_WARP, "tl.rocm.LowerWarpOps")


def FindFirstSet() -> Any:
    """``T.__ffs(x)`` as clang's ``__builtin_ffs`` / ``__builtin_ffsll`` (HIP's ``__ffsll`` is
    overloaded for signed and unsigned, so an ``int64_t`` (``long``) is ambiguous), ``x`` once
    (core's arithmetic names it three times: a ballot in it was taken three times)."""
    return _FindFirstSet("__builtin_ffs", "__builtin_ffsll", "tl.rocm.FindFirstSet")
