"""A computation graph of PrimFuncs for the tile search (upstream's ``PrimFuncNode``,
``OutputNode``, ``Edge``), and the analysis that reads a ``TileProblem`` off a function.

The function is one written with blocks, as ``tvm.te.create_prim_func`` makes them: its
compute block's iteration variables are the spatial (``S``) and reduction (``R``) axes, its
read and write regions say which axes index which buffer dimension. A graph of several
nodes is searched at its output nodes (their producers are not fused into the tiles).
"""

from __future__ import annotations

from typing import Any

from ...errors import LanguageError
from .policy.default import Access, TileProblem

_SPATIAL, _REDUCE = 0, 2  # tirx.IterVar kinds: data-parallel, commutative reduction


def _blocks(func: Any) -> list[Any]:
    import tvm_ffi

    found: list[Any] = []
    tvm_ffi.structural_walk(func.body, (object, lambda n: found.append(n) if type(n).__name__ == "SBlock"
                                        and len(n.iter_vars) else None))
    return found


def _axes_of(expr: Any, axes: dict[Any, int]) -> tuple[int, ...]:
    import tvm_ffi
    from tvm import tirx

    used: list[int] = []
    tvm_ffi.structural_walk(expr, (tirx.Var, lambda v: used.append(axes[v]) if v in axes else None))
    return tuple(sorted(set(used)))


def analyze_prim_func(func: Any, name: str = "main") -> TileProblem:
    """The TileProblem of ``func``'s last compute block with a reduction axis, else its last
    block. LanguageError for a function without blocks or with axes of unknown extent."""
    blocks = _blocks(func)
    if not blocks:
        raise LanguageError(f"tilelang.carver: {name!r} has no compute block to tile; describe the computation "
                            "with tvm.te (te.compute, te.create_prim_func) or a tilelang.carver template")
    # the last block with a reduction (a GEMM, not its cast epilogue), else the last
    block = next((b for b in reversed(blocks) if any(int(iv.iter_type) == _REDUCE for iv in b.iter_vars)),
                 blocks[-1])
    kinds = [int(iv.iter_type) for iv in block.iter_vars]
    if any(kind not in (_SPATIAL, _REDUCE) for kind in kinds):
        raise LanguageError(f"tilelang.carver: block {block.name_hint!r} of {name!r} has an axis that is neither "
                            "spatial nor a reduction (kinds S and R are tiled)")
    ordered = [iv for iv in block.iter_vars if int(iv.iter_type) == _SPATIAL]
    ordered += [iv for iv in block.iter_vars if int(iv.iter_type) == _REDUCE]
    extents = []
    for iv in ordered:
        extent = iv.dom.extent
        if not hasattr(extent, "value"):
            raise LanguageError(f"tilelang.carver: axis {iv.var} of block {block.name_hint!r} has extent "
                                f"{extent}; the tile search needs constant extents")
        extents.append(int(extent.value))
    axes = {iv.var: i for i, iv in enumerate(ordered)}
    spatial_count = sum(1 for k in kinds if k == _SPATIAL)

    def accesses(regions: Any) -> tuple[Access, ...]:
        return tuple(Access(str(r.source.name), str(r.source.dtype),
                            tuple(_axes_of(rng.min, axes) for rng in r.region)) for r in regions)

    return TileProblem(spatial=tuple(extents[:spatial_count]), reduce=tuple(extents[spatial_count:]),
                       reads=accesses(block.reads), writes=accesses(block.writes), name=name)


def gemm_tags(problem: TileProblem) -> dict[str, Any] | None:
    """The GEMM a problem is, or None: one reduction axis k, the innermost spatial axes i and
    j, a read indexed by (i, k) and one by (j, k) in either order (batch axes allowed)."""
    from .hint import IntrinInfo

    if len(problem.reduce) != 1 or len(problem.spatial) < 2 or len(problem.reads) < 2 or not problem.writes:
        return None
    i, j, k = len(problem.spatial) - 2, len(problem.spatial) - 1, len(problem.spatial)

    def uses(access: Access) -> set[int]:
        return {a for dim in access.dims for a in dim}

    def operand(row: int) -> Access | None:
        return next((r for r in problem.reads if {row, k} <= uses(r) and ({i, j} - {row}).isdisjoint(uses(r))), None)

    a, b = operand(i), operand(j)
    if a is None or b is None or a is b:
        return None
    trans_b = k in b.dims[-1]  # B stored (N, K)
    return {"tensorcore_config": [i, j], "gemm": (problem.spatial[i], problem.spatial[j], problem.reduce[0]),
            "batch": problem.spatial[:i],
            "intrin_info": IntrinInfo(a.dtype, problem.writes[0].dtype, trans_b=trans_b,
                                      trans_a=i in a.dims[-1])}


class Edge:
    """Output ``src_id`` of ``src_node`` feeds input ``dst_id`` of ``dst_node``."""

    def __init__(self, src_node: Any, dst_node: Any, src_id: int, dst_id: int) -> None:
        self.src_node, self.dst_node, self.src_id, self.dst_id = src_node, dst_node, src_id, dst_id

    def __repr__(self) -> str:
        return f"Edge({self.src_node.name}[{self.src_id}] -> {self.dst_node.name}[{self.dst_id}])"


class PrimFuncNode:
    """One function of the graph, analysed on construction."""

    def __init__(self, prim_func: Any, name: str = "PrimFuncNode", tags: dict[str, Any] | None = None) -> None:
        self.prim_func, self.name = prim_func, name
        self.problem = analyze_prim_func(prim_func, name)
        self.tags = dict(tags or {})
        self._in_edges: dict[int, Edge] = {}
        self._out_edges: list[Edge] = []

    def set_inputs(self, index: int, edge: Edge) -> None:
        self._in_edges[index] = edge

    @property
    def inputs(self) -> list[Edge]:
        return [self._in_edges[i] for i in sorted(self._in_edges)]

    @property
    def outputs(self) -> list[Edge]:
        return list(self._out_edges)

    def is_output(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"PrimFuncNode({self.name}: spatial {list(self.problem.spatial)}, reduce {list(self.problem.reduce)})"


class OutputNode:
    """Marks output ``id`` of ``node`` as an output of the graph."""

    def __init__(self, node: PrimFuncNode, id: int = 0) -> None:
        self.node, self.id, self.name = node, id, f"output({node.name})"

    def is_output(self) -> bool:
        return True
