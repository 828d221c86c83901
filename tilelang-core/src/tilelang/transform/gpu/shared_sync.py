"""SyncSharedWritesOfSeveralThreads: a barrier after a block-level statement that writes
shared elements some threads share, when a later statement touches the same buffer.

TVM's ThreadSync (s_tir.transform.ThreadSync) decides that two accesses at the same index
expression cannot conflict — each thread would touch its own element. That holds only when
the index involves every thread dimension. Upstream's split-K GEMV writes
``if tk == 0: C_shared[tn] = 0`` and then ``T.atomic_add(C_shared[tn], ...)`` from every
``tk``: the same index, but 32 threads per element, and ThreadSync put no barrier between
the zeroing and the atomics (a race: wrong sums on the H200); after the atomics, seeing only the same index again, it
put none before the final read either. Here, in the statement list
right under the kernel's thread launch, a store to a shared buffer whose index misses a
thread dimension (of extent > 1) — or such an element passed by address, as atomics do —
gets a barrier after its statement when a later statement
of that list accesses the buffer. Every thread of the block runs that list, so the barrier
is reached by all; ThreadSync then sees it and adds none of its own there.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx
from tvm.ir import Call, TensorLoad

from ...backend.pass_pipeline import prim_func_pass
from ...language.ops import block_barrier, is_block_barrier

_SHARED = ("shared", "shared.dyn")
_THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")


class _ThreadDeps:
    """Which thread dimensions each variable depends on: the thread indices themselves, and
    variables bound (CSE's ``cse_v = f(threadIdx.x)``) from expressions that use them."""

    def __init__(self, body: Any, thread_vars: list[Any]) -> None:
        self.count = len(thread_vars)
        self.deps: dict[int, set[int]] = {t.__chandle__(): {i} for i, t in enumerate(thread_vars)}
        self.keep = list(thread_vars)  # the handles stay valid while their objects live
        for _ in range(4):  # binds come in order; a second walk settles rebinding chains
            size = sum(map(len, self.deps.values()))
            tvm_ffi.structural_walk(body, [((tirx.Bind, tirx.Let), self._on_bind)])
            if sum(map(len, self.deps.values())) == size:
                break

    def of(self, exprs: list[Any]) -> set[int]:
        used: set[int] = set()

        def visit(var: Any) -> None:
            used.update(self.deps.get(var.__chandle__(), ()))

        for expr in exprs:
            tvm_ffi.structural_walk(expr, (tirx.Var, visit))
        return used

    def _on_bind(self, stmt: Any) -> None:
        found = self.of([stmt.value])
        if found:
            self.deps.setdefault(stmt.var.__chandle__(), set()).update(found)
            self.keep.append(stmt.var)

    def uses_all(self, exprs: list[Any]) -> bool:
        return len(self.of(exprs)) == self.count


def _shared_writes_of_several_threads(stmt: Any, deps: _ThreadDeps) -> list[Any]:
    found: list[Any] = []

    def note(buffer: Any, indices: list[Any]) -> None:
        if buffer.scope() in _SHARED and not deps.uses_all(indices):
            found.append(buffer)

    def visit_store(store: Any) -> None:
        note(store.buffer, list(store.indices))

    def visit_call(call: Any) -> None:
        # an element passed by address (atomicAdd(&C_shared[tn], v)) may be written
        if str(getattr(call.op, "name", "")) == "tirx.address_of" and isinstance(call.args[0], TensorLoad):
            load = call.args[0]
            if isinstance(load.source, tirx.Buffer):
                note(load.source, list(load.indices))

    tvm_ffi.structural_walk(stmt, [(tirx.BufferStore, visit_store), (Call, visit_call)])
    return found


def _touches(stmt: Any, buffers: list[Any]) -> bool:
    hit = False

    def visit(node: Any) -> None:
        nonlocal hit
        buffer = node.buffer if isinstance(node, tirx.BufferStore) else node.source
        if any(buffer.same_as(b) for b in buffers):
            hit = True

    tvm_ffi.structural_walk(stmt, [(tirx.BufferStore, visit), (TensorLoad, visit)])
    return hit


def _sync_sequence(body: Any, thread_vars: list[Any]) -> Any:
    if not isinstance(body, tirx.SeqStmt):
        return body
    deps = _ThreadDeps(body, thread_vars)
    stmts = list(body.seq)
    out: list[Any] = []
    for i, stmt in enumerate(stmts):
        out.append(stmt)
        shared = _shared_writes_of_several_threads(stmt, deps)
        rest = stmts[i + 1:]
        if shared and rest and not is_block_barrier(rest[0]) and any(_touches(s, shared) for s in rest):
            out.append(block_barrier())
    return tirx.SeqStmt(out) if len(out) != len(stmts) else body


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    def on_attr(stmt: Any) -> Any:
        if stmt.attr_key != "thread_extent" or stmt.node.thread_tag not in _THREAD_TAGS:
            return stmt
        chain, inner = [stmt], stmt.body
        while (isinstance(inner, tirx.AttrStmt) and inner.attr_key == "thread_extent"
               and inner.node.thread_tag in _THREAD_TAGS):
            chain.append(inner)
            inner = inner.body
        threads = [a.node.var for a in chain if not (isinstance(a.value, tirx.IntImm) and a.value.value == 1)]
        if not threads:
            return stmt
        new = _sync_sequence(inner, threads)
        if new.same_as(inner):
            return stmt
        for attr in reversed(chain):
            new = tirx.AttrStmt(attr.node, attr.attr_key, attr.value, new)
        return new

    body = tvm_ffi.structural_map(func.body, (tirx.AttrStmt, on_attr), order="pre")
    return func if body.same_as(func.body) else func.with_body(body)


def SyncSharedWritesOfSeveralThreads() -> Any:
    return prim_func_pass(_run, "tl.gpu.SyncSharedWritesOfSeveralThreads")
