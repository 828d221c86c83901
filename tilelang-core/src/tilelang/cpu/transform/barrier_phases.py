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
  "The same" includes a thread's own variable that holds what all threads read alike
  (upstream's top-k: ``l_num_input = s_num_input[r]`` from shared memory, then a loop of
  that many steps with barriers in it): hoist_shared_reads' ``Uniformity`` decides, with
  calls that have effects (an atomic's previous value) counted as the thread's own, and the
  bound is read from the first thread's copy.
- ``if cond: break`` (or ``continue``) in a loop that holds a barrier leaves or skips the
  loop itself, outside the phases, under the same rule for ``cond``; in a phase it would
  have left the loop over the threads.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import tvm
import tvm_ffi
from tvm import tirx
from tvm.ir import TensorLoad
from tvm_ffi.structural import WalkResult

from ...errors import LanguageError
from ...language.bounds import source_location
from ...language.ops import is_block_barrier, is_named_barrier, substitute
from ...transform.gpu.hoist_shared_reads import Uniformity

_SERIAL = tirx.ForKind.SERIAL


def _is_barrier(stmt: Any) -> bool:
    """A block barrier, or a named one (``T.sync_threads(id, count)``): both are phase
    boundaries here; a named one only where its threads are those its branch runs
    (``_Phases._guarded``)."""
    return is_block_barrier(stmt) or (isinstance(stmt, tirx.Evaluate) and is_named_barrier(stmt.value))


def _first_barrier(stmt: Any) -> Any:
    """The first barrier (``T.sync_threads()``, named or not) in ``stmt``, or None."""
    found: list[Any] = []
    tvm_ffi.structural_walk(stmt, (tirx.Evaluate, lambda s: found.append(s) if _is_barrier(s) else None))
    return found[0] if found else None


def _holds_named_barrier(stmt: Any) -> bool:
    found: list[Any] = []
    tvm_ffi.structural_walk(stmt, (tirx.Evaluate, lambda s: found.append(s) if is_named_barrier(s.value) else None))
    return bool(found)


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


def _escapes(stmt: Any) -> bool:
    """Whether ``stmt`` holds a ``break`` or ``continue`` of a loop around it."""
    found: list[Any] = []

    def visit(node: Any) -> Any:
        if isinstance(node, (tirx.For, tirx.While)):
            return WalkResult.SKIP  # its own break and continue
        if isinstance(node, (tirx.Break, tirx.Continue)):
            found.append(node)
        return WalkResult.ADVANCE

    tvm_ffi.structural_walk(stmt, visit, order="pre")
    return bool(found)


class _ValueUniformity(Uniformity):
    """Uniformity where a call with an effect differs between threads (an atomic's previous
    value, an extern function): only pure operators keep an expression uniform."""

    def uniform(self, expr: Any) -> bool:
        impure: list[Any] = []

        def on_call(call: Any) -> None:
            op = call.op
            kind = op.get_attr("TCallEffectKind") if isinstance(op, tvm.ir.Op) else None
            if kind is None or int(kind) > 1:  # kExprAnnotation, kPure
                impure.append(call)

        tvm_ffi.structural_walk(expr, (tirx.Call, on_call))
        return not impure and super().uniform(expr)


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
        self.values = _ValueUniformity(body, [var for var, _ in threads])  # what threads hold alike
        self.guards: list[Any] = []  # conditions of the thread-range branches being split (_guarded)
        self.counted: dict[tuple[int, ...], int | None] = {}  # guards -> threads passing them

    # -- what every thread agrees on --------------------------------------------------------
    def _uniform(self, expr: Any) -> bool:
        private = self.private
        return not any(any(v.same_as(p) for p in private) for v in _vars_in(expr))

    def _require_uniform(self, what: str, expr: Any, stmt: Any) -> Any:
        """``expr`` as every thread's value: itself, or (where the threads hold it alike in
        their own variables) read from the first thread's copy; else a LanguageError."""
        if self._uniform(expr):
            return expr
        if self.values.uniform(expr):
            first = substitute(self._use_slots(expr), [(var, tirx.const(0, var.dtype)) for var, _ in self.threads])
            slots = [new for _, new in self.buffer_slots + self.var_slots]
            if all(any(v.same_as(s) for s in slots) for v in _vars_in(first)
                   if any(v.same_as(p) for p in self.private)):
                return first  # only slots left, read at the first thread
        raise self._skipped_barrier(what, expr, stmt)

    def _skipped_barrier(self, what: str, expr: Any, stmt: Any) -> LanguageError:
        """The error for a barrier under a ``what`` (loop, branch) some threads skip."""
        barrier = _first_barrier(stmt)
        return LanguageError(
            f"kernel {self.kernel!r}: T.sync_threads() inside a {what} that depends on the thread index or on "
            f"a thread's own values ({expr}); the CPU backend runs the block's threads in phases between "
            "barriers, which needs every thread to reach the same barriers (on a GPU, a barrier that some "
            "threads skip hangs or is undefined). Move the barrier out of the "
            f"{what}" + source_location(getattr(barrier, "span", None) or getattr(stmt, "span", None)))

    # -- the phases ---------------------------------------------------------------------------
    def split(self, stmt: Any) -> Any:
        """``stmt``, which holds a barrier, as phases: loops over the threads between barriers."""
        if _is_barrier(stmt):
            if self.guards and is_block_barrier(stmt) and self._passing(self.guards) != self._passing([]):
                raise self._skipped_barrier("branch", self.guards[-1], stmt)
            if not is_block_barrier(stmt) and self._arrivals(stmt.value) != self._passing(self.guards):
                raise LanguageError(
                    f"kernel {self.kernel!r}: named barrier {stmt.value} outside a branch whose threads are "
                    "exactly its arrive count; the CPU backend runs a named barrier as a phase boundary of "
                    "the threads of its branch (`if tx < n: ... T.sync_threads(id, n)`)"
                    + source_location(getattr(stmt, "span", None)))
            return tirx.Evaluate(tirx.const(0, "int32"))
        if isinstance(stmt, tirx.IfThenElse) and not self._uniform(stmt.condition) and \
                not self.values.uniform(stmt.condition) and _holds_named_barrier(stmt):
            return self._guarded(stmt)
        if isinstance(stmt, tirx.SeqStmt):
            return self._split_sequence(list(stmt.seq))
        if isinstance(stmt, tirx.For):
            start = self._require_uniform("loop", stmt.min, stmt)
            extent = self._require_uniform("loop", stmt.extent, stmt)
            return tirx.For(stmt.loop_var, start, extent, _SERIAL, self.split(stmt.body),
                            annotations=stmt.annotations, step=stmt.step, span=stmt.span)
        if isinstance(stmt, tirx.While):
            condition = self._require_uniform("loop", stmt.condition, stmt)
            return tirx.While(condition, self.split(stmt.body), stmt.span)
        if isinstance(stmt, tirx.IfThenElse):
            condition = self._require_uniform("branch", stmt.condition, stmt)
            other = None if stmt.else_case is None else self._part(stmt.else_case)
            return tirx.IfThenElse(condition, self._part(stmt.then_case), other, stmt.span)
        if isinstance(stmt, tirx.AttrStmt):
            self._require_uniform("scope", stmt.value, stmt)
            return tirx.AttrStmt(stmt.node, stmt.attr_key, stmt.value, self.split(stmt.body), stmt.span)
        raise LanguageError(
            f"kernel {self.kernel!r}: T.sync_threads() inside a {type(stmt).__name__}, which the CPU backend "
            "cannot run in phases between barriers; move the barrier out of it"
            + source_location(getattr(_first_barrier(stmt), "span", None)))

    def _jump(self, stmt: Any) -> Any:
        """``if cond: break`` / ``continue`` as a statement of the loop itself (between its
        phases), ``cond`` every thread's."""
        if isinstance(stmt, tirx.IfThenElse) and stmt.else_case is None and \
                isinstance(stmt.then_case, (tirx.Break, tirx.Continue)):
            condition = self._require_uniform("branch", stmt.condition, stmt)
            return tirx.IfThenElse(condition, stmt.then_case, None, stmt.span)
        if isinstance(stmt, (tirx.Break, tirx.Continue)):
            return stmt
        raise LanguageError(
            f"kernel {self.kernel!r}: a break or continue inside a {type(stmt).__name__} of a loop that holds "
            "T.sync_threads(); the CPU backend runs such a loop in phases between its barriers and takes "
            "only `if cond: break` (or continue) with a cond every thread shares"
            + source_location(getattr(stmt, "span", None)))

    # -- thread-range branches with named barriers ---------------------------------------------
    def _guarded(self, stmt: Any) -> Any:
        """``if tx < n: A; T.sync_threads(id, n); B`` (a branch of some of the threads, whose
        barriers are named ones over exactly those threads): A's phase and B's phase, each
        run by the threads the condition keeps (the others skip the branch, as on a GPU)."""
        out = []
        for condition, body in ((stmt.condition, stmt.then_case), (tirx.Not(stmt.condition), stmt.else_case)):
            if body is None:
                continue
            self.guards.append(condition)
            try:
                out.append(self._part(body))
            finally:
                self.guards.pop()
        return out[0] if len(out) == 1 else tirx.SeqStmt(out)

    def _arrivals(self, barrier: Any) -> int | None:
        """The thread count a named barrier waits for (all the block's without one)."""
        if len(barrier.args) > 2:
            count = barrier.args[2]
            return int(count.value) if isinstance(count, tirx.IntImm) else None
        return self._passing([])

    def _passing(self, guards: list[Any]) -> int | None:
        """How many of the block's threads pass every one of ``guards`` (None: not countable)."""
        extents = [int(e.value) if isinstance(e, tirx.IntImm) else None for _, e in self.threads]
        if None in extents:
            return None
        if not guards:
            return math.prod(extents)
        key = tuple(g.__chandle__() for g in guards)
        if key not in self.counted:
            self.counted[key] = self._count(guards, extents)
        return self.counted[key]

    def _count(self, guards: list[Any], extents: list[int]) -> int | None:
        total = math.prod(extents)
        condition = guards[0]
        for g in guards[1:]:
            condition = tirx.And(condition, g)
        if not all(any(v.same_as(t) for t, _ in self.threads) for v in _vars_in(condition)):
            return None  # the condition reads more than the thread index
        analyzer = tvm.sym.Analyzer()
        passing = 0
        for linear in range(total):
            values, rest = [], linear
            for (var, _), extent in zip(reversed(self.threads), reversed(extents)):
                values.append((var, tirx.const(rest % extent, var.dtype)))
                rest //= extent
            value = analyzer.simplify(substitute(condition, values))
            if not isinstance(value, tirx.IntImm):
                return None
            passing += bool(value.value)
        return passing

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
            if _escapes(child):  # `if cond: break` of the loop around the phases
                flush()
                out.append(self._jump(child))
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
        """``stmts`` run by each thread in turn (those the enclosing thread-range branches
        keep), with its slots for what crosses barriers."""
        body = stmts[0] if len(stmts) == 1 else tirx.SeqStmt(list(stmts))
        for guard in reversed(self.guards):
            body = tirx.IfThenElse(guard, body, None)
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
