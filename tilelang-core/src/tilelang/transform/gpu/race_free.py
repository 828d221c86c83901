"""Thread-dependent branches whose shared-memory accesses no two threads share: no
barrier inside them.

TVM's ThreadSync orders every pair of shared-memory accesses that might touch one element
from two threads, and refuses a kernel where such a pair sits inside a branch that only
some threads take ("Cannot insert syncs inside condition": a barrier there could wait for
threads that never come). Its test of "might touch" compares index expressions and knows
nothing of the branch's condition. A bitonic sort's compare-and-swap step (upstream's
DeepSeek-V3.2 sparse-attention top-k, ``if i < j and v[i] > v[j]: swap v[i], v[j]`` with
``j = i ^ (1 << s)``) swaps disjoint pairs: each pair has one owner, and no barrier is
needed until the step ends. Upstream's ThreadSync proves that; TVM's does not.

``race_free_regions`` proves it by counting. For a loop or branch holding such a branch,
with no barrier of its own, it evaluates every shared-memory index the region reaches for
every thread of the block and every iteration of the region's loops (and each iteration of
the loops around it, one at a time), with numpy. Conditions that read memory count as
both true and false, so every access that may happen is counted. The region is race free
when no element that one thread writes is read or written by another. The evaluation
gives up (the region stays as it was) on anything it cannot count: an index that reads
memory, a block index, a loop whose length differs between threads, more than
``MAX_POINTS`` points or ``MAX_OUTER_ITERATIONS`` iterations of the loops around the region.

For ThreadSync, each race-free region stands in as one statement that reads and writes all
of the shared buffers it uses (``tvm_access_ptr`` with mask 3), so barriers still separate
it from what comes before and after it, and the region comes back afterwards. Only a
kernel that ThreadSync refuses takes this path (block_passes.storage_sync).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tvm_ffi
from tvm import tirx
from tvm.ir import TensorLoad

from .branch_barriers import _thread_axis

#: the most (thread, iteration) points one proof evaluates, over all of its outer iterations
MAX_POINTS = 1 << 23
#: the most iterations of the enclosing loops one proof goes through (each evaluated alone)
MAX_OUTER_ITERATIONS = 4096
PLACEHOLDER = "tl_race_free_region"


class _Unknown(Exception):
    """Something the evaluation cannot count."""


_BINARY = {
    "Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "FloorDiv": np.floor_divide,
    "FloorMod": np.mod, "Min": np.minimum, "Max": np.maximum, "BitwiseAnd": np.bitwise_and,
    "BitwiseOr": np.bitwise_or, "BitwiseXor": np.bitwise_xor, "LShift": np.left_shift,
    "RShift": np.right_shift, "LT": np.less, "LE": np.less_equal, "GT": np.greater,
    "GE": np.greater_equal, "EQ": np.equal, "NE": np.not_equal, "And": np.logical_and,
    "Or": np.logical_or,
}


class _Points:
    """The points evaluated: each thread and iteration of the region's loops, as numpy
    axes (axis 0: the thread), and what the values of variables are there."""

    def __init__(self, tid: Any, threads: int, lets: dict[int, Any]) -> None:
        self.env: dict[int, Any] = {tid.__chandle__(): np.arange(threads, dtype=np.int64)}
        self.lets = lets  # every binding of the function: conditions look through them
        self.ndim = 1

    def value(self, expr: Any) -> Any:
        """``expr`` at every point (an int or bool array broadcast over the axes)."""
        name = type(expr).__name__
        if isinstance(expr, tirx.IntImm):
            return np.int64(expr.value)
        if isinstance(expr, tirx.Var):
            key = expr.__chandle__()
            if key in self.env:
                return self.env[key]
            if key in self.lets:  # bound once (SSA): the variable is its value wherever seen
                return self.value(self.lets[key])
            raise _Unknown(expr)
        if name in _BINARY:
            a, b = self.value(expr.a), self.value(expr.b)
            if name in ("FloorDiv", "FloorMod") and np.any(b == 0):
                raise _Unknown(expr)
            return _BINARY[name](a, b)
        if name in ("Div", "Mod"):  # truncating: as floor where both are not negative
            a, b = self.value(expr.a), self.value(expr.b)
            if np.any(a < 0) or np.any(b <= 0):
                raise _Unknown(expr)
            return np.floor_divide(a, b) if name == "Div" else np.mod(a, b)
        if name == "Not":
            return np.logical_not(self.value(expr.a))
        if name == "BitwiseNot":
            return np.invert(self.value(expr.a))
        if isinstance(expr, tirx.Cast) and str(expr.dtype).startswith(("int", "uint", "bool")):
            return self.value(expr.value)
        if isinstance(expr, tirx.Select):
            return np.where(self.value(expr.condition), self.value(expr.true_value), self.value(expr.false_value))
        if isinstance(expr, tirx.Call) and getattr(expr.op, "name", "") in ("prim.if_then_else", "tirx.if_then_else"):
            return np.where(self.value(expr.args[0]), self.value(expr.args[1]), self.value(expr.args[2]))
        raise _Unknown(expr)

    def may_be(self, expr: Any, want: bool) -> Any:
        """Where ``expr`` may be ``want``: exact where it can be evaluated, else True
        (a condition that reads memory may go either way)."""
        try:
            value = self.value(expr)
            return value if want else np.logical_not(value)
        except _Unknown:
            pass
        name = type(expr).__name__
        if name in ("And", "Or"):
            both = (name == "And") == want  # And wanting True, Or wanting False: both sides
            a, b = self.may_be(expr.a, want), self.may_be(expr.b, want)
            return np.logical_and(a, b) if both else np.logical_or(a, b)
        if name == "Not":
            return self.may_be(expr.a, not want)
        if isinstance(expr, tirx.Var) and expr.__chandle__() in self.lets:
            return self.may_be(self.lets[expr.__chandle__()], want)
        return np.True_

    def add_axis(self, var: Any, extent: int) -> None:
        shape = [1] * self.ndim + [extent]
        self.env[var.__chandle__()] = np.arange(extent, dtype=np.int64).reshape(shape)
        self.env = {k: (v[..., None] if isinstance(v, np.ndarray) and v.ndim == self.ndim else v)
                    for k, v in self.env.items()}
        self.ndim += 1


class _Accesses:
    """Each shared buffer's (element, thread, is write) at the points where an access
    may happen."""

    def __init__(self, shared: set[int]) -> None:
        self.shared = shared
        self.found: dict[int, list[tuple[Any, Any, bool]]] = {}

    def add(self, points: _Points, mask: Any, buffer: Any, indices: Any, write: bool) -> None:
        if buffer.__chandle__() not in self.shared:
            if str(buffer.scope()).startswith("shared"):
                raise _Unknown(buffer)  # a view of shared memory (another buffer on its bytes)
            return
        if len(indices) != 1:
            raise _Unknown(buffer)
        index = indices[0]
        if isinstance(index, tirx.Ramp):
            base, stride = points.value(index.base), points.value(index.stride)
            lanes = int(index.lanes)
            values = [base + stride * lane for lane in range(lanes)]
        else:
            values = [points.value(index)]
        tid = points.env[next(iter(points.env))]  # the thread axis (inserted first)
        for value in values:
            full = np.broadcast_arrays(value, tid, mask)
            keep = full[2].astype(bool)
            self.found.setdefault(buffer.__chandle__(), []).append(
                (full[0][keep].ravel(), full[1][keep].ravel(), write))

    def race_free(self) -> bool:
        for entries in self.found.values():
            index = np.concatenate([e[0] for e in entries])
            thread = np.concatenate([e[1] for e in entries])
            write = np.concatenate([np.full(e[0].shape, e[2]) for e in entries])
            if not write.any():
                continue
            order = np.lexsort((thread, index))
            index, thread, write = index[order], thread[order], write[order]
            starts = np.flatnonzero(np.r_[True, index[1:] != index[:-1]])
            lowest = np.minimum.reduceat(thread, starts)
            highest = np.maximum.reduceat(thread, starts)
            written = np.logical_or.reduceat(write, starts)
            if np.any(written & (lowest != highest)):
                return False
        return True


def _loads(node: Any) -> list[Any]:
    found: list[Any] = []
    tvm_ffi.structural_walk(node, (TensorLoad, lambda ld: found.append(ld) if isinstance(ld.source, tirx.Buffer)
                                   else None))
    return found


def _read(expr: Any, points: _Points, mask: Any, accesses: _Accesses) -> None:
    """Records the loads of ``expr`` at the points ``mask`` allows, as the generated code
    makes them: the right side of ``&&`` / ``||`` only where the left side leaves it to
    decide, and ``if_then_else``'s branches only where they are chosen."""
    name = type(expr).__name__
    if name in ("And", "Or"):
        _read(expr.a, points, mask, accesses)
        _read(expr.b, points, np.logical_and(mask, points.may_be(expr.a, name == "And")), accesses)
        return
    if isinstance(expr, tirx.Call) and getattr(expr.op, "name", "") in ("prim.if_then_else", "tirx.if_then_else"):
        cond, then, other = expr.args
        _read(cond, points, mask, accesses)
        _read(then, points, np.logical_and(mask, points.may_be(cond, True)), accesses)
        _read(other, points, np.logical_and(mask, points.may_be(cond, False)), accesses)
        return
    if isinstance(expr, TensorLoad) and isinstance(expr.source, tirx.Buffer):
        for index in expr.indices:
            _read(index, points, mask, accesses)
        accesses.add(points, mask, expr.source, expr.indices, False)
        return
    if isinstance(expr, tirx.Call) and _pointer_args(expr):
        raise _Unknown(expr)  # it may read or write through the address
    children = _children(expr)
    if children is None:  # (a Let, a Shuffle, ...): every load, wherever the expression is
        for load in _loads(expr):
            accesses.add(points, mask, load.source, load.indices, False)
        return
    for child in children:
        _read(child, points, mask, accesses)


def _children(expr: Any) -> list[Any] | None:
    """The operands of an expression that evaluates all of them, or None for another."""
    name = type(expr).__name__
    if name in _BINARY or name in ("Div", "Mod"):
        return [expr.a, expr.b]
    if name in ("Not", "BitwiseNot"):
        return [expr.a]
    if isinstance(expr, (tirx.Cast, tirx.Broadcast)):
        return [expr.value]
    if isinstance(expr, tirx.Ramp):
        return [expr.base, expr.stride]
    if isinstance(expr, tirx.Select):
        return [expr.condition, expr.true_value, expr.false_value]
    if isinstance(expr, (tirx.IntImm, tirx.FloatImm, tirx.Var, tirx.StringImm)):
        return []
    if isinstance(expr, tirx.Call) and not _pointer_args(expr):
        return list(expr.args)
    return None


def _pointer_args(call: Any) -> bool:
    """A call that takes a buffer's address (it may read or write through it)."""
    return any(isinstance(a, tirx.Call) and getattr(a.op, "name", "") in ("tirx.tvm_access_ptr", "tirx.address_of")
               for a in call.args)


def _walk(stmt: Any, points: _Points, mask: Any, accesses: _Accesses) -> None:
    """Records the accesses of ``stmt`` at the points ``mask`` allows."""
    if isinstance(stmt, tirx.SeqStmt):
        for s in stmt.seq:
            _walk(s, points, mask, accesses)
        return
    if isinstance(stmt, tirx.BufferStore):
        _read(stmt.value, points, mask, accesses)
        for index in stmt.indices:
            _read(index, points, mask, accesses)
        accesses.add(points, mask, stmt.buffer, stmt.indices, True)
        return
    if isinstance(stmt, tirx.Bind):
        _read(stmt.value, points, mask, accesses)
        try:
            points.env[stmt.var.__chandle__()] = points.value(stmt.value)
        except _Unknown:
            pass  # a value read from memory: indices that use it are not counted (below)
        return
    if isinstance(stmt, tirx.IfThenElse):
        _read(stmt.condition, points, mask, accesses)
        _walk(stmt.then_case, points, np.logical_and(mask, points.may_be(stmt.condition, True)), accesses)
        if stmt.else_case is not None:
            _walk(stmt.else_case, points, np.logical_and(mask, points.may_be(stmt.condition, False)), accesses)
        return
    if isinstance(stmt, tirx.For):
        if stmt.kind == tirx.ForKind.THREAD_BINDING:
            raise _Unknown(stmt)  # another thread axis
        lo, extent = points.value(stmt.min), points.value(stmt.extent)
        if np.ndim(lo) or np.ndim(extent) or int(lo) != 0 or int(extent) <= 0:
            raise _Unknown(stmt)  # a length that differs between threads, or an offset
        if np.prod(np.broadcast(mask, points.env[next(iter(points.env))]).shape) * int(extent) > MAX_POINTS:
            raise _Unknown(stmt)
        points.add_axis(stmt.loop_var, int(extent))
        _walk(stmt.body, points, mask[..., None] if np.ndim(mask) == points.ndim - 1 else mask, accesses)
        return
    if isinstance(stmt, (tirx.AllocBuffer, tirx.DeclBuffer)) and not str(stmt.buffer.scope()).startswith("shared"):
        return
    if isinstance(stmt, tirx.Evaluate) and not _barriers(stmt):
        _read(stmt.value, points, mask, accesses)
        return
    raise _Unknown(stmt)  # a barrier, a while loop, ...


def _outer_iterations(loops: list[Any], lets: dict[int, Any]) -> list[dict[int, int]] | None:
    """Every combination of the enclosing loops' variables (an inner loop's length may
    name an outer one's variable), or None where one cannot be counted."""
    combos: list[dict[int, int]] = [{}]
    for loop in loops:
        grown = []
        for env in combos:
            points = _Points(tirx.Var("_", "int32"), 1, lets)
            points.env.update({k: np.int64(v) for k, v in env.items()})
            try:
                lo, extent = int(points.value(loop.min)), int(points.value(loop.extent))
            except (_Unknown, TypeError):
                return None
            grown.extend({**env, loop.loop_var.__chandle__(): lo + i} for i in range(extent))
            if len(grown) > MAX_OUTER_ITERATIONS:
                return None
        combos = grown
    return combos


def _vars(node: Any, lets: dict[int, Any]) -> set[int]:
    """The variables ``node`` names, and those their bindings name, transitively."""
    found: set[int] = set()
    todo = [node]
    while todo:
        names: list[Any] = []
        tvm_ffi.structural_walk(todo.pop(), (tirx.Var, names.append))
        for var in names:
            key = var.__chandle__()
            if key not in found:
                found.add(key)
                if key in lets:
                    todo.append(lets[key])
    return found


def _needed(outer: list[Any], region: Any, lets: dict[int, Any]) -> list[Any]:
    """The enclosing loops whose variables the region depends on (or the length of such a
    loop does): the others do not change what it touches."""
    used = _vars(region, lets)
    kept: list[Any] = []
    for loop in reversed(outer):
        if loop.loop_var.__chandle__() in used:
            kept.insert(0, loop)
            used |= _vars(loop.min, lets) | _vars(loop.extent, lets)
    return kept


def is_race_free(region: Any, outer: list[Any], tid: Any, threads: int, shared: set[int],
                 lets: dict[int, Any]) -> bool:
    """No shared element that one thread writes in ``region`` is read or written there by
    another, for any iteration of the ``outer`` loops."""
    combos = _outer_iterations(_needed(outer, region, lets), lets)
    if combos is None:
        return False
    for env in combos:
        points = _Points(tid, threads, lets)
        points.env.update({k: np.int64(v) for k, v in env.items()})
        accesses = _Accesses(shared)
        try:
            _walk(region, points, np.True_, accesses)
        except (_Unknown, ValueError, OverflowError):
            return False
        if not accesses.race_free():
            return False
    return True


def _barriers(node: Any) -> bool:
    found: list[Any] = []
    tvm_ffi.structural_walk(node, (tirx.Call, lambda c: found.append(c) if getattr(c.op, "name", "") in (
        "tirx.tvm_storage_sync", "tirx.tvm_thread_allreduce") else None))
    return bool(found)


def _thread_dependent(cond: Any, tid: Any, lets: dict[int, Any]) -> bool:
    """``cond`` (through the bindings it names) reads the thread index or memory."""
    names = _vars(cond, lets)
    return tid.__chandle__() in names or bool(_loads(cond)) or any(_loads(lets[k]) for k in names if k in lets)


def hide_race_free_regions(func: Any) -> tuple[Any, dict[int, Any]]:
    """``func`` with each race-free region that holds a thread-dependent branch with
    shared-memory accesses replaced by its placeholder, and the regions by placeholder
    id. The largest barrier-free region around such a branch is tried first, then the
    ones inside it."""
    axis = _thread_axis(func.body)
    if axis is None:
        return func, {}
    tid, threads = axis[0].node.var, axis[1]
    lets: dict[int, Any] = {}
    tvm_ffi.structural_walk(func.body, (tirx.Bind, lambda b: lets.__setitem__(b.var.__chandle__(), b.value)))
    shared: dict[int, Any] = {}
    tvm_ffi.structural_walk(func.body, (tirx.AllocBuffer, lambda a: shared.__setitem__(a.buffer.__chandle__(),
                                                                                      a.buffer)
                                        if str(a.buffer.scope()).startswith("shared") else None))
    if not shared:
        return func, {}
    chosen: list[Any] = []

    def candidates(stmt: Any, chain: list[Any]) -> None:
        """Visits ``stmt`` under its enclosing loops and branches (``chain``)."""
        if isinstance(stmt, tirx.IfThenElse) and _thread_dependent(stmt.condition, tid, lets) \
                and _touched(stmt, shared) and not any(stmt.same_as(c) for c in chosen):
            path = [*chain, stmt]
            free = [i for i, s in enumerate(path) if not _barriers(s)]
            for at in free:  # outermost first
                region = path[at]
                outer = [s for s in path[:at] if isinstance(s, tirx.For)]
                if is_race_free(region, outer, tid, threads, set(shared), lets):
                    chosen.append(region)
                    return
        if isinstance(stmt, tirx.SeqStmt):
            for s in stmt.seq:
                candidates(s, chain)
        elif isinstance(stmt, (tirx.For, tirx.While)):
            candidates(stmt.body, [*chain, stmt])
        elif isinstance(stmt, tirx.IfThenElse):
            candidates(stmt.then_case, [*chain, stmt])
            if stmt.else_case is not None:
                candidates(stmt.else_case, [*chain, stmt])
        elif isinstance(stmt, tirx.AttrStmt):
            candidates(stmt.body, chain)

    candidates(func.body, [])
    chosen = [r for r in chosen if not any(o is not r and _contains(o, r) for o in chosen)]
    if not chosen:
        return func, {}
    regions: dict[int, Any] = {}

    def on_stmt(stmt: Any) -> Any:
        for region in chosen:
            if stmt.same_as(region):
                key = len(regions)
                regions[key] = region
                used = [shared[k] for k in sorted(_touched(region, shared))]
                return tirx.Evaluate(tirx.call_extern("int32", PLACEHOLDER, key,
                                                      *[b.access_ptr("rw") for b in used]))
        return stmt

    body = tvm_ffi.structural_map(func.body, [(tirx.For, on_stmt), (tirx.IfThenElse, on_stmt)], order="pre")
    return func.with_body(body), regions


def restore_regions(func: Any, regions: dict[int, Any]) -> Any:
    """``func`` with each placeholder replaced by its region again."""
    def on_evaluate(stmt: Any) -> Any:
        call = stmt.value
        if isinstance(call, tirx.Call) and len(call.args) > 1 and isinstance(call.args[0], tirx.StringImm) \
                and call.args[0].value == PLACEHOLDER:
            return regions[int(call.args[1].value)]
        return stmt

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.Evaluate, on_evaluate), order="post"))


def _touched(node: Any, shared: dict[int, Any]) -> set[int]:
    keys = {ld.source.__chandle__() for ld in _loads(node)}
    tvm_ffi.structural_walk(node, (tirx.BufferStore, lambda s: keys.add(s.buffer.__chandle__())))
    return keys & set(shared)


def _contains(outer: Any, inner: Any) -> bool:
    found: list[Any] = []
    tvm_ffi.structural_walk(outer, [(tirx.For, lambda s: found.append(s) if s.same_as(inner) else None),
                                    (tirx.IfThenElse, lambda s: found.append(s) if s.same_as(inner) else None)])
    return bool(found)
