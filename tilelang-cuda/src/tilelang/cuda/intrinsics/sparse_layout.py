"""``tilelang.cuda.intrinsics.sparse_layout``: upstream TileLang's module of that name, which
its 2:4 sparse GEMM example (examples/gemm_sp) and tests import: ``GROUP_CONFIG`` (A dtype ->
(nonzeros, group)), ``get_e_factor`` (A elements one metadata element describes) and
``get_e_replicate_factor``. The metadata format is core's (``T.gemm_sp``); this module
only names it as upstream does.
"""

from __future__ import annotations

from typing import Any

import tilelang.language as T
from tilelang.plugin import sparse_e_factor, sparse_group

#: the A dtypes upstream's sparse GEMM takes -> (nonzeros, group) along K
GROUP_CONFIG: dict[Any, tuple[int, int]] = {
    dtype: sparse_group(dtype)
    for dtype in (T.float32, T.float16, T.bfloat16, T.int8, T.uint8, T.float8_e4m3fn, T.float8_e5m2)
}


def get_e_factor(a_dtype: Any, meta_dtype: Any) -> int:
    """How many elements of A (along K) one ``meta_dtype`` element of E describes."""
    return sparse_e_factor(a_dtype, meta_dtype)


def get_e_replicate_factor(a_dtype: Any) -> int:
    """How many consecutive threads of PTX's sparse ``mma.sp`` hold the same metadata value
    (its sparsity selector): 2 for 16- and 32-bit A types, 1 for 8-bit ones. ``T.gemm_sp``
    here does not issue mma.sp; the value is upstream's, for code that computes with it."""
    return 1 if T.dtype(a_dtype).bits <= 8 else 2


__all__ = ["GROUP_CONFIG", "get_e_factor", "get_e_replicate_factor"]
