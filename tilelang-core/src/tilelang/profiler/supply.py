"""Input tensors for profiling, generated from a kernel's parameter list.

``TensorSupplyType`` names upstream TileLang's supply kinds; ``get_tensor_supply`` returns
a function that makes one torch tensor for a ParamInfo on a given device. torch is imported
when a tensor is made, so importing this module (``tilelang.TensorSupplyType``) stays light.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any

from ..engine.artifact import ParamInfo
from ..errors import InputSupplyError, TileLangError


class TensorSupplyType(Enum):
    """How Profiler fills input tensors (upstream's names and values)."""

    Integer = 1  # small integers in [-2, 2] ([0, 2] unsigned, {0, 1} bool)
    Uniform = 2  # U(-1, 1)
    Normal = 3  # N(-1, 1), as upstream draws it
    Randn = 4  # N(0, 1)
    Zero = 5
    One = 6
    Auto = 7  # U(-1, 1) for 16/32-bit floats, small integers otherwise


def import_torch() -> Any:
    """torch, or an error naming the extra that installs it (the profiler needs tensors)."""
    try:
        import torch
    except ImportError as err:
        raise TileLangError("the TileLang profiler and autotuner make torch tensors, but torch "
                            "is not installed; install it with `pip install 'tilelang-core[torch]'`"
                            ) from err
    return torch


def torch_dtype(dtype: str) -> Any:
    """The torch dtype spelled like a TVM dtype string ("float16", "int8", "bool", ...)."""
    torch = import_torch()
    value = getattr(torch, str(dtype), None)
    if not isinstance(value, torch.dtype):
        raise InputSupplyError(f"the profiler cannot make a torch tensor of dtype {dtype!r}: torch has "
                            "no such dtype; pass input_tensors=[...] to the profiler instead")
    return value


def concrete_shape(param: ParamInfo, symbols: Mapping[str, int] | None = None) -> list[int]:
    """The parameter's shape with symbolic dimensions replaced by ``symbols`` values."""
    if param.shape is None:
        raise InputSupplyError(f"parameter {param.name!r} is a scalar ({param.dtype}); the profiler only "
                            "generates tensors: pass input_tensors=[...] with a value for it")
    shape = []
    for dim in param.shape:
        if isinstance(dim, str):
            if not symbols or dim not in symbols:
                raise InputSupplyError(
                    f"parameter {param.name!r} has the symbolic dimension {dim!r}; the profiler "
                    f"needs its size: pass dynamic_symbolic_constraints={{{dim!r}: <int>}} "
                    "or input_tensors=[...]")
            dim = symbols[dim]
        shape.append(int(dim))
    return shape


def _small_integers(torch: Any, shape: list[int], dtype: Any, device: Any) -> Any:
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, device=device).to(dtype)
    if not dtype.is_floating_point and not dtype.is_signed:
        return torch.randint(0, 3, shape, device=device).to(dtype)
    # float8 and other narrow types are drawn as integers and converted, as torch cannot
    # sample them directly
    return torch.randint(-2, 3, shape, device=device).to(dtype)


def get_tensor_supply(supply_type: TensorSupplyType = TensorSupplyType.Integer,
                      device: Any = "cpu") -> Callable[..., Any]:
    """A function ``supply(param, symbols=None) -> torch.Tensor`` for ``supply_type``."""
    if not isinstance(supply_type, TensorSupplyType):
        raise TileLangError(f"tensor_supply_type must be a tilelang.TensorSupplyType, got {supply_type!r}; "
                            f"choose one of {[t.name for t in TensorSupplyType]}")

    def supply(param: ParamInfo, symbols: Mapping[str, int] | None = None) -> Any:
        torch = import_torch()
        shape = concrete_shape(param, symbols)
        dtype = torch_dtype(param.dtype)
        floating = dtype.is_floating_point
        kind = supply_type
        if kind is TensorSupplyType.Auto:  # 8-bit floats get integers: few values are exact there
            wide = floating and dtype.itemsize >= 2
            kind = TensorSupplyType.Uniform if wide else TensorSupplyType.Integer
        if kind is TensorSupplyType.Integer or (not floating and kind in (
                TensorSupplyType.Uniform, TensorSupplyType.Normal, TensorSupplyType.Randn)):
            return _small_integers(torch, shape, dtype, device)
        if kind is TensorSupplyType.Uniform:
            return torch.empty(shape, device=device).uniform_(-1.0, 1.0).to(dtype)
        if kind is TensorSupplyType.Normal:
            return torch.empty(shape, device=device).normal_(-1.0, 1.0).to(dtype)
        if kind is TensorSupplyType.Randn:
            return torch.randn(shape, device=device).to(dtype)
        if kind is TensorSupplyType.Zero:
            return torch.zeros(shape, device=device, dtype=dtype)
        return torch.ones(shape, device=device, dtype=dtype)

    return supply


__all__ = ["TensorSupplyType", "concrete_shape", "get_tensor_supply", "import_torch", "torch_dtype"]
