"""Element accesses of global tensors that may leave them are guarded (upstream's
LegalizeSafeMemoryAccess): a write whose index is not known to be inside its tensor
happens only where it is, and such a read gives 0 (or the tensor's
``T.annotate_safe_value``, already applied by the frontend) instead of reading past it.

"Known" is what TVM's analyzer proves from the ranges of the loops and of the block and
thread indices around the access and the conditions of the ``if`` / ``T.if_then_else`` /
``T.Select`` it sits in, and the ``T.assume(cond)`` before it in its block of statements
(upstream's way to say an index is inside: no guard then). An axis of a symbolic extent (``T.dynamic`` / ``T.symbolic``) is
guarded below (a negative index) but not above: there, as before, the caller answers for
the sizes (``tl.bounds_check`` reports a violation at run time), which keeps the vector
accesses of dynamic-shape kernels (a guard per element is not a vector); upstream guards
those too. A tiled kernel over sizes its tiles divide needs no guard; its
edge tiles over sizes they do not divide get one, as upstream's kernels expect (upstream's
grouped GEMM writes ``C[m_start + i, by * block_N + j]`` for N = 96 with block_N = 64 and
relies on it: before, the columns past 96 were written over whatever followed C). Tile ops
(``T.copy``, ``T.gemm``, tile atomics) guard their own accesses and are left alone; an
element atomic (``T.atomic_add(C[i], v)``) happens only where its target is inside. The
``tl.disable_safe_memory_legalize`` pass config turns this off, as upstream's does.
"""

from __future__ import annotations

import contextlib
from typing import Any

import tvm_ffi
from tvm import tirx
from tvm.ir import Call, Range, TensorLoad
from tvm.sym.analyzer import Analyzer

from ..backend.pass_pipeline.dead_bindings import only_reads_state
from ..language.ops import uses_var

DISABLE_CONFIG = "tl.disable_safe_memory_legalize"
_CONDITIONALS = ("tirx.if_then_else", "prim.if_then_else")
#: calls that take an element as a place (its address), by the argument's position
_LOCATIONS = {"tl.atomic_rmw_element": 1, "tl.atomic_load_element": 0, "tl.atomic_store_element": 0,
              "tirx.address_of": 0}


def _global(buffer: Any) -> bool:
    return isinstance(buffer, tirx.Buffer) and buffer.scope() == "global"


def _assumed(stmt: Any) -> Any | None:
    """The condition of ``T.assume(cond)`` (TVM's ``tirx.assume``), else None."""
    value = stmt.value if isinstance(stmt, tirx.Evaluate) else None
    if isinstance(value, Call) and getattr(value.op, "name", "") == "tirx.assume":
        return value.args[0]
    return None


def _and(conditions: list[Any]) -> Any:
    out = conditions[0]
    for c in conditions[1:]:
        out = tirx.And(out, c)
    return out


class _Guard:
    def __init__(self) -> None:
        self.analyzer = Analyzer()
        self.changed = False
        self.guards: list[Any] = []  # the guards made (a loop around one may move inside it)

    # -- what is not known ---------------------------------------------------------------

    def outside(self, buffer: Any, indices: Any) -> list[Any]:
        """The conditions of ``buffer[indices]`` being inside that the analyzer cannot prove
        (a vector index, T.Ramp and the like, is left alone)."""
        needed = []
        for index, extent in zip(indices, buffer.shape):
            if "x" in str(getattr(index.ty, "dtype", "")):
                return []
            conditions = [index >= 0]
            if isinstance(extent, tirx.IntImm):  # a symbolic extent: the caller's (see the module docstring)
                conditions.append(index < tirx.const(extent.value, str(index.ty)))
            needed += [c for c in conditions if not self.analyzer.can_prove(c)]
        if not all(only_reads_state(c) for c in needed):
            return []  # an index with an effect (an atomic's previous value) is not evaluated twice
        return needed

    def location(self, call: Any) -> Any | None:
        """The element a call takes as a place (an atomic's target, ``T.address_of``'s
        operand), which is not read as a value."""
        position = _LOCATIONS.get(str(getattr(call.op, "name", "")))
        if position is None or position >= len(call.args):
            return None
        place = call.args[position]
        return place if isinstance(place, TensorLoad) else None

    def place_outside(self, call: Any) -> list[Any]:
        place = self.location(call) if isinstance(call, Call) else None
        return self.outside(place.source, place.indices) if place is not None and _global(place.source) else []

    def expr(self, expr: Any) -> Any:
        """``expr`` with each global read that may leave its tensor guarded (an element
        taken as a place: the call that takes it happens only where it is inside, else
        gives 0)."""
        loads: list[Any] = []
        tvm_ffi.structural_walk(expr, [(TensorLoad, loads.append)])
        if not any(_global(load.source) for load in loads):
            return expr
        held: list[tuple[Any, Any]] = []  # (load, the condition of the branch it is in)

        def within(branch: Any, condition: Any) -> None:
            tvm_ffi.structural_walk(branch, [(TensorLoad, lambda load: held.append((load, condition)))])

        def on_call(call: Any) -> None:
            if str(getattr(call.op, "name", "")) in _CONDITIONALS:
                within(call.args[1], call.args[0])
                within(call.args[2], tirx.Not(call.args[0]))

        def on_select(select: Any) -> None:
            within(select.true_value, select.condition)
            within(select.false_value, tirx.Not(select.condition))

        tvm_ffi.structural_walk(expr, [(Call, on_call), (tirx.Select, on_select)])

        places: list[Any] = []
        tvm_ffi.structural_walk(expr, [(Call, lambda c: places.append(self.location(c)))])
        places = [p for p in places if p is not None]

        def on_load(load: Any) -> Any:
            if not _global(load.source) or any(load.same_as(p) for p in places):
                return load
            needed = self.outside(load.source, load.indices)
            branch = [c for held_load, c in held if held_load.same_as(load)]
            if needed and branch:
                with self.analyzer.constraint_scope(_and(branch)):
                    needed = [c for c in needed if not self.analyzer.can_prove(c)]
            if not needed:
                return load
            self.changed = True
            return tirx.if_then_else(_and(needed), load, tirx.const(0, str(load.source.dtype)))

        def on_place_call(call: Any) -> Any:
            needed = self.place_outside(call)
            if not needed:
                return call
            self.changed = True
            return tirx.if_then_else(_and(needed), call, tirx.const(0, str(call.ty.dtype)))

        return tvm_ffi.structural_map(expr, [(TensorLoad, on_load), (Call, on_place_call)], order="post")

    # -- statements ----------------------------------------------------------------------

    def guard(self, condition: Any, stmt: Any, span: Any) -> Any:
        self.changed = True
        guarded = tirx.IfThenElse(condition, stmt, None, span=span)
        self.guards.append(guarded)
        return guarded

    def stmt(self, node: Any) -> Any:
        if isinstance(node, tirx.SeqStmt):
            with contextlib.ExitStack() as promises:  # T.assume(cond): cond holds for what follows it
                seq = []
                for s in node.seq:
                    seq.append(self.stmt(s))
                    if _assumed(s) is not None:
                        promises.enter_context(self.analyzer.constraint_scope(_assumed(s)))
            return node if all(a.same_as(b) for a, b in zip(seq, node.seq)) else tirx.SeqStmt(seq)
        if isinstance(node, tirx.For):
            step = getattr(node, "step", None)
            if step is None or (isinstance(step, tirx.IntImm) and step.value == 1):
                self.analyzer.bind(node.loop_var, Range.from_min_extent(node.min, node.extent))
            body = self.stmt(node.body)
            if body.same_as(node.body):
                return node
            hoist = (node.kind == tirx.ForKind.SERIAL and isinstance(body, tirx.IfThenElse) and body.else_case is None
                     and any(body.same_as(g) for g in self.guards) and not uses_var(body.condition, node.loop_var))
            inner = body.then_case if hoist else body
            loop = tirx.For(node.loop_var, node.min, node.extent, node.kind, inner, node.thread_binding,
                            node.annotations, step, span=node.span)
            # (a lane loop's guard, e.g. T.atomic_addx4's rows: the loop stays whole, one vector add)
            return self.guard(body.condition, loop, node.span) if hoist else loop
        if isinstance(node, tirx.AttrStmt):
            if node.attr_key == "thread_extent" and isinstance(node.node, tirx.IterVar):
                self.analyzer.bind(node.node.var, Range.from_min_extent(tirx.const(0, str(node.value.ty)), node.value))
            body = self.stmt(node.body)
            return node if body.same_as(node.body) else tirx.AttrStmt(node.node, node.attr_key, node.value, body,
                                                                      span=node.span)
        if isinstance(node, tirx.IfThenElse):
            condition = self.expr(node.condition)
            with self.analyzer.constraint_scope(node.condition):
                then_case = self.stmt(node.then_case)
            else_case = node.else_case
            if else_case is not None:
                with self.analyzer.constraint_scope(tirx.Not(node.condition)):
                    else_case = self.stmt(else_case)
            if condition.same_as(node.condition) and then_case.same_as(node.then_case) and \
                    (else_case is None or else_case.same_as(node.else_case)):
                return node
            return tirx.IfThenElse(condition, then_case, else_case, span=node.span)
        if isinstance(node, (tirx.LetStmt, tirx.Bind)):  # binds its variable for the statements after it
            value = self.expr(node.value)
            if str(getattr(node.value.ty, "dtype", "")).startswith(("int", "uint")):
                self.analyzer.bind(node.var, node.value)  # (a pointer's binding says nothing of ranges)
            return node if value.same_as(node.value) else type(node)(node.var, value, span=node.span)
        if isinstance(node, tirx.BufferStore):
            return self.store(node)
        if isinstance(node, tirx.Evaluate):
            from ..language.ops import TILE_OPS

            call = node.value
            if isinstance(call, tirx.Call) and str(getattr(call.op, "name", "")) in TILE_OPS.values():
                return node  # a tile op guards its own accesses
            if _assumed(node) is not None:
                return node  # a promise to the compiler: nothing of it runs in the kernel
            place = self.location(call) if isinstance(call, Call) else None
            if place is None:
                value = self.expr(call)
                return node if value.same_as(call) else tirx.Evaluate(value, span=node.span)
            # an atomic as a statement: it happens only where its target is
            args = [a if a.same_as(place) else self.expr(a) for a in call.args]
            if any(not a.same_as(b) for a, b in zip(args, call.args)):
                node = tirx.Evaluate(Call(call.op, args, ret_ty=call.ty), span=node.span)
            needed = self.place_outside(call)
            if not needed:
                return node
            return self.guard(_and(needed), node, node.span)
        if isinstance(node, tirx.While):
            condition = self.expr(node.condition)
            body = self.stmt(node.body)
            return node if condition.same_as(node.condition) and body.same_as(node.body) else tirx.While(
                condition, body, span=node.span)
        return node  # declarations, asserts, ...: no element access of a tensor

    def store(self, node: Any) -> Any:
        needed = self.outside(node.buffer, node.indices) if _global(node.buffer) else []
        if needed:  # the value and indices are read only where the write happens
            with self.analyzer.constraint_scope(_and(needed)):
                value, indices = self.expr(node.value), [self.expr(i) for i in node.indices]
        else:
            value, indices = self.expr(node.value), [self.expr(i) for i in node.indices]
        changed = not value.same_as(node.value) or any(not a.same_as(b) for a, b in zip(indices, node.indices))
        store = tirx.BufferStore(node.buffer, value, indices, span=node.span) if changed else node
        if not needed:
            return store
        return self.guard(_and(needed), store, node.span)


def guard_global_accesses(func: Any) -> Any:
    """``func`` with the accesses of the module docstring guarded."""
    guard = _Guard()
    body = guard.stmt(func.body)
    return func.with_body(body) if guard.changed else func


__all__ = ["DISABLE_CONFIG", "guard_global_accesses"]
