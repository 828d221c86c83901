"""Tile-configuration hints (upstream's ``tilelang.carver.roller`` names): ``Hint``, the
rasterization plans, and ``policy.matmul_hints`` — a small search, not upstream's roller."""

from .hint import Hint
from .rasterization import (
    NoRasterization,
    Rasterization,
    Rasterization2DColumn,
    Rasterization2DRow,
)

__all__ = ["Hint", "NoRasterization", "Rasterization", "Rasterization2DColumn", "Rasterization2DRow"]
