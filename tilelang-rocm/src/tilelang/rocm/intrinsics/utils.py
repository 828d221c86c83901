"""``tilelang.rocm.intrinsics.utils``: the sizes of one MFMA step, as upstream names them."""

from __future__ import annotations

from typing import Any

#: element types whose 16 x 16 MFMA is k32
_K32 = {"int8", "uint8", "float8_e4m3", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz"}


def get_mma_micro_size(dtype: Any) -> tuple[int, int, int]:
    """(m, n, k) of one 16 x 16 MFMA for ``dtype`` operands: k 16 for 16-bit types, 32 for
    8-bit ones (upstream's sizes)."""
    return 16, 16, 32 if str(dtype) in _K32 else 16


__all__ = ["get_mma_micro_size"]
