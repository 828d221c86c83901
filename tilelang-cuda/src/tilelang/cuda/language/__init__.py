"""``from tilelang.cuda import language as T``: the common TileLang surface plus CUDA
extensions (warp shuffles and votes, block barriers); atomics are the common T.atomic_*."""

from tilelang.language import *
from tilelang.language import __all__ as _common_all

from .extensions import (
    activemask,
    all_sync,
    any_sync,
    shfl_down,
    shfl_sync,
    shfl_up,
    shfl_xor,
    sync_threads,
    sync_warp,
    warp_reduce_sum,
)

__all__ = [
    *_common_all,
    "activemask",
    "all_sync",
    "any_sync",
    "shfl_down",
    "shfl_sync",
    "shfl_up",
    "shfl_xor",
    "sync_threads",
    "sync_warp",
    "warp_reduce_sum",
]
