"""Rows of a tile reduced by the whole block, for GPU pipelines (LowerTileOps(cross_thread=True)).

The generic form gives each row to one thread, which walks it alone (a 4096-wide softmax
row: 4096 dependent loads by one thread while the rest of the block waits). Two forms
here let every thread combine a strided slice of a row instead:

* **grouped** — a tile of R > 1 rows whose block splits into R groups of G threads, G a
  power-of-two multiple of the 32-lane warp (8 rows x 32, 4 x 64, 2 x 128): all rows at
  once, thread t on row t // G, columns t % G, t % G + G, ...; butterfly shuffles
  (TVM's tvm_warp_shuffle_xor, so every lane ends with its warp's total), then, when a
  group spans W > 1 warps, one shared stage of W values per row that every thread of
  the group reads. No barrier at all when G is one warp, one otherwise, whatever R is.
  A group reads its row wherever the row lies, so a fragment in registers (below) would
  go to shared memory for it: such a fragment takes the form in its own layout instead
  (the benchmark families' softmax and rmsnorm of 2-8 rows a block kept 8-32 KiB of
  shared memory a block for it).
  TVM's tvm_thread_allreduce cannot do this: LowerThreadAllreduce reduces over whole
  thread dimensions (its reduce set is thread IterVars, the rest are groups), and the
  block has threadIdx.x alone.
* **one row after another** — each row by every thread and one tvm_thread_allreduce
  (LowerThreadAllreduce: warp shuffles and a shared-memory stage with barriers, per row):
  the single row, and few rows whose block does not split into warp groups.

* **in the fragment's own layout** — a fragment whose element accesses are all T.Parallel
  nests over its shape at their own indices stays in registers (gpu/fragments.py), thread
  t holding points t, t + T, ... of it. Its rows are reduced where they lie: a T.Parallel
  nest over the whole fragment adds each of the thread's points into its partial of that
  point's row (the same points as every other nest over it, so the fragment stays in
  registers), then every row's partials are combined over the block at once: butterfly
  shuffles per row, one shared stage of a value per warp and row, one barrier. Whatever
  points a thread holds, the partials of a row add up to the row. Every thread ends with
  every row's total: a per-thread destination gets all of them, any other each row once
  (a T.Parallel nest over the rows). Taken for rows of at least T elements (every thread
  holds some of each row; the fragment's points a multiple of T) where the grouped form is
  not, for more rows than go one after another (upstream's rms_norm of a 32 x 2048
  fragment on 128 threads: before, the generic form, which put the 256 KiB fragment in
  shared memory, more than a block has) or for few rows of at most 64 elements a thread.

Each is taken for long rows (at least as many elements as threads reduce one row)
cleared by the reduction: accumulating reductions (clear=False) keep the generic form,
whose destination each row's own thread reads and writes. The grouped form writes a row's
total from that row's threads only, so its destination must be one that every thread
reads in common (a fragment, which PlaceFragments puts in shared memory since the
reduction writes it outside a T.Parallel nest, or shared memory); a per-thread ``local``
destination, where every thread needs every row, goes one row after another.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import tvm
import tvm_ffi
from tvm import tirx

from .reduce_kinds import reduce_combine, reduce_identity, reduce_operand

MAX_ACROSS_ROWS = 8  # rows reduced one after another by the whole block, at most
MAX_OWN_ROWS = 64  # rows reduced in a fragment's own layout, at most (a partial and shuffles per row)
OWN_PER_THREAD = 64  # elements per thread below which a few rows are reduced in registers too
WARP = 32  # lanes a shuffle spans (a width-32 shuffle stays in 32-lane segments on wider warps)
_SHUFFLED_TYPES = ("float16", "float32", "float64", "int32", "uint32", "int64", "uint64")


class Across(NamedTuple):
    """How the block reduces a tile's rows: ``tid`` (threadIdx.x) of ``threads``, ``group``
    threads per row (== ``threads``: one row after another); ``own``: in the fragment's
    own register layout (all rows at once)."""

    tid: Any
    threads: int
    group: int
    own: bool = False


def across_threads(lowering: Any, s_buf: Any, s_ext: list[Any], kept: list[int], axis: int, clear: bool,
                   kind: str, d_buf: Any) -> Across | None:
    """How ``lowering`` (a TileOpLowering) may reduce this tile's rows with the block, or
    None (the generic one-thread-per-row form)."""
    if not lowering.cross_thread or lowering.threads is None or not clear or s_buf.scope() == "global":
        return None
    if kind not in ("sum", "max", "min", "abssum", "absmax", "max_nan", "min_nan", "absmax_nan"):
        return None
    tid, threads = lowering.threads
    rows = 1
    for a in kept:
        if not isinstance(s_ext[a], tirx.IntImm):
            return None
        rows *= int(s_ext[a].value)
    extent = s_ext[axis]
    if not isinstance(extent, tirx.IntImm):
        return None
    n = int(extent.value)
    # in registers where the one-after-another form would not be taken, or where the thread's
    # share of the fragment is small enough for registers anyway
    # (points dealt evenly: a thread past the end would add the clamped last point again;
    # whole warps: a block of 48 threads has a warp of 16 lanes, which a 32-lane butterfly
    # reads past, and one warp's total is not the block's)
    own = n >= threads and threads % WARP == 0 and rows <= MAX_OWN_ROWS and (rows * n) % threads == 0 and \
        str(d_buf.dtype) in _SHUFFLED_TYPES and (rows > MAX_ACROSS_ROWS or rows * n <= OWN_PER_THREAD * threads)
    group = _group(rows, threads)
    if group is not None and n >= group and d_buf.scope() not in ("local", "local.var") \
            and str(d_buf.dtype) in _SHUFFLED_TYPES:
        # the grouped form reads a row by its group's threads, not where the fragment's own
        # layout holds it: a fragment in registers would go to shared memory for it
        if own and in_register_layout(lowering, s_buf, s_ext):
            return Across(tid, threads, threads, own=True)
        return Across(tid, threads, group)
    if own and in_register_layout(lowering, s_buf, s_ext):
        return Across(tid, threads, threads, own=True)
    if rows > MAX_ACROSS_ROWS or n < threads:
        return None
    return Across(tid, threads, threads)


def in_register_layout(lowering: Any, s_buf: Any, s_ext: list[Any]) -> bool:
    """Whether the reduction reads the whole of a fragment that stays in registers: its
    element accesses in the kernel are T.Parallel nests over its shape at their own
    indices, and no tile op but copies, fills and reductions takes it (a GEMM's
    accumulator has the tensor-core layout)."""
    from .gpu.fragments import FRAGMENT_SCOPE, own_nests_but_unit_axes

    if s_buf.scope() != FRAGMENT_SCOPE or len(s_ext) != len(s_buf.shape) or \
            any(not isinstance(e, tirx.IntImm) or not isinstance(d, tirx.IntImm) or e.value != d.value
                for e, d in zip(s_ext, s_buf.shape)):
        return False
    body = lowering.body
    users: list[str] = []

    def visit(call: Any) -> None:
        name = str(getattr(call.op, "name", ""))
        if name.startswith("tl.") and any(getattr(a, "source", None) is not None and a.source.same_as(s_buf)
                                          for a in call.args):
            users.append(name)

    tvm_ffi.structural_walk(body, (tvm.ir.Call, visit))
    return all(u in ("tl.copy", "tl.fill", "tl.reduce") for u in users) and own_nests_but_unit_axes(body, s_buf)


def _group(rows: int, threads: int) -> int | None:
    """Threads per row when ``threads`` split into ``rows`` groups of a power-of-two number
    of whole warps (shuffles stay inside a group), else None."""
    if rows < 2 or threads % rows:
        return None
    group = threads // rows
    warps = group // WARP
    if group % WARP or warps & (warps - 1):
        return None
    return group


def reduce_across_threads(lowering: Any, across: Across, src: Any, dst: Any, kind: str, axis: int,
                          kept: list[int], d_axes: list[int]) -> Any:
    if across.own:
        return _reduce_in_own_layout(lowering, across, src, dst, kind, axis, kept, d_axes)
    if across.group < across.threads:
        return _reduce_in_groups(lowering, across, src, dst, kind, axis, kept, d_axes)
    return _reduce_rows_in_turn(lowering, across, src, dst, kind, axis, kept, d_axes)


def _combiner(kind: str) -> str:
    """How partial results combine (an abs kind's partials are already magnitudes)."""
    return {"absmax": "max", "abssum": "sum", "absmax_nan": "max_nan"}.get(kind, kind)


def _fold(values: list[Any], combine: str, acc: Any) -> tuple[list[Any], Any]:
    """(statements, the expression of ``values`` combined in order). A combine that reads an
    operand more than once (the ``*_nan`` kinds: a select over both) folds them through
    ``acc``, a one-element local buffer, a statement at a time: nested, the total of 8
    warps held 3^7 copies of the first value (a 2.5 MB kernel source for 4 rows of 256
    halves on 256 threads, a minute to lower and another for nvcc). Others nest."""
    if not combine.endswith("_nan"):
        total = values[0]
        for value in values[1:]:
            total = reduce_combine(combine, total, value)
        return [], total
    stmts = [tirx.BufferStore(acc, values[0], [0])]
    stmts += [tirx.BufferStore(acc, reduce_combine(combine, tirx.BufferLoad(acc, [0]), value), [0])
              for value in values[1:]]
    return stmts, tirx.BufferLoad(acc, [0])


def _partial(lowering: Any, src: Any, kind: str, axis: int, kept: list[int], d_axes: list[int], dst: Any,
             outer: list[Any], lane: Any, stride: int) -> tuple[Any, list[Any], list[Any]]:
    """(this thread's partial result buffer, the statements that compute it, the destination
    index): elements lane, lane + stride, ... of the row at ``outer``."""
    s_buf, s_min, s_ext = lowering.parts(src)
    d_buf, d_min, _ = lowering.parts(dst)
    dtype = d_buf.dtype
    n = int(s_ext[axis].value)
    part = lowering.local_scalar(dtype)
    step = lowering.fresh("r")
    j = step * stride + lane
    s_idx, d_idx = lowering.reduce_indices(s_min, d_min, kept, d_axes, outer, axis, j)
    value = reduce_operand(kind, tirx.Cast(dtype, tirx.BufferLoad(s_buf, s_idx)))
    update = tirx.BufferStore(part, reduce_combine(kind, tirx.BufferLoad(part, [0]), value), [0])
    if n % stride:
        update = tirx.IfThenElse(j < n, update, None)
    stmts = [
        tirx.AllocBuffer(part),
        tirx.BufferStore(part, reduce_identity(kind, dtype), [0]),
        tirx.For(step, 0, (n + stride - 1) // stride, tirx.ForKind.SERIAL, update),
    ]
    return part, stmts, d_idx


def _reduce_in_groups(lowering: Any, across: Across, src: Any, dst: Any, kind: str, axis: int,
                      kept: list[int], d_axes: list[int]) -> Any:
    """All rows at once, row g by threads g * G .. g * G + G - 1."""
    tid, threads, group, _ = across
    _, _, s_ext = lowering.parts(src)
    d_buf = dst.source
    dtype = d_buf.dtype
    combine = _combiner(kind)
    row = tirx.floordiv(tid, group)
    outer, inner = [], 1  # the row's index on each kept axis, the last one fastest
    for a in reversed(kept):
        extent = int(s_ext[a].value)
        index = row if inner == 1 else tirx.floordiv(row, inner)
        outer.insert(0, tirx.floormod(index, extent) if inner * extent < threads // group else index)
        inner *= extent
    part, stmts, d_idx = _partial(lowering, src, kind, axis, kept, d_axes, dst, outer, tirx.floormod(tid, group),
                                  group)
    mask = tirx.decl_buffer((1,), "uint32", name=f"mask{lowering.counter}", scope="local")
    stmts += [tirx.AllocBuffer(mask),
              tirx.BufferStore(mask, tirx.call_intrin("uint32", "tirx.tvm_warp_activemask"), [0])]
    other = lowering.local_scalar(dtype)
    stmts.append(tirx.AllocBuffer(other))
    stmts += _butterfly(mask, part, other, dtype, combine)  # every lane: its warp's total
    total: Any = tirx.BufferLoad(part, [0])
    warps = group // WARP
    if warps > 1:
        # one value per warp through shared memory; ThreadSync puts the barrier between the
        # lane-0 writes and the reads (and before a later reduction overwrites them)
        staging = tirx.decl_buffer((threads // WARP,), dtype, name=f"row_partials{lowering.counter}",
                                   scope="shared")
        first = row * warps
        lowering.compiler_shared.append(staging.name)
        stmts += [tirx.AllocBuffer(staging),
                  tirx.IfThenElse(tirx.floormod(tid, WARP) == 0,
                                  tirx.BufferStore(staging, total, [tirx.floordiv(tid, WARP)]), None)]
        # the same order in every thread: one total per row (the thread's partial is in
        # shared memory now, so its buffer may take the running total)
        folded, total = _fold([tirx.BufferLoad(staging, [first + w]) for w in range(warps)], combine, part)
        stmts += folded
    # every thread of the group holds the same total: each stores it (one value, whoever wins)
    stmts.append(tirx.BufferStore(d_buf, total, d_idx))
    return tirx.SeqStmt(stmts)


def _reduce_rows_in_turn(lowering: Any, across: Across, src: Any, dst: Any, kind: str, axis: int,
                         kept: list[int], d_axes: list[int]) -> Any:
    """The rows one after another, each by every thread and one thread all-reduce."""
    tid, threads, _, _ = across
    s_ext = lowering.parts(src)[2]
    d_buf = dst.source
    dtype = d_buf.dtype

    def body(outer: list[Any]) -> Any:
        part, stmts, d_idx = _partial(lowering, src, kind, axis, kept, d_axes, dst, outer, tid, threads)
        whole = lowering.local_scalar(dtype)
        x, y = tirx.Var("x", dtype), tirx.Var("y", dtype)
        reducer = tirx.CommReducer([x], [y], [reduce_combine(_combiner(kind), x, y)], [reduce_identity(kind, dtype)])
        allreduce = tirx.AttrStmt(reducer, "reduce_scope", tirx.reinterpret("handle", tirx.IntImm("uint64", 0)),
                                  tirx.Evaluate(tirx.tvm_thread_allreduce(
                                      tirx.IntImm("uint32", 1), tirx.BufferLoad(part, [0]), tirx.const(True),
                                      tirx.BufferLoad(whole, [0]), tid)))
        return tirx.SeqStmt(stmts[:1] + [tirx.AllocBuffer(whole)] + stmts[1:] + [
            allreduce,
            # every thread holds the same total: each stores it (one value, whoever wins)
            tirx.BufferStore(d_buf, tirx.BufferLoad(whole, [0]), d_idx),
        ])

    return lowering.nest([s_ext[a] for a in kept], body, parallel=False)


def _butterfly(mask: Any, value: Any, other: Any, dtype: Any, combine: str) -> list[Any]:
    """log2(32) xor shuffles (PTX ISA, shfl.sync.bfly) after which every lane of the warp
    holds its warp's total in ``value`` (a one-element local buffer), so no broadcast is
    needed; ``other`` holds each step's shuffled value (a combine may read an operand twice
    and under a select, and every lane has to execute the shuffle)."""
    stmts, offset = [], WARP // 2
    while offset:
        current = tirx.BufferLoad(value, [0])
        shuffled = tirx.call_intrin(dtype, "tirx.tvm_warp_shuffle_xor", tirx.BufferLoad(mask, [0]), current,
                                    tirx.const(offset, "int32"), tirx.const(WARP, "int32"), tirx.const(WARP, "int32"))
        stmts += [tirx.BufferStore(other, shuffled, [0]),
                  tirx.BufferStore(value, reduce_combine(combine, current, tirx.BufferLoad(other, [0])), [0])]
        offset //= 2
    return stmts


def _reduce_in_own_layout(lowering: Any, across: Across, src: Any, dst: Any, kind: str, axis: int,
                          kept: list[int], d_axes: list[int]) -> Any:
    """Each thread's partial of every row over its own points of the fragment (one T.Parallel
    nest over it), then every row's partials combined over the block at once."""
    tid, threads, _, _ = across
    s_buf, s_min, s_ext = lowering.parts(src)
    d_buf, d_min, _ = lowering.parts(dst)
    dtype = d_buf.dtype
    combine = _combiner(kind)
    sizes = [int(s_ext[a].value) for a in kept]
    rows = 1
    for size in sizes:
        rows *= size
    partials = tirx.decl_buffer((rows,), dtype, name=f"row_partial{lowering.counter}", scope="local")
    lowering.counter += 1

    def flat(values: list[Any]) -> Any:
        index: Any = tirx.const(0, "int32")
        for value, size in zip(values, sizes):
            index = index * size + value
        return index

    def add(loop_vars: list[Any]) -> Any:
        row = flat([loop_vars[a] for a in kept])
        value = reduce_operand(kind, tirx.Cast(dtype, tirx.BufferLoad(s_buf, [m + v for m, v in zip(s_min, loop_vars)])))
        return tirx.BufferStore(partials, reduce_combine(kind, tirx.BufferLoad(partials, [row]), value), [row])

    mask = tirx.decl_buffer((1,), "uint32", name=f"mask{lowering.counter}", scope="local")
    value, other = lowering.local_scalar(dtype), lowering.local_scalar(dtype)
    stmts = [tirx.AllocBuffer(partials), tirx.AllocBuffer(mask), tirx.AllocBuffer(value), tirx.AllocBuffer(other)]
    stmts += [tirx.BufferStore(partials, reduce_identity(kind, dtype), [tirx.const(r, "int32")]) for r in range(rows)]
    stmts.append(lowering.nest(list(s_ext), add))
    stmts.append(tirx.BufferStore(mask, tirx.call_intrin("uint32", "tirx.tvm_warp_activemask"), [0]))
    warps = threads // WARP
    staging = None
    if warps > 1:  # one value per warp and row; ThreadSync puts the barrier before the reads
        staging = tirx.decl_buffer((rows * warps,), dtype, name=f"row_partials{lowering.counter}", scope="shared")
        lowering.compiler_shared.append(staging.name)
        stmts.append(tirx.AllocBuffer(staging))
    for r in range(rows):
        stmts.append(tirx.BufferStore(value, tirx.BufferLoad(partials, [tirx.const(r, "int32")]), [0]))
        stmts += _butterfly(mask, value, other, dtype, combine)
        if staging is not None:
            stmts.append(tirx.IfThenElse(tirx.floormod(tid, WARP) == 0, tirx.BufferStore(
                staging, tirx.BufferLoad(value, [0]), [tirx.const(r * warps, "int32") + tirx.floordiv(tid, WARP)]),
                None))
        else:
            stmts.append(tirx.BufferStore(partials, tirx.BufferLoad(value, [0]), [tirx.const(r, "int32")]))

    def store(outer: list[Any]) -> Any:  # a T.Parallel nest over the rows: each row stored once
        row = flat(outer)
        folded: list[Any] = []
        if staging is None:
            total: Any = tirx.BufferLoad(partials, [row])
        else:  # the same order in every thread
            folded, total = _fold([tirx.BufferLoad(staging, [row * warps + w]) for w in range(warps)], combine,
                                  value)
        _, d_idx = lowering.reduce_indices(s_min, d_min, kept, d_axes, outer, axis, tirx.const(0, "int32"))
        return tirx.SeqStmt([*folded, tirx.BufferStore(d_buf, total, d_idx)]) if folded else \
            tirx.BufferStore(d_buf, total, d_idx)

    # a per-thread destination needs every row in every thread; a shared one each row once
    stmts.append(lowering.nest([s_ext[a] for a in kept], store,
                               parallel=d_buf.scope() not in ("local", "local.var")))
    return tirx.SeqStmt(stmts)
