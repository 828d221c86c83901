"""Barriers inside a branch that only some warps of the block take: named barriers over
those warps.

Upstream's kernels split a block's warps by thread index and give each group its own work
(deepseek's mHC pre kernel: ``if T.get_thread_binding() < 32: <a sinkhorn on one warp>
else: <a pipelined copy loop on the other two>``), with shared-memory traffic inside each
branch. A block-wide barrier there would wait for threads that never come, so TVM's
ThreadSync refuses any barrier under a condition ("Cannot insert syncs inside condition").

Before ThreadSync, each branch whose condition keeps a warp-aligned range of threads
``[lo, hi)`` (``tx < 32``; its ``else``: ``[32, threads)``) gets the barriers ThreadSync
would place in it if its threads were the whole block, as named barriers over just those
threads (``tvm_storage_sync("shared", id, hi - lo)``: PTX ``bar.sync id, count``, which
counts the threads that arrive, whichever they are). ThreadSync then takes those for
barriers, as it takes the ones a kernel writes with ``T.sync_threads(id, count)``, and adds
its own only outside the branch, where every thread passes. Only a backend with named
barriers names them (``gpu_block_passes(named_barriers=True)``); elsewhere such a kernel
keeps the error that says how to restructure it.

Either way, the branches of a warp split run at the same time, so their shared buffers
must not share bytes (``_keep_alive``).

ThreadSync then takes a branch's barrier for a barrier of the block, yet it orders only the
branch's threads. Where a branch uses shared memory that the block writes outside the split
(tiles every thread copies before ``if tx < 128:``), a barrier of the whole block goes right
before the outermost split (a copy of one already there is dropped). An if inside a branch
(``elif tx < 256``) is reached by the threads its enclosing conditions leave, and its
barriers count those (``_enclosing_ranges``).
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ...backend.pass_pipeline import prim_func_pass
from .partition_parallel import _complement, _thread_range, walk_thread_ranges

WARP = 32
#: named barrier ids this pass hands out (0 is __syncthreads(); the CUDA backend's own
#: schedules use 1-3; PTX has 16)
FIRST_ID, LAST_ID = 8, 15


def _thread_axis(body: Any) -> tuple[Any, int] | None:
    """(the threadIdx.x AttrStmt, the block's size) when threadIdx.x is the only thread
    dimension and its extent is a constant."""
    found: list[Any] = []
    tvm_ffi.structural_walk(body, (tirx.AttrStmt, lambda a: found.append(a) if a.attr_key == "thread_extent"
                                   and a.node.thread_tag.startswith("threadIdx") else None))
    if len(found) != 1 or found[0].node.thread_tag != "threadIdx.x" or not isinstance(found[0].value, tirx.IntImm):
        return None
    return found[0], int(found[0].value.value)


def _shared_buffers(node: Any) -> list[Any]:
    found: list[Any] = []

    def add(buffer: Any) -> None:
        if isinstance(buffer, tirx.Buffer) and buffer.scope() in ("shared", "shared.dyn") and \
                not any(buffer.same_as(b) for b in found):
            found.append(buffer)

    tvm_ffi.structural_walk(node, [(tirx.BufferStore, lambda st: add(st.buffer)),
                                   (tvm.ir.TensorLoad, lambda ld: add(ld.source))])
    return found


def _keep_alive(stmt: Any) -> list[Any]:
    """Statements after a two-way warp split that name every shared buffer its branches use.
    The branches run at the same time on different warps, but the shared-memory planner
    (MergeSharedMemoryAllocations) reads them one after the other and would let the else
    branch's buffers reuse the then branch's bytes; a use after both keeps each buffer's
    bytes its own until then. The access mask is 0: no read or write for the barrier pass,
    and no code beyond an unused address."""
    then, other = _shared_buffers(stmt.then_case), _shared_buffers(stmt.else_case)
    if not then or not other:
        return []
    return [tirx.Evaluate(buffer.access_ptr(0, offset=0, extent=1)) for buffer in then + other]


def _without_shared_allocs(body: Any, allocs: list[Any]) -> Any:
    """``body`` without its shared-memory AllocBuffer statements, which go to ``allocs``."""

    def on_seq(seq: Any) -> Any:
        kept = []
        for stmt in seq.seq:
            if isinstance(stmt, tirx.AllocBuffer) and stmt.buffer.scope() in ("shared", "shared.dyn"):
                allocs.append(stmt)
            else:
                kept.append(stmt)
        if len(kept) == len(seq.seq):
            return seq
        return kept[0] if len(kept) == 1 else tirx.SeqStmt(kept or [tirx.Evaluate(0)])

    return tvm_ffi.structural_map(body, (tirx.SeqStmt, on_seq), order="post")


def _syncs_in(node: Any) -> int:
    found: list[Any] = []
    tvm_ffi.structural_walk(node, (tvm.ir.Call, lambda c: found.append(c) if str(getattr(c.op, "name", "")) ==
                                   "tirx.tvm_storage_sync" else None))
    return len(found)


def _shared_writes(node: Any) -> dict[int, int]:
    """Shared buffer (its handle) -> how many statements write it under ``node`` (stores,
    and addresses taken for writing: cp.async, ldmatrix's neighbours)."""
    counts: dict[int, int] = {}

    def add(buffer: Any) -> None:
        if isinstance(buffer, tirx.Buffer) and buffer.scope() in ("shared", "shared.dyn"):
            counts[buffer.__chandle__()] = counts.get(buffer.__chandle__(), 0) + 1

    def on_call(call: Any) -> None:
        if str(getattr(call.op, "name", "")) != "tirx.tvm_access_ptr" or len(call.args) < 5:
            return
        data, mask = call.args[1], call.args[4]
        if isinstance(mask, tirx.IntImm) and int(mask.value) & 2 and \
                str(getattr(getattr(data, "op", None), "name", "")) == "tirx.buffer_data":
            add(data.args[0])

    tvm_ffi.structural_walk(node, [(tirx.BufferStore, lambda st: add(st.buffer)), (tvm.ir.Call, on_call)])
    return counts


def _loads_in(expr: Any) -> bool:
    found: list[Any] = []
    tvm_ffi.structural_walk(expr, (tvm.ir.TensorLoad, found.append))
    return bool(found)


def _enclosing_ranges(body: Any, tx: Any, threads: int) -> dict[int, tuple[int, int]]:
    """The threads that reach each if (by its condition), where an enclosing branch narrows
    them: ``elif tx < 256`` after ``if tx < 128`` is reached by [128, 384) and keeps
    [128, 256), a branch of 128 threads, not 256."""
    found: dict[int, tuple[int, int]] = {}

    def visit(node: Any, reach: tuple[int, int] | None) -> None:
        if isinstance(node, tirx.IfThenElse) and reach is not None:
            found[node.condition.__chandle__()] = reach

    walk_thread_ranges(body, tx, threads, visit)
    return found


def _run(func: Any, named: bool) -> Any:
    from ...backend.pass_pipeline import pass_config
    from .block_passes import DISABLE_THREAD_STORAGE_SYNC

    named = named and not pass_config(DISABLE_THREAD_STORAGE_SYNC, False)  # else the kernel places its own
    axis = _thread_axis(func.body)
    if axis is None:
        return func
    attr, threads = axis
    tx = attr.node.var
    from tvm import s_tir

    syncs = [s_tir.transform.ThreadSync("shared"), s_tir.transform.ThreadSync("shared.dyn")]
    next_id = [FIRST_ID]

    def synced(body: Any, lo: int, hi: int) -> Any:
        """``body`` with the barriers its threads need among themselves, named."""
        alone = tirx.PrimFunc([], tirx.AttrStmt(attr.node, "thread_extent", attr.value, body))
        module = tvm.IRModule({"branch": alone})
        for sync in syncs:
            module = sync(module)
        inner = module["branch"].body.body
        if _syncs_in(inner) == _syncs_in(body):
            return body
        if next_id[0] > LAST_ID:
            return body  # out of barrier ids: ThreadSync's own error stands
        barrier = tirx.IntImm("int32", next_id[0])
        next_id[0] += 1

        def name(call: Any) -> Any:
            if str(getattr(call.op, "name", "")) == "tirx.tvm_storage_sync" and len(call.args) == 1:
                return tirx.call_intrin("int32", "tirx.tvm_storage_sync", call.args[0], barrier,
                                        tirx.IntImm("int32", hi - lo))
            return call

        return tvm_ffi.structural_map(inner, (tvm.ir.Call, name), order="post")

    changed = [False]
    within = _enclosing_ranges(func.body, tx, threads)
    writes = _shared_writes(func.body)

    def on_if(stmt: Any) -> Any:
        outer = within.get(stmt.condition.__chandle__(), (0, threads))
        kept = _thread_range(stmt.condition, tx, *outer)  # the parser the partition uses
        if kept is None:
            return stmt
        lo, hi = kept
        branches = [(stmt.then_case, lo, hi)]
        if stmt.else_case is not None:  # the complement, when it is one range
            rest = _complement(kept, *outer)
            branches.append((stmt.else_case, *rest) if rest else (stmt.else_case, 0, 0))
        out = []
        for body, a, b in branches:
            partial = named and 0 < b - a < threads and a % WARP == 0 and b % WARP == 0
            out.append(synced(body, a, b) if partial else body)
        keep = _keep_alive(stmt) if stmt.else_case is not None else []
        before = []
        if outer == (0, threads) and any(_syncs_in(o) for o in out):
            # a barrier in a branch orders only the branch's threads, yet ThreadSync takes it
            # for a barrier of the block: shared memory the block writes outside the split and
            # a branch uses needs a barrier of every thread, here (a split inside a branch is
            # covered by this one, before the outermost split); one per scope, as ThreadSync
            # counts them (a barrier it placed there itself is then not placed again)
            inside = _shared_writes(stmt)
            used = {b.__chandle__(): b.scope() for b in _shared_buffers(stmt)}

            def addressed(call: Any) -> None:
                if str(getattr(call.op, "name", "")) == "tirx.buffer_data":
                    used.setdefault(call.args[0].__chandle__(), call.args[0].scope())

            tvm_ffi.structural_walk(stmt, (tvm.ir.Call, addressed))
            scopes = sorted({scope for b, scope in used.items() if writes.get(b, 0) > inside.get(b, 0)})
            before = [tirx.Evaluate(tirx.call_intrin("int32", "tirx.tvm_storage_sync", scope)) for scope in scopes]
        if not keep and not before and all(o.same_as(body) for o, (body, _, _) in zip(out, branches)):
            return stmt
        changed[0] = True
        allocs: list[Any] = []
        if keep:  # the branches' shared allocations move before the split, in scope after it
            out = [_without_shared_allocs(o, allocs) for o in out]
        branched = tirx.IfThenElse(stmt.condition, out[0], out[1] if len(out) > 1 else None, span=stmt.span)
        return tirx.SeqStmt([*allocs, *before, branched, *keep]) if keep or before else branched

    body = tvm_ffi.structural_map(func.body, (tirx.IfThenElse, on_if), order="post")
    if not changed[0]:
        return func

    def block_sync(stmt: Any) -> str | None:
        call = stmt.value if isinstance(stmt, tirx.Evaluate) else None
        if call is None or str(getattr(getattr(call, "op", None), "name", "")) != "tirx.tvm_storage_sync" or \
                len(call.args) != 1:
            return None
        return str(call.args[0].value)

    def flat(seq: Any) -> Any:
        """A barrier put before a split is a statement of the split's sequence, and one right
        after the same barrier (explicit_sync's fence of a block copy) is dropped."""
        items = [x for st in seq.seq for x in (st.seq if isinstance(st, tirx.SeqStmt) else [st])]
        out: list[Any] = []
        last = None  # the last statement that is not a binding of loads-free arithmetic
        for item in items:
            if last is not None and block_sync(item) is not None and block_sync(item) == block_sync(last):
                continue
            out.append(item)
            if not (isinstance(item, tirx.Bind) and not _loads_in(item.value)):
                last = item
        return seq if len(out) == len(seq.seq) and all(a.same_as(b) for a, b in zip(out, seq.seq)) \
            else tirx.SeqStmt(out)

    return func.with_body(tvm_ffi.structural_map(body, (tirx.SeqStmt, flat), order="post"))


def NameBranchBarriers(named: bool) -> Any:
    """``named``: the backend lowers named barriers; without, a warp split only keeps its
    branches' shared buffers apart."""
    return prim_func_pass(lambda func, mod, ctx: _run(func, named), "tl.gpu.NameBranchBarriers")
