"""One tile configuration (``Hint``), with the fields of upstream's ``Hint`` that kernels and
scripts read, and the tensor-core description a tagged GEMM carries (``IntrinInfo``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .rasterization import NoRasterization, Rasterization


@dataclass
class IntrinInfo:
    """The tensor-core instruction a GEMM-shaped function maps to: operand and accumulator
    dtypes, whether B is stored transposed (N, K), and the layout transforms of the input
    and the weight (0: none; upstream's ``input_transform_kind`` / ``weight_transform_kind``)."""

    in_dtype: str
    out_dtype: str
    trans_b: bool
    input_transform_kind: int = 0
    weight_transform_kind: int = 0
    trans_a: bool = False

    def __post_init__(self) -> None:
        self.in_dtype, self.out_dtype = str(self.in_dtype), str(self.out_dtype)

    @property
    def is_input_8bit(self) -> bool:
        from tvm import DataType

        return DataType(self.in_dtype).bits == 8

    @property
    def smooth_a(self) -> bool:
        return self.input_transform_kind >= 2

    @property
    def smooth_b(self) -> bool:
        return self.weight_transform_kind >= 2

    @property
    def inter_transform_a(self) -> bool:
        return self.input_transform_kind >= 1

    @property
    def inter_transform_b(self) -> bool:
        return self.weight_transform_kind >= 1

    def __repr__(self) -> str:
        return (f"<IntrinInfo, in_dtype={self.in_dtype}, out_dtype={self.out_dtype}, trans_a={self.trans_a}, "
                f"trans_b={self.trans_b}, input_transform_kind={self.input_transform_kind}, "
                f"weight_transform_kind={self.weight_transform_kind}>")


@dataclass
class Hint:
    """``block``: the output tile per block (one entry per spatial axis; [block_M, block_N]
    for a GEMM); ``thread``: threads per block along those axes (GPU; all 1 on a CPU);
    ``warp``: the tile per warp (tensor-core GEMMs); ``rstep``: the reduction step per
    iteration, one entry per reduction axis ([block_K]); ``reduce_thread``: threads that
    split the reduction (their partial results are combined, ``block_reduction_depth`` of
    them); ``step``: elements each thread handles along each spatial axis; ``vectorize``:
    buffer -> vector width of its accesses; ``pipeline_stage``: copy stages in flight
    (``use_async``: with asynchronous copies); ``use_tc``: on tensor cores, with
    ``intrin_info``; ``smem_bytes`` / ``cost``: what the search computed (for inspection)."""

    block: list[int] = field(default_factory=list)
    warp: list[int] = field(default_factory=list)
    rstep: list[int] = field(default_factory=list)
    pipeline_stage: int = 1
    use_tc: bool = False
    rasterization_plan: Rasterization = field(default_factory=NoRasterization)
    smem_bytes: int = 0
    cost: float = 0.0
    thread: list[int] = field(default_factory=list)
    step: list[int] = field(default_factory=list)
    reduce_thread: list[int] = field(default_factory=list)
    vectorize: dict[str, int] = field(default_factory=dict)
    use_async: bool = False
    block_reduction_depth: int | None = None
    intrin_info: IntrinInfo | None = None
    arch: Any = field(default=None, repr=False, compare=False)

    @property
    def threads(self) -> int:
        """Threads per block: the warp split of a tensor-core tile, else ``thread`` times
        ``reduce_thread``."""
        if self.warp and self.block and len(self.warp) == len(self.block[-2:]):
            warps = (self.block[-2] // self.warp[0]) * (self.block[-1] // self.warp[1])
            return warps * 32
        count = 1
        for extent in [*self.thread, *self.reduce_thread]:
            count *= extent
        return count

    def to_dict(self) -> dict[str, Any]:
        """The fields a kernel template reads (upstream's ``Hint.to_dict``)."""
        out: dict[str, Any] = {"block": list(self.block), "rstep": list(self.rstep)}
        if self.use_tc:
            out["warp"] = list(self.warp)
            out["use_tc"] = True
        else:
            out["thread"] = list(self.thread)
        if self.reduce_thread:
            out["reduce_thread"] = list(self.reduce_thread)
        if self.step:
            out["step"] = list(self.step)
        if self.vectorize:
            out["vectorize"] = dict(self.vectorize)
        if self.pipeline_stage != 1:
            out["pipeline_stage"] = self.pipeline_stage
        if self.block_reduction_depth is not None:
            out["block_reduction_depth"] = self.block_reduction_depth
        return out

    def __repr__(self) -> str:
        return f"Hint({self.to_dict()}, rasterization_plan={self.rasterization_plan})"
