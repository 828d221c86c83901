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
of that list accesses the buffer. So does a shared element written where a later statement
reaches the buffer by address at another index, or written by address where a later one
touches it at another index: ThreadSync does not see accesses by address. Every thread of the block runs that list, so the barrier
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


class _Access:
    """A shared element a statement touches: by address (an atomic's ``&C_shared[i]``,
    which TVM's ThreadSync does not count as an access) or as a load/store."""

    def __init__(self, buffer: Any, indices: list[Any], by_address: bool) -> None:
        self.buffer, self.indices, self.by_address = buffer, indices, by_address

    def same_element(self, other: _Access) -> bool:
        return len(self.indices) == len(other.indices) and all(
            tvm_ffi.structural_equal(a, b) for a, b in zip(self.indices, other.indices))


def _shared_accesses(stmt: Any, writes_only: bool) -> list[_Access]:
    found: list[_Access] = []

    def note(buffer: Any, indices: Any, by_address: bool) -> None:
        if isinstance(buffer, tirx.Buffer) and buffer.scope() in _SHARED:
            found.append(_Access(buffer, list(indices), by_address))

    def visit_call(call: Any) -> None:
        # an element passed by address (atomicAdd(&C_shared[tn], v)) may be written
        if str(getattr(call.op, "name", "")) == "tirx.address_of" and isinstance(call.args[0], TensorLoad):
            note(call.args[0].source, call.args[0].indices, True)

    visitors = [(tirx.BufferStore, lambda s: note(s.buffer, s.indices, False)), (Call, visit_call)]
    if not writes_only:
        visitors.append((TensorLoad, lambda load: note(load.source, load.indices, False)))
    tvm_ffi.structural_walk(stmt, visitors)
    if not writes_only:  # the load under an address_of is that access, already noted
        by_address = [a for a in found if a.by_address]
        found = [a for a in found if a.by_address or not any(
            a.buffer.same_as(b.buffer) and a.same_element(b) for b in by_address)]
    return found


def _needs_barrier(write: _Access, later: list[_Access], deps: _ThreadDeps) -> bool:
    """Whether a later access of ``write``'s buffer may be another thread's element with no
    barrier from ThreadSync: the write's index misses a thread dimension (several threads
    write one element), or either side is by address and the indices differ (``shared[tx ^
    1] = 0`` then ``T.atomic_add(shared[tx], 1)``: upstream's issue 1257)."""
    for access in later:
        if not access.buffer.same_as(write.buffer):
            continue
        if not deps.uses_all(write.indices):
            return True
        if (write.by_address or access.by_address) and not write.same_element(access):
            return True
    return False


def _sync_sequence(body: Any, thread_vars: list[Any]) -> Any:
    if not isinstance(body, tirx.SeqStmt):
        return body
    deps = _ThreadDeps(body, thread_vars)
    stmts = list(body.seq)
    out: list[Any] = []
    for i, stmt in enumerate(stmts):
        out.append(stmt)
        rest = stmts[i + 1:]
        if not rest or is_block_barrier(rest[0]):
            continue
        writes = _shared_accesses(stmt, writes_only=True)
        if not writes:
            continue
        later = [a for s in rest for a in _shared_accesses(s, writes_only=False)]
        if any(_needs_barrier(w, later, deps) for w in writes):
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
