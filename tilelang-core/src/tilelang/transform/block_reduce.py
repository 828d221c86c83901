"""Rows of a tile reduced by the whole block, for GPU pipelines (LowerTileOps(cross_thread=True)).

Rows of a tile reduced by the whole block (GPU pipelines ask for it: cross_thread):
the generic form gives each row to one thread, which walks it alone (a 4096-wide
softmax row: 4096 dependent loads by one thread while the rest of the block waits);
here every thread combines a strided slice of the row and TVM's thread all-reduce
(tvm_thread_allreduce, lowered by LowerThreadAllreduce to warp shuffles and one
shared-memory stage) combines the threads. Rows go one after another, so it is taken
when rows are few and long: at most MAX_ACROSS_ROWS rows of at least the block's
thread count. Accumulating reductions (clear=False) keep the generic form, whose
destination each row's own thread reads and writes.
"""

from __future__ import annotations

from typing import Any

from tvm import tirx

from .reduce_kinds import reduce_combine, reduce_identity, reduce_operand

MAX_ACROSS_ROWS = 8  # rows reduced one after another by the whole block, at most


def across_threads(lowering: Any, s_buf: Any, s_ext: list[Any], kept: list[int], axis: int, clear: bool,
                   kind: str) -> tuple[Any, int] | None:
    """(threadIdx.x, its extent) when ``lowering`` (a TileOpLowering) may reduce this tile's
    rows with the whole block, else None (the generic one-thread-per-row form)."""
    if not lowering.cross_thread or lowering.threads is None or not clear or s_buf.scope() == "global":
        return None
    if kind not in ("sum", "max", "min", "abssum", "absmax"):
        return None
    tid, threads = lowering.threads
    rows = 1
    for a in kept:
        if not isinstance(s_ext[a], tirx.IntImm):
            return None
        rows *= int(s_ext[a].value)
    extent = s_ext[axis]
    if rows > MAX_ACROSS_ROWS or not isinstance(extent, tirx.IntImm) or int(extent.value) < threads:
        return None
    return tid, threads

def reduce_across_threads(lowering: Any, across: tuple[Any, int], src: Any, dst: Any, kind: str, axis: int,
                           kept: list[int], d_axes: list[int]) -> Any:
    """The rows one after another, each by every thread and one thread all-reduce."""
    tid, threads = across
    s_buf, s_min, s_ext = lowering.parts(src)
    d_buf, d_min, _ = lowering.parts(dst)
    dtype = d_buf.dtype
    init = reduce_identity(kind, dtype)
    n = int(s_ext[axis].value)

    def body(outer: list[Any]) -> Any:
        part, whole = lowering.local_scalar(dtype), lowering.local_scalar(dtype)
        step = lowering.fresh("r")
        j = step * threads + tid
        s_idx, d_idx = lowering.reduce_indices(s_min, d_min, kept, d_axes, outer, axis, j)
        value = reduce_operand(kind, tirx.Cast(dtype, tirx.BufferLoad(s_buf, s_idx)))
        update = tirx.BufferStore(part, reduce_combine(kind, tirx.BufferLoad(part, [0]), value), [0])
        if n % threads:
            update = tirx.IfThenElse(j < n, update, None)
        x, y = tirx.Var("x", dtype), tirx.Var("y", dtype)
        reducer = tirx.CommReducer([x], [y], [reduce_combine("max" if kind == "absmax" else
                                                             "sum" if kind == "abssum" else kind, x, y)], [init])
        allreduce = tirx.AttrStmt(reducer, "reduce_scope", tirx.reinterpret("handle", tirx.IntImm("uint64", 0)),
                                  tirx.Evaluate(tirx.tvm_thread_allreduce(
                                      tirx.IntImm("uint32", 1), tirx.BufferLoad(part, [0]), tirx.const(True),
                                      tirx.BufferLoad(whole, [0]), tid)))
        return tirx.SeqStmt([
            tirx.AllocBuffer(part),
            tirx.AllocBuffer(whole),
            tirx.BufferStore(part, init, [0]),
            tirx.For(step, 0, (n + threads - 1) // threads, tirx.ForKind.SERIAL, update),
            allreduce,
            # every thread holds the same total: each stores it (one value, whoever wins)
            tirx.BufferStore(d_buf, tirx.BufferLoad(whole, [0]), d_idx),
        ])

    return lowering.nest([s_ext[a] for a in kept], body, parallel=False)
