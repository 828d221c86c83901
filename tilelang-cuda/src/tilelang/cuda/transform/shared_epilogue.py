"""StageEpilogueInShared: a wgmma GEMM's accumulator copied straight to global memory goes
through a shared tile instead, as upstream's tuned kernels write it by hand.

``T.copy(C_local, C[...])`` from wgmma's accumulator layout stores, per thread, pairs of
columns from rows 8 apart: every warp store touches 8 rows with 8 or 16 bytes each, half of
each 32-byte sector. Through a shared tile (``T.copy(C_local, C_shared); T.copy(C_shared,
C[...])``, padded rows: epilogue.py) the global stores are whole 16-byte vectors of
consecutive columns. On the H200 (2026-12-01, benchmarks/matmul.py, same run) the kernels
written that way ran 0.963 / 0.980 of torch.mm against 0.897 / 0.972 for the direct
copy (128 x 256 x 64 tiles, 4096^3 / 8192^3), and 0.884 / 0.839 against 0.817 / 0.787 for
the canonical 128 x 128 x 32 tile. This pass makes that rewrite for a kernel that does not:
the copy's source is a GEMM accumulator (a fragment some T.gemm accumulates into), its
destination a global region of the fragment's shape, the GEMM runs on wgmma (sm_90), and the
tile fits beside the kernel's staged shared tiles (the copies of pipelined loops count once
per stage). ``tl.disable_shared_epilogue`` keeps the direct copy.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tilelang.plugin import (
    dtype_bytes,
    is_full_region,
    pass_config,
    prim_func_pass,
    static_ints,
    tile_op_name,
)
from tvm import tirx

from .mma_layout import padded_row
from .shared_memory import PLANNING_BUDGET, staged_shared_bytes
from .wgmma import on_wgmma

DISABLE_CONFIG = "tl.disable_shared_epilogue"


def _direct_copies(body: Any) -> list[Any]:
    """Copies of a whole GEMM accumulator to a global region of its shape."""
    accumulators: list[Any] = []
    copies: list[Any] = []

    def visit(stmt: Any) -> None:
        name = tile_op_name(stmt)
        if name == "gemm":
            accumulators.append(stmt.value.args[2].source)
        elif name == "copy":
            copies.append(stmt)

    tvm_ffi.structural_walk(body, (tirx.Evaluate, visit))
    found = []
    for stmt in copies:
        src, dst = stmt.value.args[0], stmt.value.args[1]
        frag = src.source
        if not any(frag.same_as(a) for a in accumulators) or frag.scope() != "local.fragment" or \
                not is_full_region(src) or dst.source.scope() != "global":
            continue
        shape = static_ints(frag.shape)
        wide = [r.extent for r in dst.region if not (isinstance(r.extent, tirx.IntImm) and r.extent.value == 1)]
        if shape is None or len(shape) != 2 or static_ints(wide) != shape:
            continue
        found.append(stmt)
    return found


def _run(func: Any) -> Any:
    if not on_wgmma(func) or pass_config(DISABLE_CONFIG):
        return func
    copies = _direct_copies(func.body)
    if not copies:
        return func
    budget = PLANNING_BUDGET - staged_shared_bytes(func.body)
    tiles: dict[Any, Any] = {}  # accumulator -> its shared tile (one per accumulator)
    rewritten: dict[Any, Any] = {}
    for stmt in copies:
        frag, dst = stmt.value.args[0].source, stmt.value.args[1]
        if frag not in tiles:
            rows, cols = static_ints(frag.shape)
            padded = padded_row(cols, dtype_bytes(dst.source.dtype))
            size = rows * padded * dtype_bytes(dst.source.dtype)
            if size > budget:
                continue  # the stages leave no room: the direct copy stays
            budget -= size
            tiles[frag] = tirx.decl_buffer([rows, cols], dst.source.dtype, name=f"{frag.name}_shared",
                                           scope="shared.dyn")
        tile = tiles[frag]
        whole = tirx.BufferRegion(tile, [tvm.ir.Range.from_min_extent(0, d) for d in tile.shape])
        call = stmt.value
        stage = tvm.ir.Call(call.op, [call.args[0], whole, *call.args[2:]], ret_ty="int32")
        store = tvm.ir.Call(call.op, [whole, dst, *call.args[2:]], ret_ty="int32")
        rewritten[stmt] = tirx.SeqStmt([tirx.Evaluate(stage), tirx.Evaluate(store)])
    if not rewritten:
        return func

    def on_seq(seq_stmt: Any) -> Any:
        out, changed = [], False
        for child in seq_stmt:
            new = next((r for old, r in rewritten.items() if old.same_as(child)), None)
            if new is not None:
                out += list(new)
                changed = True
                continue
            out.append(child)
            if isinstance(child, tirx.AllocBuffer):
                tile = next((t for f, t in tiles.items() if f.same_as(child.buffer)), None)
                if tile is not None:  # declared beside its accumulator, in the same scope
                    out.append(tirx.AllocBuffer(tile))
                    changed = True
        return tirx.SeqStmt(out) if changed else seq_stmt

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.SeqStmt, on_seq), order="post"))


def StageEpilogueInShared() -> Any:
    return prim_func_pass(lambda func, mod, ctx: _run(func), "tl.cuda.StageEpilogueInShared", per_kernel=True)


__all__ = ["DISABLE_CONFIG", "StageEpilogueInShared"]
