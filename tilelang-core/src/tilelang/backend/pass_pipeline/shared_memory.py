"""Shared-memory legalization that any GPU backend's pipeline may list.

TVM 0.27's ``MergeSharedMemoryAllocations`` stops with an internal check
(``buffer_byte_offsets``) on a shared allocation of 4 bytes or less next to other shared
buffers — e.g. the one-row fragment of a row reduction with ``blk_m=1``, which the GPU
backends keep in shared memory. Such tiny buffers are widened to 8 bytes first: the extra
elements are never touched, and the merged buffer is padded to alignment anyway.

The same pass drops shared allocations nothing reads or writes any more (a tile loop of no
trips, ``T.ceildiv(0, bK)`` for K = 0, is gone by then): merged alone, they leave a
dynamic buffer of 0 bytes, which TVM's host/device split refuses ("allocates dynamic
shared memory with a placeholder extent").
"""

from __future__ import annotations

from typing import Any

from .pipeline import prim_func_pass

#: smallest shared allocation MergeSharedMemoryAllocations plans correctly (bytes)
MIN_SHARED_BYTES = 8


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    import tvm
    import tvm_ffi  # here, not at import: `import tilelang` stays free of TVM
    from tvm import tirx

    widened: dict[Any, Any] = {}

    def on_buffer(buffer: Any) -> Any:
        if not isinstance(getattr(buffer, "ty", None), tirx.BufferType):
            return buffer  # a plain variable
        if not buffer.scope().startswith("shared") or len(buffer.shape) != 1:
            return buffer  # FlattenBuffer ran before: shared buffers are 1-D here
        extent = buffer.shape[0]
        bits = tvm.DataType(str(buffer.dtype)).bits
        if not isinstance(extent, tirx.IntImm) or int(extent.value) * bits > 8 * (MIN_SHARED_BYTES // 2):
            return buffer
        for old, new in widened.items():
            if old.same_as(buffer):
                return new
        new = tirx.decl_buffer((MIN_SHARED_BYTES * 8 // bits,), buffer.dtype, name=buffer.name,
                               scope=buffer.scope())
        widened[buffer] = new
        return new

    body = tvm_ffi.structural_map(func.body, (tirx.Buffer, on_buffer), order="post")
    body, dropped = _drop_unused_shared(body)
    return func if not widened and not dropped else func.with_body(body)


def _drop_unused_shared(body: Any) -> tuple[Any, bool]:
    """``body`` without the shared allocations no later statement of their scope uses."""
    import tvm_ffi
    from tvm import tirx

    from ...language.ops import uses_var

    dropped = [False]

    def unused(seq: Any, at: int) -> bool:
        stmt = seq[at]
        return (isinstance(stmt, tirx.AllocBuffer) and stmt.buffer.scope().startswith("shared")
                and not any(uses_var(rest, stmt.buffer) for rest in seq[at + 1:]))  # a buffer is a Var

    def on_seq(seq: Any) -> Any:
        stmts = list(seq.seq)
        kept = [s for at, s in enumerate(stmts) if not unused(stmts, at)]
        if len(kept) == len(stmts):
            return seq
        dropped[0] = True
        return tirx.SeqStmt(kept) if len(kept) > 1 else kept[0] if kept else tirx.Evaluate(0)

    return tvm_ffi.structural_map(body, (tirx.SeqStmt, on_seq), order="post"), dropped[0]


def PadTinySharedAllocations() -> Any:
    """Widen shared buffers of 4 bytes or less to 8 bytes and drop unused shared
    allocations (after FlattenBuffer, before ``MergeSharedMemoryAllocations``)."""
    return prim_func_pass(_run, "tl.PadTinySharedAllocations")


def _scope_loading_binds(func: Any, mod: Any, ctx: Any) -> Any:
    """A binding whose value loads from a buffer allocated in the same statement list
    (``T.make_tensor(ptrs[i], ...)`` with ``i`` a ``T.alloc_var``: the pointer is bound from
    ``ptrs[i[0]]``) and the statements after it go into one ``if (true)`` scope: TVM's
    MergeSharedMemoryAllocations takes a load at the level of its buffer's allocation for
    misplaced and stops ("Load memory in places other than store"); one level in, it is a
    read like any other. The condition is a constant: the code runs as before."""
    import tvm_ffi
    from tvm import tirx
    from tvm.ir import TensorLoad

    changed = [False]

    def loads_from(expr: Any, buffers: list[Any]) -> bool:
        found: list[Any] = []
        tvm_ffi.structural_walk(expr, (TensorLoad, lambda ld: found.append(ld) if any(
            ld.source.same_as(b) for b in buffers) else None))
        return bool(found)

    def on_seq(seq: Any) -> Any:
        allocated: list[Any] = []
        for at, stmt in enumerate(seq.seq):
            if isinstance(stmt, tirx.AllocBuffer):
                allocated.append(stmt.buffer)
            elif isinstance(stmt, tirx.Bind) and allocated and loads_from(stmt.value, allocated):
                changed[0] = True
                rest = list(seq.seq[at:])
                inner = tirx.IfThenElse(tirx.const(True, "bool"), tirx.SeqStmt(rest) if len(rest) > 1 else rest[0], None)
                head = list(seq.seq[:at])
                return tirx.SeqStmt([*head, inner]) if head else inner
        return seq

    body = tvm_ffi.structural_map(func.body, (tirx.SeqStmt, on_seq), order="post")
    return func.with_body(body) if changed[0] else func


def ScopeLoadingBinds() -> Any:
    """Before ``MergeSharedMemoryAllocations`` (see ``_scope_loading_binds``)."""
    return prim_func_pass(_scope_loading_binds, "tl.ScopeLoadingBinds")
