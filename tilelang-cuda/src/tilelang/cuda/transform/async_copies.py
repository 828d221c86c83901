"""IssueAsyncCopies: upstream's ``T.ptx_cp_async`` as real cp.async where the kernel waits
for it upstream's way, through ``T.cp_async_barrier_noinc``.

Core's ``T.ptx_cp_async`` is a synchronous 16-byte copy between two views (a vector load
and store), which any backend can run: the thread goes on once the bytes have landed.
FlashMLA's producer warps issue dozens of them per stage and then arrive on the stage's
mbarrier with ``T.cp_async_barrier_noinc``; synchronously, each copy waits for global memory
before the next (on the H200 the long scoreboard was the top stall of
``example_mla_decode_ws``). Here, in a statement sequence that ends in such an arrival
(``tl_cp_async_mbarrier_arrive``, explicit_sync.py), the 16-byte view copies from global to
shared memory before it become ``cp.async.cg`` (``tl_cp_async_16``): the thread issues them
all, and ``cp.async.mbarrier.arrive.noinc`` arrives once they have landed, which is when the
consumers that wait on the barrier read them. Statements that read shared memory themselves
keep their copies synchronous (the thread could read bytes before they land).

Runs after the tensor-core pass (which moves the views' indices when it swizzles a tile in
place) and before the tile ops' lowering.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tilelang.plugin import dtype_bytes, extern_call, prim_func_pass
from tvm import tirx
from tvm.ir import TensorLoad
from tvm_ffi.structural import WalkResult

from .cp_async import SHARED_SCOPES
from .pingpong import calls_extern, extern_name

ARRIVAL = "tl_cp_async_mbarrier_arrive"
COPY_BYTES = 16


def _vector(index: Any, lanes: int) -> bool:
    return isinstance(index, tirx.Ramp) and isinstance(index.stride, tirx.IntImm) and index.stride.value == 1 and \
        int(index.lanes if isinstance(index.lanes, int) else index.lanes.value) == lanes


def _copy(store: Any) -> tuple[Any, Any] | None:
    """(global load, predicate or None) of a 16-byte vector copy from global memory into
    shared memory, or None."""
    if store.buffer.scope() not in SHARED_SCOPES or len(store.indices) != 1:
        return None
    lanes = COPY_BYTES // dtype_bytes(store.buffer.dtype)
    if not _vector(store.indices[0], lanes):
        return None
    value, predicate = store.value, None
    if isinstance(value, tirx.Select):  # T.ptx_cp_async(..., predicate): zeros where it is false
        predicate, value = value.condition, value.true_value
    if not isinstance(value, TensorLoad) or value.source.scope() != "global" or len(value.indices) != 1 or \
            not _vector(value.indices[0], lanes):
        return None
    return value, predicate


def _reads_shared(stmt: Any) -> bool:
    """Whether ``stmt`` loads from shared memory (an mbarrier's address is not a load)."""
    found = False

    def visit(node: Any) -> Any:
        nonlocal found
        if isinstance(node, tvm.ir.Call) and str(getattr(node.op, "name", "")) == "tirx.address_of":
            return WalkResult.SKIP
        if isinstance(node, TensorLoad) and node.source.scope() in SHARED_SCOPES:
            found = True
        return WalkResult.ADVANCE

    tvm_ffi.structural_walk(stmt, visit, order="pre")
    return found


def _issue(stmt: Any) -> Any:
    """``stmt`` with its 16-byte copies from global to shared memory as cp.async."""

    def on_store(store: Any) -> Any:
        copy = _copy(store)
        if copy is None:
            return store
        load, predicate = copy
        lanes = COPY_BYTES // dtype_bytes(store.buffer.dtype)
        # declared as a read, as the pipelines' cp.async are: the kernel's mbarrier orders it
        smem = store.buffer.access_ptr("r", offset=store.indices[0].base, extent=lanes)
        gmem = load.source.access_ptr("r", offset=load.indices[0].base, extent=lanes)
        size = tirx.IntImm("int32", COPY_BYTES)
        return extern_call("tl_cp_async_16", smem, gmem,
                           size if predicate is None else tirx.Select(predicate, size, tirx.IntImm("int32", 0)))

    return tvm_ffi.structural_map(stmt, (tirx.BufferStore, on_store), order="post")


def _run(func: Any) -> Any:
    def on_seq(node: Any) -> Any:
        """The statements before the sequence's last arrival, unless any of them reads shared
        memory (the thread could read its own copies before they land) or arrives itself."""
        items = list(node.seq)
        last = max((i for i, s in enumerate(items) if extern_name(s) == ARRIVAL), default=None)
        if last is None or any(calls_extern(s, ARRIVAL) or _reads_shared(s) for s in items[:last]):
            return node
        return tirx.SeqStmt([*(_issue(s) for s in items[:last]), *items[last:]])

    body = tvm_ffi.structural_map(func.body, (tirx.SeqStmt, on_seq), order="post")
    return func if body.same_as(func.body) else func.with_body(body)


def IssueAsyncCopies() -> Any:
    return prim_func_pass(lambda func, mod, ctx: _run(func), "tl.cuda.IssueAsyncCopies", per_kernel=True)


__all__ = ["IssueAsyncCopies"]
