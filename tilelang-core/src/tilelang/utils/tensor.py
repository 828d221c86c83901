"""``tilelang.utils.tensor`` as upstream spells it.

The supply kinds and generator are the profiler's (``tilelang.profiler.supply``), the
tolerant comparison is the testing kit's (``tilelang.testing.upstream``); this module only
gives them upstream's import path. torch is imported when a function needs it.
"""

from __future__ import annotations

from typing import Any

from ..profiler.supply import TensorSupplyType, get_tensor_supply
from ..testing.upstream import torch_assert_close

__all__ = ["TensorSupplyType", "get_tensor_supply", "is_float8_dtype", "torch_assert_close"]


def is_float8_dtype(dtype: Any) -> bool:
    """Whether ``dtype`` (a torch dtype) is one of torch's 8-bit float types (those this
    torch build has: e4m3fn, e4m3fnuz, e5m2, e5m2fnuz, e8m0fnu)."""
    import torch

    if not isinstance(dtype, torch.dtype):
        return False
    # torch names every 8-bit float `float8_*`; checking the name covers the variants a
    # given torch version has without listing them
    return str(dtype).startswith("torch.float8_")
