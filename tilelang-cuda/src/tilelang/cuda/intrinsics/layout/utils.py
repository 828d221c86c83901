"""``tilelang.cuda.intrinsics.layout.utils``: the sizes of one mma.sync, as upstream names them."""

from __future__ import annotations

from typing import Any

#: element types whose mma.sync is k32 (one 32-bit register holds four of them)
_K32 = {"int8", "uint8", "float8_e4m3", "float8_e4m3fn", "float8_e5m2"}


def get_mma_micro_size(dtype: Any) -> tuple[int, int, int]:
    """(m, n, k) of the tile one warp's mma.sync steps cover for ``dtype`` operands: 16 x 16
    (two n8 instructions), k 16 for 16-bit types and 32 for 8-bit ones (upstream's sizes;
    tf32 operands use k 8, which upstream's helper does not report either)."""
    return 16, 16, 32 if str(dtype) in _K32 else 16


__all__ = ["get_mma_micro_size"]
