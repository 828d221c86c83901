"""RasterizeBlocks: ``T.use_swizzle(panel_size, order)`` on the GPU (the request is the
function attribute LowerTileOps leaves; this runs after the passes that reason about
block-index ranges, since it only renames the block indices).

Blocks are launched in linear order id = by * gx + bx. Without rasterization the blocks
that run together cover one or two rows of C's tiles and every column, so each needs a
different tile of B. With it, the launch walks panels of ``panel_size`` block rows, and
inside a panel goes down a column first: blocks that run together share a few tiles of
A and B in the L2 cache. The mapping is a bijection on the grid (the last panel may be
shorter); ``order="col"`` swaps the roles of x and y.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx

from ...backend.pass_pipeline import prim_func_pass
from ..lower_tile_ops import BLOCK_SWIZZLE_ATTR


def _remap(bx: Any, by: Any, gx: Any, gy: Any, panel: int) -> tuple[Any, Any]:
    """(new bx, new by) for panels of ``panel`` rows of blocks, column-major inside."""
    linear = by * gx + bx
    span = panel * gx
    index, offset = tirx.floordiv(linear, span), tirx.floormod(linear, span)
    rows = tirx.min(tirx.IntImm(str(gy.ty), panel), gy - index * panel)
    return tirx.floordiv(offset, rows), index * panel + tirx.floormod(offset, rows)


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    request = func.attrs.get(BLOCK_SWIZZLE_ATTR) if func.attrs else None
    if request is None:
        return func
    panel, order = (int(v) for v in request)
    body = func.body

    def on_attr(stmt: Any) -> Any:
        if stmt.attr_key != "thread_extent" or stmt.node.thread_tag != "blockIdx.x":
            return stmt
        # find blockIdx.y directly inside or around: rewrite below the inner one
        inner = stmt.body
        if not (isinstance(inner, tirx.AttrStmt) and inner.attr_key == "thread_extent"
                and inner.node.thread_tag == "blockIdx.y"):
            return stmt
        bx, gx = stmt.node.var, stmt.value
        by, gy = inner.node.var, inner.value
        if order == 1:  # "col": panels of block columns
            new_by, new_bx = _remap(by, bx, gy, gx, panel)
        else:
            new_bx, new_by = _remap(bx, by, gx, gy, panel)
        sbx, sby = tirx.Var("bx_raster", bx.ty), tirx.Var("by_raster", by.ty)

        def on_var(var: Any) -> Any:
            return sbx if var.same_as(bx) else sby if var.same_as(by) else var

        rest = tvm_ffi.structural_map(inner.body, (tirx.Var, on_var), order="post")
        rest = tirx.SeqStmt([tirx.Bind(sbx, new_bx), tirx.Bind(sby, new_by), rest])
        return tirx.AttrStmt(stmt.node, stmt.attr_key, stmt.value,
                             tirx.AttrStmt(inner.node, inner.attr_key, inner.value, rest))

    return func.with_body(tvm_ffi.structural_map(body, (tirx.AttrStmt, on_attr), order="pre"))


def RasterizeBlocks() -> Any:
    return prim_func_pass(_run, "tl.gpu.RasterizeBlocks")
