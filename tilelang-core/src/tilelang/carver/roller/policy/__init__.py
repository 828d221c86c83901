"""Tile searches (upstream's ``DefaultPolicy`` and ``TensorCorePolicy`` names; not its
roller): ``default.default_hints`` for any spatial/reduction nest, ``matmul.matmul_hints``
for GEMMs on matrix units.

    policy = TensorCorePolicy.from_prim_func(func, arch=arch, tags=tags)   # or DefaultPolicy
    hints = policy.emit_config(topk=10)
"""

from __future__ import annotations

from typing import Any

from ..hint import Hint
from .default import Access, TileProblem, default_hints
from .matmul import matmul_hints


class DefaultPolicy:
    """Tiles for a function's (or a graph's output's) loop nest, ranked for ``arch``."""

    def __init__(self, problem: TileProblem, arch: Any, tags: dict[str, Any] | None = None) -> None:
        self.problem, self.arch, self.tags = problem, arch, dict(tags or {})

    @classmethod
    def from_prim_func(cls, func: Any, arch: Any, tags: dict[str, Any] | None = None,
                       name: str = "PrimFuncNode") -> DefaultPolicy:
        from ..node import analyze_prim_func

        return cls(analyze_prim_func(func, name), arch, tags)

    @classmethod
    def from_output_nodes(cls, nodes: list[Any], arch: Any, tags: dict[str, Any] | None = None) -> DefaultPolicy:
        """The graph's first output node's function (producers are not fused into its tiles)."""
        if not nodes:
            from ...errors import LanguageError

            raise LanguageError("tilelang.carver: from_output_nodes needs at least one OutputNode")
        node = nodes[0].node
        return cls(node.problem, arch, {**node.tags, **(tags or {})})

    def emit_config(self, topk: int = 10) -> list[Hint]:
        return default_hints(self.problem, self.arch, topk)


class TensorCorePolicy(DefaultPolicy):
    """GEMM tiles on the device's matrix units where the tags describe a GEMM
    (``tilelang.carver.utils.get_tensorized_func_and_tags``), else the default search."""

    def emit_config(self, topk: int = 10) -> list[Hint]:
        from ..node import gemm_tags

        tags = self.tags if self.tags.get("gemm") else gemm_tags(self.problem)
        if not tags:
            return super().emit_config(topk)
        M, N, K = tags["gemm"]
        info = tags["intrin_info"]
        accum = "int32" if info.is_input_8bit and info.in_dtype.startswith(("int", "uint")) else "float32"
        hints = matmul_hints(M, N, K, info.in_dtype, accum, self.arch, topk)
        batch = list(tags.get("batch", ()))
        for hint in hints:
            hint.block, hint.intrin_info, hint.arch = [1] * len(batch) + hint.block, info, self.arch
            hint.use_async = hint.pipeline_stage > 1
        return hints


__all__ = ["Access", "DefaultPolicy", "TensorCorePolicy", "TileProblem", "default_hints", "matmul_hints"]
