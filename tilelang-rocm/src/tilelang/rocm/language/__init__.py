"""``from tilelang.rocm import language as T``: the common TileLang surface plus ROCm
extensions (wavefront shuffles and ballots, block barriers); atomics are the common
T.atomic_*."""

from typing import Any

import tilelang.language as _common
from tilelang.language import *
from tilelang.language import __all__ as _common_all

from .extensions import (
    WAVEFRONT,
    all_lanes,
    any_lane,
    ballot,
    lane_id,
    shfl,
    shfl_down,
    shfl_up,
    shfl_xor,
    sync_threads,
    wave_reduce_sum,
)

__all__ = [  # noqa: PLE0604 - the common names are strings too
    *_common_all,
    "WAVEFRONT",
    "all_lanes",
    "any_lane",
    "ballot",
    "lane_id",
    "shfl",
    "shfl_down",
    "shfl_up",
    "shfl_xor",
    "sync_threads",
    "wave_reduce_sum",
]


def __getattr__(name: str) -> Any:
    """Names of the common surface outside its ``__all__`` (the dtypes ``T.float16``, ...,
    and upstream names it refuses with a LanguageError) come from there too."""
    return getattr(_common, name)
