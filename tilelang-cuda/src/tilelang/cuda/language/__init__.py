"""``from tilelang.cuda import language as T``: the common TileLang surface, as upstream's
``tilelang.language`` is for CUDA. Upstream's warp intrinsics (``T.shfl_*``, ``T.any_sync``,
``T.ballot*``, ``T.warp_reduce_*`` ...) and atomics are part of the common surface: core
builds neutral ops, and this backend lowers them to CUDA's warp and atomic functions
(``tilelang.cuda.transform``)."""

from tilelang.language import *
from tilelang.language import __all__ as _common_all

__all__ = list(_common_all)
