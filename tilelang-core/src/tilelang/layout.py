"""Layout annotations for ``T.annotate_layout`` (upstream spelling:
``T.annotate_layout({A_shared: tilelang.layout.make_swizzled_layout(A_shared)})``).

The compiler chooses layouts itself (fragments follow their instructions, shared tiles that
feed tensor cores are laid out bank-conflict free). What a kernel can ask for today is the
bank-conflict-free layout of a shared tile the compiler would otherwise keep row-major:
backends with banked shared memory (CUDA) give it one; others keep their layout, which
never changes results. Arbitrary index maps are not supported yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SwizzledLayout:
    """A bank-conflict-free layout for one 2-d shared tile."""

    buffer: Any


def make_swizzled_layout(buffer: Any) -> SwizzledLayout:
    return SwizzledLayout(buffer)


__all__ = ["SwizzledLayout", "make_swizzled_layout"]
