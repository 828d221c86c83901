"""One tile configuration, with the fields of upstream's ``Hint`` that kernels read."""

from __future__ import annotations

from dataclasses import dataclass, field

from .rasterization import NoRasterization, Rasterization


@dataclass
class Hint:
    """``block``: the output tile per block ([block_M, block_N]); ``warp``: the tile per
    warp; ``rstep``: the reduction step per iteration ([block_K]); ``pipeline_stage``: copy
    stages in flight; ``use_tc``: on tensor cores; ``smem_bytes`` / ``cost``: what the search
    computed (for inspection)."""

    block: list[int] = field(default_factory=list)
    warp: list[int] = field(default_factory=list)
    rstep: list[int] = field(default_factory=list)
    pipeline_stage: int = 1
    use_tc: bool = False
    rasterization_plan: Rasterization = field(default_factory=NoRasterization)
    smem_bytes: int = 0
    cost: float = 0.0

    @property
    def threads(self) -> int:
        warps = (self.block[0] // self.warp[0]) * (self.block[1] // self.warp[1])
        return warps * 32

    def __repr__(self) -> str:
        return (f"Hint(block={self.block}, warp={self.warp}, rstep={self.rstep}, "
                f"pipeline_stage={self.pipeline_stage}, use_tc={self.use_tc}, "
                f"rasterization_plan={self.rasterization_plan})")
