"""MergeShortKSteps: a pipelined GEMM loop whose K step spans less than 128 bytes loads
several consecutive steps into one ring stage and runs them as one step.

The canonical tile (128 x 128 x 32 fp16, 3 stages) moves 16 KiB per stage and does one
microsecond's fifth of wgmma work with it; each stage also pays an mbarrier wait, a
release, a wgmma fence/commit/wait and, on the TMA ring, a box issue per column block. On
the H200 (2026-12-01, 8192^3) that tile ran at 0.67-0.73x torch.mm with 3, 4, 6 or 8
stages and any blocks-per-SM budget, while the same kernel written with 64-deep K steps ran
at 0.83-0.90x: the per-step cost, not the ring's depth, bounds it. This pass rewrites

    for k in T.Pipelined(n, num_stages=s):
        T.copy(A[.., k * bK : k * bK + bK], As)       # As: (bM, bK)
        T.copy(B[k * bK : k * bK + bK, ..], Bs)       # Bs: (bK, bN)
        T.gemm(As, Bs, C)

into the same loop over n / f steps of f * bK (f * bK * element bytes = 128: a full 128-byte
swizzle row for TMA and wgmma), keeping the stage count. The wgmma instructions, their K
order and so the accumulated values are the same; the stages take f times the shared
memory. Only this exact shape is rewritten: the copies fill the GEMM's operand tiles,
nothing else in the kernel touches those tiles, consecutive steps read adjacent K ranges,
and f divides n. ``tl.disable_k_step_merge`` keeps the loop as written.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tilelang.plugin import (
    dtype_bytes,
    is_full_region,
    keeps_span,
    pass_config,
    prim_func_pass,
    static_ints,
    substitute,
    tile_op_name,
)
from tvm import tirx
from tvm.sym.analyzer import Analyzer

from .shared_memory import PLANNING_BUDGET, buffer_bytes, staged_shared_bytes
from .tma import free_vars
from .wgmma import on_wgmma

DISABLE_CONFIG = "tl.disable_k_step_merge"
ROW_BYTES = 128  # the widest TMA/wgmma swizzle row (PTX ISA, "Shared memory matrix layout")
MAX_FACTOR = 4


def _is_int(expr: Any, value: int) -> bool:
    return isinstance(expr, tirx.IntImm) and expr.value == value


class _Plan:
    """One loop's rewrite: its copies and GEMM, the operand tiles' K axes and the factor."""

    def __init__(self, loop: Any, analyzer: Any) -> None:
        self.loop, self.analyzer = loop, analyzer
        self.ok = self._analyze()

    def _analyze(self) -> bool:
        loop = self.loop
        body = list(loop.body) if isinstance(loop.body, tirx.SeqStmt) else []
        if len(body) != 3 or not _is_int(loop.min, 0) or [tile_op_name(s) for s in body].count("copy") != 2 or \
                tile_op_name(body[2]) != "gemm":
            return False
        copies, gemm = body[:2], body[2].value.args
        if len(gemm) != 6 or not all(_is_int(a, 0) for a in gemm[5:]):
            return False  # clear_accum or further options: keep the loop as written
        trans_a, trans_b = bool(gemm[3].value), bool(gemm[4].value)
        self.operands = []  # (tile, its K axis, the copy that fills it)
        for region, k_axis in ((gemm[0], 0 if trans_a else 1), (gemm[1], 1 if trans_b else 0)):
            tile = region.source
            fill = next((c for c in copies if c.value.args[1].source.same_as(tile)), None)
            if fill is None or not is_full_region(region) or not is_full_region(fill.value.args[1]) or \
                    len(tile.shape) != 2 or not str(tile.scope()).startswith("shared") or \
                    fill.value.args[0].source.scope() != "global":
                return False
            self.operands.append((tile, k_axis, fill))
        if self.operands[0][0].same_as(self.operands[1][0]):
            return False
        depths = {static_ints([t.shape[a]])[0] if static_ints([t.shape[a]]) else None for t, a, _ in self.operands}
        dtypes = {str(t.dtype) for t, _, _ in self.operands}
        if len(depths) != 1 or None in depths or len(dtypes) != 1:
            return False
        self.depth = depths.pop()
        step_bytes = self.depth * dtype_bytes(dtypes.pop())
        if step_bytes >= ROW_BYTES or ROW_BYTES % step_bytes:
            return False
        self.factor = min(ROW_BYTES // step_bytes, MAX_FACTOR)
        if not self.analyzer.can_prove(tirx.floormod(loop.extent, self.factor) == 0):
            return False
        return all(self._k_range(fill, k_axis) is not None for _, k_axis, fill in self.operands)

    def _k_range(self, fill: Any, tile_axis: int) -> int | None:
        """The source axis that feeds the tile's K axis, when consecutive steps read adjacent
        ranges along it and every other axis stays put."""
        src = fill.value.args[0]
        wide = [a for a, r in enumerate(src.region) if not _is_int(r.extent, 1)]
        if len(wide) != 2:
            return None
        axis = wide[tile_axis]
        k = self.loop.loop_var
        for a, r in enumerate(src.region):
            moves = any(v.same_as(k) for v in free_vars(r.min) + free_vars(r.extent))
            if a != axis and moves:
                return None
        r = src.region[axis]
        nxt = substitute(r.min, [(k, k + 1)])
        if not (_is_int(r.extent, self.depth) and self.analyzer.can_prove(nxt - r.min == self.depth)):
            return None
        return axis

    def rewrite(self) -> tuple[Any, dict[Any, Any]]:
        """The merged loop, and the operand tiles' replacements."""
        loop, f = self.loop, self.factor
        k = loop.loop_var  # reused: the old loop goes away, and step k starts at old step k * f
        tiles = {}
        for tile, k_axis, _ in self.operands:
            shape = list(tile.shape)
            shape[k_axis] = shape[k_axis] * f
            tiles[tile] = tirx.decl_buffer(shape, tile.dtype, name=tile.name, scope=tile.scope())

        def full(buffer: Any) -> Any:
            return tirx.BufferRegion(buffer, [tvm.ir.Range.from_min_extent(0, d) for d in buffer.shape])

        sources = {}  # a copy's global region -> the merged steps' region
        for tile, k_axis, fill in self.operands:
            src, axis = fill.value.args[0], self._k_range(fill, k_axis)
            sources[src] = tirx.BufferRegion(src.source, [
                tvm.ir.Range.from_min_extent(substitute(r.min, [(loop.loop_var, k * f)]),
                                             r.extent * f if a == axis else r.extent)
                for a, r in enumerate(src.region)])

        def on_region(region: Any) -> Any:
            new = next((t for old, t in tiles.items() if old.same_as(region.source)), None)
            if new is not None:
                return full(new)
            return next((merged for old, merged in sources.items() if old.same_as(region)), region)

        stmts = [tvm_ffi.structural_map(stmt, (tvm.ir.TensorRegion, on_region), order="post") for stmt in loop.body]
        merged = tirx.For(k, 0, tirx.floordiv(loop.extent, f), loop.kind, tirx.SeqStmt(stmts),
                          loop.thread_binding, loop.annotations)
        return merged, tiles


def _uses(body: Any, buffer: Any) -> int:
    found = []

    def visit(node: Any) -> None:
        source = node.buffer if isinstance(node, tirx.BufferStore) else node.source
        if isinstance(source, tirx.Buffer) and source.same_as(buffer):
            found.append(node)

    tvm_ffi.structural_walk(body, [(tirx.BufferStore, visit), (tvm.ir.TensorLoad, visit),
                                   (tvm.ir.TensorRegion, visit)])
    return len(found)


def _run(func: Any) -> Any:
    # on wgmma both TMA and cp.async rings pay per step (a wait and a block barrier for the latter)
    if not on_wgmma(func) or pass_config(DISABLE_CONFIG):
        return func
    analyzer = Analyzer()
    plans: list[_Plan] = []
    shared = staged_shared_bytes(func.body)

    def visit(loop: Any) -> None:
        if "num_stages" in (loop.annotations or {}):
            plan = _Plan(loop, analyzer)
            # the tiles serve this loop alone: two copies and the GEMM read or write each
            if not plan.ok or any(_uses(func.body, t) != 2 for t, _, _ in plan.operands):
                return
            staged = max(int(loop.annotations["num_stages"]), 1) * sum(buffer_bytes(t) for t, _, _ in plan.operands)
            if shared + (plan.factor - 1) * staged <= PLANNING_BUDGET:
                plans.append(plan)  # else the merged stages would not fit: the loop stays as written

    tvm_ffi.structural_walk(func.body, (tirx.For, visit))
    if not plans:
        return func
    loops, tiles = {}, {}
    for plan in plans:
        merged, replaced = plan.rewrite()
        loops[plan.loop] = merged
        tiles.update(replaced)

    def on_for(loop: Any) -> Any:
        return next((new for old, new in loops.items() if old.same_as(loop)), loop)

    def on_alloc(stmt: Any) -> Any:
        return next((tirx.AllocBuffer(new) for old, new in tiles.items() if old.same_as(stmt.buffer)), stmt)

    body = tvm_ffi.structural_map(func.body, [(tirx.For, keeps_span(on_for)), (tirx.AllocBuffer, on_alloc)],
                                  order="pre")
    return func.with_body(body)


def MergeShortKSteps() -> Any:
    return prim_func_pass(lambda func, mod, ctx: _run(func), "tl.cuda.MergeShortKSteps", per_kernel=True)


__all__ = ["DISABLE_CONFIG", "MergeShortKSteps"]
