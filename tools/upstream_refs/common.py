"""Helpers every family's references share: seeded inputs and float64 / float32 products."""

from __future__ import annotations

from typing import Any


def randn(gen: Any, *shape: int, dtype: str = "float32") -> Any:
    import torch

    return torch.randn(*shape, generator=gen).to(getattr(torch, dtype))


def mm_ref(a: Any, b: Any, *rest: Any) -> Any:
    return (a.float() @ b.float()).to(a.dtype)


def mm64(a: Any, b: Any) -> Any:
    """a @ b in float64 (the kernels accumulate in float32: float64 is the exact sum)."""
    return a.double() @ b.double()
