"""Integer helpers upstream TileLang exports at top level (``tilelang.cdiv``,
``tilelang.next_power_of_2``), for sizes computed in Python around a kernel."""

from __future__ import annotations


def cdiv(a: int, b: int) -> int:
    """``ceil(a / b)`` for non-negative integers (``T.ceildiv`` is the in-kernel form)."""
    return (a + b - 1) // b


def next_power_of_2(x: int) -> int:
    """The smallest power of two ``>= x`` (1 for ``x <= 1``)."""
    return 1 << (x - 1).bit_length() if x > 1 else 1


__all__ = ["cdiv", "next_power_of_2"]
