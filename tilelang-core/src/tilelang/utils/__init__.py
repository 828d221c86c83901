"""Upstream TileLang's ``tilelang.utils``: the tensor helpers its examples import.

``from tilelang.utils.tensor import torch_assert_close, get_tensor_supply, TensorSupplyType``
reaches the same objects as ``tilelang.testing`` and ``tilelang.profiler`` — one
implementation, upstream's import paths.
"""

from .tensor import (
    TensorSupplyType,
    get_tensor_supply,
    is_float8_dtype,
    torch_assert_close,
)

__all__ = ["TensorSupplyType", "get_tensor_supply", "is_float8_dtype", "torch_assert_close"]
