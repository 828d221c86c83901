"""Block rasterization plans: the order in which a 2-d grid's blocks are launched. A
panel of blocks that share A rows / B columns runs together, so their tiles hit in L2.
In a kernel: ``T.use_swizzle(panel_size, order)``."""

from __future__ import annotations


class Rasterization:
    """A launch order; ``panel_width`` is None for the plain row-major order."""

    panel_width: int | None = None

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.panel_width == other.panel_width

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.panel_width))


class NoRasterization(Rasterization):
    def __repr__(self) -> str:
        return "<NoRasterization>"


class Rasterization2DRow(Rasterization):
    """Panels of ``panel_width`` block rows, walked row by row."""

    def __init__(self, panel_width: int = 4) -> None:
        self.panel_width = panel_width

    def __repr__(self) -> str:
        return f"<Rasterization2DRow panel_width={self.panel_width}>"


class Rasterization2DColumn(Rasterization):
    """Panels of ``panel_width`` block columns, walked column by column."""

    def __init__(self, panel_width: int = 4) -> None:
        self.panel_width = panel_width

    def __repr__(self) -> str:
        return f"<Rasterization2DColumn panel_width={self.panel_width}>"
