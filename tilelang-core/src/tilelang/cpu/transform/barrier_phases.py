"""A block's threads on the CPU, in phases between its barriers.

On a GPU a block's threads run together and ``T.sync_threads()`` makes each wait for all.
On the CPU they run one after another (launch_to_loops.py). A kernel that reads its thread
index and hands data from thread to thread through shared memory across a barrier needs
the barrier to mean the same here: the statements between two barriers form a phase, and
each phase runs as one loop over the block's threads before the next phase begins (loop
fission at barriers, as CPU implementations of OpenCL run a work-group).

- Shared tiles are allocated once per block, before the phases.
- What a thread keeps across a barrier gets a slot per thread: a local buffer gains an
  outer axis over the block's threads, a value it bound becomes an element of an array.
- A loop or branch that holds a barrier stays around the phases inside it. Its bounds or
  condition must be the same for every thread, as on a GPU (where a barrier that some
  threads skip hangs or is undefined); otherwise a LanguageError names the barrier.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tvm_ffi
from tvm import tirx
from tvm.ir import TensorLoad

from ...errors import LanguageError
from ...language.bounds import source_location
from ...language.ops import is_block_barrier, substitute

_SERIAL = tirx.ForKind.SERIAL


def _first_barrier(stmt: Any) -> Any:
    """The first block barrier (``T.sync_threads()``) in ``stmt``, or None."""
    found: list[Any] = []
    tvm_ffi.structural_walk(stmt, (tirx.Evaluate, lambda s: found.append(s) if is_block_barrier(s) else None))
    return found[0] if found else None


def holds_barrier(stmt: Any) -> bool:
    return _first_barrier(stmt) is not None


def thread_count(threads: list[tuple[Any, Any]]) -> Any:
    """The block's threads: the product of the ``threads`` extents ((var, extent) pairs)."""
    count: Any = None
    for _, extent in threads:
        count = extent if count is None else count * extent
    return count


def linear_thread(threads: list[tuple[Any, Any]], values: Sequence[tuple[Any, Any]] = ()) -> Any:
    """The thread's index in the block, outermost axis first; ``values`` (var, value) put
    another thread's coordinate in place of a thread variable."""
    tid: Any = None
    for var, extent in threads:
        value = next((v for old, v in values if old.same_as(var)), var)
        tid = value if tid is None else tid * extent + value
    return tid


def _vars_in(node: Any) -> list[Any]:
    """The variables ``node`` refers to; a buffer is one (``buffer.data`` is a call on it)."""
    found: list[Any] = []
    tvm_ffi.structural_walk(node, (tirx.Var, found.append))
    return found


def _is_private(buffer: Any) -> bool:
    """A buffer each thread has its own copy of (``T.alloc_local``, fragments, ``T.alloc_var``)."""
    return str(buffer.scope()).startswith("local")


class _Phases:
    def __init__(self, kernel: str, threads: list[tuple[Any, Any]], body: Any) -> None:
        self.kernel = kernel
        self.threads = threads  # (var, extent), outermost first
        self.count = thread_count(threads)
        self.tid = linear_thread(threads)
        # what differs from thread to thread: its index, the values it binds, its own buffers
        self.private: list[Any] = [var for var, _ in threads]
        tvm_ffi.structural_walk(body, (tirx.AllocBuffer, lambda a: self.private.append(a.buffer)
                                       if _is_private(a.buffer) else None))
        self.var_slots: list[tuple[Any, Any]] = []  # a bound value -> its array
        self.buffer_slots: list[tuple[Any, Any]] = []  # a local buffer -> it with a thread axis

    # -- what every thread agrees on --------------------------------------------------------
    def _uniform(self, expr: Any) -> bool:
        private = self.private
        return not any(any(v.same_as(p) for p in private) for v in _vars_in(expr))

    def _require_uniform(self, what: str, expr: Any, stmt: Any) -> None:
        if self._uniform(expr):
            return
        barrier = _first_barrier(stmt)
        raise LanguageError(
            f"kernel {self.kernel!r}: T.sync_threads() inside a {what} that depends on the thread index or on "
            f"a thread's own values ({expr}); the CPU backend runs the block's threads in phases between "
            "barriers, which needs every thread to reach the same barriers (on a GPU, a barrier that some "
            "threads skip hangs or is undefined). Move the barrier out of the "
            f"{what}" + source_location(getattr(barrier, "span", None) or getattr(stmt, "span", None)))

    # -- the phases ---------------------------------------------------------------------------
    def split(self, stmt: Any) -> Any:
        """``stmt``, which holds a barrier, as phases: loops over the threads between barriers."""
        if is_block_barrier(stmt):
            return tirx.Evaluate(tirx.const(0, "int32"))
        if isinstance(stmt, tirx.SeqStmt):
            return self._split_sequence(list(stmt.seq))
        if isinstance(stmt, tirx.For):
            self._require_uniform("loop", stmt.min if self._uniform(stmt.extent) else stmt.extent, stmt)
            return tirx.For(stmt.loop_var, stmt.min, stmt.extent, _SERIAL, self.split(stmt.body),
                            annotations=stmt.annotations, step=stmt.step, span=stmt.span)
        if isinstance(stmt, tirx.While):
            self._require_uniform("loop", stmt.condition, stmt)
            return tirx.While(stmt.condition, self.split(stmt.body), stmt.span)
        if isinstance(stmt, tirx.IfThenElse):
            self._require_uniform("branch", stmt.condition, stmt)
            other = None if stmt.else_case is None else self._part(stmt.else_case)
            return tirx.IfThenElse(stmt.condition, self._part(stmt.then_case), other, stmt.span)
        if isinstance(stmt, tirx.AttrStmt):
            self._require_uniform("scope", stmt.value, stmt)
            return tirx.AttrStmt(stmt.node, stmt.attr_key, stmt.value, self.split(stmt.body), stmt.span)
        raise LanguageError(
            f"kernel {self.kernel!r}: T.sync_threads() inside a {type(stmt).__name__}, which the CPU backend "
            "cannot run in phases between barriers; move the barrier out of it"
            + source_location(getattr(_first_barrier(stmt), "span", None)))

    def _part(self, stmt: Any) -> Any:
        return self.split(stmt) if holds_barrier(stmt) else self._phase([stmt])

    def _split_sequence(self, children: list[Any]) -> Any:
        barriers = [i for i, child in enumerate(children) if holds_barrier(child)]
        out: list[Any] = []
        pending: list[Any] = []

        def flush() -> None:
            if pending:
                out.append(self._phase(pending))
                pending.clear()

        for i, child in enumerate(children):
            if i in barriers:
                flush()
                out.append(self.split(child))
                continue
            later = [j for j in barriers if j > i]
            after = children[later[0]:] if later else []
            if isinstance(child, tirx.AllocBuffer) and not _is_private(child.buffer):
                out.append(child)  # a shared tile: one per block
            elif isinstance(child, tirx.AllocBuffer) and any(_refers(c, child.buffer) for c in after):
                out.append(tirx.AllocBuffer(self._slot_buffer(child.buffer), child.annotations))
            elif isinstance(child, tirx.DeclBuffer) and self._uniform(child.data):
                out.append(child)
            elif isinstance(child, tirx.DeclBuffer) and any(_refers(c, child.buffer) for c in after):
                raise LanguageError(
                    f"kernel {self.kernel!r}: buffer {child.buffer.name!r} views a thread's own memory and is "
                    "used across T.sync_threads(); the CPU backend cannot keep such a view across a barrier"
                    + source_location(child.span))
            elif isinstance(child, tirx.Bind) and any(_refers(c, child.var) for c in after):
                if self._uniform(child.value):
                    flush()  # the value may read what the threads before it wrote
                    out.append(child)
                else:
                    slots = self._slot_value(child.var)
                    out.append(tirx.AllocBuffer(slots))
                    pending.append(tirx.BufferStore(slots, child.value, [self.tid]))
            else:
                pending.append(child)
        flush()
        return out[0] if len(out) == 1 else tirx.SeqStmt(out)

    def _slot_buffer(self, buffer: Any) -> Any:
        slots = tirx.decl_buffer([self.count, *buffer.shape], buffer.dtype, buffer.name, scope=buffer.scope())
        self.buffer_slots.append((buffer, slots))
        self.private.append(slots)
        return slots

    def _slot_value(self, var: Any) -> Any:
        slots = tirx.decl_buffer([self.count], var.dtype, f"{var.name}_per_thread", scope="local")
        self.var_slots.append((var, slots))
        self.private += [var, slots]
        return slots

    def _phase(self, stmts: list[Any]) -> Any:
        """``stmts`` run by each thread in turn, with its slots for what crosses barriers."""
        body = stmts[0] if len(stmts) == 1 else tirx.SeqStmt(list(stmts))
        body = self._use_slots(body)
        for var, extent in reversed(self.threads):
            fresh = tirx.Var(var.name, var.dtype)
            body = tirx.For(fresh, 0, extent, _SERIAL, substitute(body, [(var, fresh)]))
        return body

    def _use_slots(self, body: Any) -> Any:
        if not self.var_slots and not self.buffer_slots:
            return body
        tid = self.tid

        def slots_of(buffer: Any) -> Any:
            return next((new for old, new in self.buffer_slots if old.same_as(buffer)), None)

        def on_load(load: Any) -> Any:
            slots = slots_of(load.source)
            return load if slots is None else tirx.BufferLoad(slots, [tid, *load.indices])

        def on_store(store: Any) -> Any:
            slots = slots_of(store.buffer)
            return store if slots is None else tirx.BufferStore(slots, store.value, [tid, *store.indices])

        def on_var(var: Any) -> Any:
            slots = next((new for old, new in self.var_slots if old.same_as(var)), None)
            return var if slots is None else tirx.BufferLoad(slots, [tid])

        body = tvm_ffi.structural_map(body, [(TensorLoad, on_load), (tirx.BufferStore, on_store),
                                             (tirx.Var, on_var)], order="post")
        for old, _ in self.buffer_slots:
            if _refers(body, old):
                raise LanguageError(
                    f"kernel {self.kernel!r}: local buffer {old.name!r} is used across T.sync_threads() "
                    "through its address (T.access_ptr, a view); the CPU backend gives each thread a slot "
                    "of it across a barrier and cannot follow the address. Copy it element by element")
        return body


def _refers(node: Any, var: Any) -> bool:
    return any(v.same_as(var) for v in _vars_in(node))


def run_in_phases(kernel: str, body: Any, threads: list[tuple[Any, Any]]) -> Any:
    """``body`` of a block whose ``threads`` (loop var, extent; outermost first) it reads:
    phases between its barriers, each a loop over the threads. Without a barrier the body
    is one phase; its shared tiles are still the block's, allocated once before it."""
    phases = _Phases(kernel, threads, body)
    if isinstance(body, tirx.SeqStmt):
        return phases._split_sequence(list(body.seq))
    return phases.split(body) if holds_barrier(body) else phases._phase([body])
