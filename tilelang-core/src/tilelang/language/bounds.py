"""Compile-time index and store checks, run when a kernel is parsed, with the source line.

First, as upstream does, an index that is negative whatever the loop and block indices
are counts from the end of its axis, as in Python (``A[-1]`` is the last element,
``A[-i - 1]`` for i in T.serial(4) the last four in reverse). An index that may be either
sign is left as written (upstream's rule too).

Two kinds of access are certain to leave their buffer, so they are LanguageErrors:
- an index that is out of range whatever the loop and block indices are (``C[-1, 0]``,
  ``A[64, 0]`` on a (64, n) tensor, ``A[i + 64]`` for i in T.Parallel(8) on 64 rows);
- an unguarded index of a tile (shared, fragment, local) made only of loop and block
  indices of constant extent that runs past a constant extent for some of them (``S[i, j]``
  in ``T.Parallel(640, 8)`` over a (64, 8) tile: before, the heap past the tile was
  overwritten). The same index of a global tensor is guarded when the kernel is compiled,
  as upstream guards it (tilelang.transform.safe_memory): its write is skipped and its read
  gives 0 where it is outside (a hand-written vector index is still refused: the guard
  is per element).
Each lane of a hand-written vector index (``T.Ramp(base, stride, n)``) is an index too: the
ramp spans its first and last lane, and one negative in every lane moves as a whole.
Anything guarded by an ``if`` or ``T.if_then_else`` (the edge tiles of every tiled kernel),
or depending on a symbolic size or a runtime value, is left to the opt-in runtime check
(``tl.bounds_check``).

A float value stored into an integer or bool buffer is refused too: TVMScript inserts the
conversion (truncation toward zero) silently, with only a C++ warning on stderr. An explicit
``T.cast(value, dtype)`` says the truncation is meant (TVMScript gives that cast the
source span the implicit one lacks, which is how the two are told apart).
"""

from __future__ import annotations

import linecache
from typing import Any, NamedTuple

import tvm
import tvm_ffi
from tvm import tirx
from tvm.ir import Range
from tvm.sym.analyzer import Analyzer

from ..errors import LanguageError

#: the conditional expression ops (a read in one of their branches is guarded by the condition)
_IF_THEN_ELSE = ("prim.if_then_else", "tirx.if_then_else")


def source_location(span: Any) -> str:
    """`` --> file:line:column`` and the line itself, as TVMScript's diagnostics show it."""
    if span is None or not getattr(span, "line", 0):
        return ""
    path = span.source_name.name
    text = linecache.getline(path, span.line).rstrip()
    where = f"\n --> {path}:{span.line}:{span.column}"
    return where + (f"\n {span.line} | {text}" if text else "")


def _access(buffer: Any, indices: Any) -> str:
    return f"{buffer.name}[{', '.join(str(i) for i in indices)}]"


class _Checker:
    def __init__(self) -> None:
        self.analyzer = Analyzer()
        self.ranged: list[Any] = []  # loop and block variables with constant extents
        #: fragment -> the extent its loops index it to, per axis (see ``grown_fragments``)
        self.grow: dict[int, tuple[Any, list[int], Any]] = {}

    def bind(self, var: Any, start: Any, extent: Any) -> None:
        if isinstance(start, tirx.IntImm) and isinstance(extent, tirx.IntImm) and extent.value > 0:
            self.analyzer.bind(var, Range.from_min_extent(start, extent))
            self.ranged.append(var)

    def _grow(self, buffer: Any, axis: int, extent: int, span: Any) -> None:
        key = buffer.__chandle__()
        _, extents, first = self.grow.get(key, (buffer, [int(d.value) for d in buffer.shape], span))
        extents[axis] = max(extents[axis], extent)
        self.grow[key] = (buffer, extents, first)

    def _grown(self, buffer: Any, axis: int, bound: Any) -> bool:
        """A read of a fragment that a loop write grew, within the grown extent."""
        entry = self.grow.get(buffer.__chandle__())
        return entry is not None and 0 <= bound.min_value and bound.max_value < entry[1][axis]

    def only_ranged(self, expr: Any) -> bool:
        free: list[Any] = []
        tvm_ffi.structural_walk(expr, [(tirx.Var, free.append)])
        return all(any(v.same_as(r) for r in self.ranged) for v in free)

    def check(self, buffer: Any, indices: Any, span: Any, guarded: bool, what: str) -> None:
        for axis, (index, extent) in enumerate(zip(indices, buffer.shape)):
            bound = _lane_bound(self.analyzer, index)
            if bound is None:
                continue  # a vector index other than T.Ramp / T.Broadcast
            constant_extent = int(extent.value) if isinstance(extent, tirx.IntImm) else None
            never_inside = bound.max_value < 0 or (constant_extent is not None and bound.min_value >= constant_extent)
            # a global tensor's edge is guarded when the kernel is compiled (transform/safe_memory.py)
            sometimes_outside = (not guarded and constant_extent is not None and self.only_ranged(index)
                                 and (buffer.scope() != "global" or isinstance(index, (tirx.Ramp, tirx.Broadcast)))
                                 and (bound.min_value < 0 or bound.max_value >= constant_extent))
            if sometimes_outside and not never_inside and bound.min_value >= 0 and \
                    buffer.scope() == "local.fragment" and what == "write" or self._grown(buffer, axis, bound):
                self._grow(buffer, axis, bound.max_value + 1, span)
                continue
            if never_inside or sometimes_outside:
                values = ("" if isinstance(index, tirx.IntImm) else f" ({bound.min_value})"
                          if bound.min_value == bound.max_value else f" (from {bound.min_value} to {bound.max_value})")
                fix = ("shrink the loop to the buffer's extent or guard the access (if ... < extent:)"
                       if sometimes_outside and not never_inside else "fix the index")
                raise LanguageError(
                    f"out-of-range index: {what} {_access(buffer, indices)} uses index {index}"
                    f"{values} on axis {axis} of {buffer.name}, whose extent is {extent} "
                    f"(shape ({', '.join(str(d) for d in buffer.shape)})); {fix}"
                    + source_location(span)
                )

    def loads(self, expr: Any, span: Any, guarded: bool) -> None:
        from tvm.ir import Call, TensorLoad

        under_guard: list[Any] = []

        def on_call(call: Any) -> None:
            if str(getattr(call.op, "name", "")) in _IF_THEN_ELSE:
                for branch in call.args[1:]:
                    tvm_ffi.structural_walk(branch, [(TensorLoad, under_guard.append)])

        tvm_ffi.structural_walk(expr, [(Call, on_call)])
        found: list[Any] = []
        tvm_ffi.structural_walk(expr, [(TensorLoad, found.append)])
        for load in found:
            inner = guarded or any(load.same_as(g) for g in under_guard)
            self.check(load.source, load.indices, span, inner, "read")

    def stmt(self, node: Any, guarded: bool) -> None:
        if isinstance(node, tirx.SeqStmt):
            for s in node.seq:
                self.stmt(s, guarded)
        elif isinstance(node, tirx.For):
            self.bind(node.loop_var, node.min, node.extent)
            self.stmt(node.body, guarded)
        elif isinstance(node, tirx.IfThenElse):
            self.loads(node.condition, node.span, guarded)
            self.stmt(node.then_case, True)
            if node.else_case is not None:
                self.stmt(node.else_case, True)
        elif isinstance(node, tirx.BufferStore):
            _check_store_type(node)
            self.check(node.buffer, node.indices, node.span, guarded, "write")
            for expr in (node.value, *node.indices):
                self.loads(expr, node.span, guarded)
        elif isinstance(node, tirx.AttrStmt):
            if node.attr_key == "thread_extent" and isinstance(node.node, tirx.IterVar):
                self.bind(node.node.var, tirx.const(0, "int32"), node.value)
            self.stmt(node.body, guarded)
        elif isinstance(node, tirx.While):
            self.stmt(node.body, True)  # its condition may guard the body
        elif isinstance(node, tirx.Evaluate):
            self.loads(node.value, node.span, guarded)
        else:
            body = getattr(node, "body", None)
            value = getattr(node, "value", None)
            if value is not None and not isinstance(value, (int, str)):
                self.loads(value, node.span, guarded)
            if isinstance(body, tirx.Stmt):
                self.stmt(body, guarded)


class _Bound(NamedTuple):
    min_value: int
    max_value: int


def _bound_bitwise(analyzer: Analyzer, expr: Any) -> Any:
    """``expr`` with each ``a ^ b`` / ``a | b`` / ``a & b`` of non-negative operands replaced
    by a fresh variable bound to the values it can take (``tx ^ 1`` for tx in [0, 1024) is in
    [0, 1023]): TVM's bound analysis gives bitwise operations the type's whole range, and
    an index of that range looked out of bounds (upstream's issue 1257)."""

    def on_bitwise(node: Any) -> Any:
        a, b = (analyzer.const_int_bound(x) for x in (node.a, node.b))
        if a.min_value < 0 or b.min_value < 0:
            return node
        top = (min(a.max_value, b.max_value) if isinstance(node, tirx.BitwiseAnd)
               else (1 << max(a.max_value, b.max_value).bit_length()) - 1)
        if top >= 2 ** 31:
            return node
        dtype = str(node.ty.dtype)
        var = tirx.Var("bits", dtype)
        analyzer.bind(var, Range.from_min_extent(tirx.const(0, dtype), tirx.const(top + 1, dtype)))
        return var

    return tvm_ffi.structural_map(expr, [(t, on_bitwise) for t in (tirx.BitwiseXor, tirx.BitwiseOr, tirx.BitwiseAnd)],
                                  order="post")


def _lane_bound(analyzer: Analyzer, index: Any) -> _Bound | None:
    """The least and greatest value of an index over every lane: a ``T.Ramp(base, stride,
    n)`` spans its first and last lane, a ``T.Broadcast`` its value; None for another
    vector expression."""
    index = _bound_bitwise(analyzer, index)
    if isinstance(index, tirx.Ramp):
        lanes = int(tvm.DataType(str(index.ty)).lanes)
        ends = [analyzer.const_int_bound(index.base),
                analyzer.const_int_bound(index.base + index.stride * (lanes - 1))]
        return _Bound(min(b.min_value for b in ends), max(b.max_value for b in ends))
    if isinstance(index, tirx.Broadcast):
        index = index.value
    elif "x" in str(getattr(index.ty, "dtype", "")):
        return None
    bound = analyzer.const_int_bound(index)
    return _Bound(bound.min_value, bound.max_value)


def _dtype(expr: Any) -> str:
    return str(getattr(getattr(expr, "ty", None), "dtype", ""))


def _check_store_type(store: Any) -> None:
    value = store.value
    if not isinstance(value, tirx.Cast) or value.span is not None:
        return
    target, source = _dtype(value), _dtype(value.value)
    if isinstance(value.value, tirx.FloatImm) and float(value.value.value).is_integer():
        return  # `acc[0] = 0.0` into an int buffer: nothing is lost
    if target.startswith(("int", "uint", "bool")) and source.startswith(("float", "bfloat")):
        raise LanguageError(
            f"a {source} value is stored into {store.buffer.name}, a {target} buffer: the fraction "
            f"would be dropped silently; write T.cast(value, {target!r}) to truncate toward zero "
            "(or T.round / T.floor first), or store into a float buffer" + source_location(store.span)
        )


def _ranges(body: Any) -> Analyzer:
    """An analyzer that knows the range of every loop and thread index of constant extent
    (each variable is bound once in TIR, so one analyzer serves the whole function)."""
    checker = _Checker()

    def on_for(loop: Any) -> None:
        checker.bind(loop.loop_var, loop.min, loop.extent)

    def on_attr(attr: Any) -> None:
        if attr.attr_key == "thread_extent" and isinstance(attr.node, tirx.IterVar):
            checker.bind(attr.node.var, tirx.const(0, "int32"), attr.value)

    tvm_ffi.structural_walk(body, [(tirx.For, on_for), (tirx.AttrStmt, on_attr)])
    return checker.analyzer


def legalize_negative_indices(func: Any) -> Any:
    """Every index certain to be negative, and not below minus its axis' extent, plus that
    extent (upstream's LegalizeNegativeIndex): Python's meaning of ``A[-1]``. A ``T.Ramp``
    whose lanes may be of either sign wraps lane by lane, as upstream's does (a scalar index
    of unknown sign stays as written). Not under an ``if``: the bounds here ignore conditions,
    and ``if tx >= 128: s[T.Ramp(tx - 128, 1, 8)]`` is never negative."""
    from tvm.ir import Call, TensorLoad

    analyzer = _ranges(func.body)
    guarded: set[int] = set()  # the accesses under a condition (an if, or T.if_then_else's branches)

    def note(node: Any) -> None:
        tvm_ffi.structural_walk(node, [(TensorLoad, lambda n: guarded.add(n.__chandle__())),
                                       (tirx.BufferStore, lambda n: guarded.add(n.__chandle__()))])

    def on_if(stmt: Any) -> None:
        note(stmt.then_case)
        if stmt.else_case is not None:
            note(stmt.else_case)

    def on_call(call: Any) -> None:
        if str(getattr(call.op, "name", "")) in _IF_THEN_ELSE:
            for branch in call.args[1:]:
                note(branch)

    tvm_ffi.structural_walk(func.body, [(tirx.IfThenElse, on_if), (Call, on_call)])

    def legal(buffer: Any, indices: Any, under_condition: bool) -> list[Any] | None:
        changed, out = False, []
        for index, extent in zip(indices, buffer.shape):
            bound = _lane_bound(analyzer, index)
            if bound is not None and bound.max_value < 0 and (not isinstance(extent, tirx.IntImm)
                                                              or bound.min_value >= -extent.value):
                if isinstance(index, tirx.Ramp):  # every lane negative: the ramp moves as a whole
                    base = analyzer.simplify(index.base + tirx.Cast(str(index.base.ty), extent))
                    index = tirx.Ramp(base, index.stride, index.lanes)
                elif not isinstance(index, tirx.Broadcast):
                    index = analyzer.simplify(index + tirx.Cast(str(index.ty), extent))
                changed = changed or not isinstance(index, tirx.Broadcast)
            elif not under_condition and bound is not None and isinstance(index, tirx.Ramp) and \
                    bound.min_value < 0 <= bound.max_value and \
                    isinstance(extent, tirx.IntImm) and -extent.value <= bound.min_value <= bound.max_value < extent.value:
                # lanes of either sign (issue 2554's T.Ramp(t - 2, 1, 4)): each negative lane wraps
                lanes, dtype = int(tvm.DataType(str(index.ty)).lanes), _dtype(index.base)
                zero, size = tirx.Broadcast(tirx.IntImm(dtype, 0), lanes), tirx.Broadcast(tirx.IntImm(dtype, extent.value), lanes)
                index, changed = tirx.Select(tirx.LT(index, zero), index + size, index), True
            out.append(index)
        return out if changed else None

    def on_load(load: Any) -> Any:
        indices = legal(load.source, load.indices, load.__chandle__() in guarded) \
            if isinstance(load.source, tirx.Buffer) else None
        return load if indices is None else tirx.BufferLoad(load.source, indices, span=load.span)

    def on_store(store: Any) -> Any:
        indices = legal(store.buffer, store.indices, store.__chandle__() in guarded)
        return store if indices is None else tirx.BufferStore(store.buffer, store.value, indices, span=store.span)

    body = tvm_ffi.structural_map(func.body, [(TensorLoad, on_load), (tirx.BufferStore, on_store)], order="post")
    return func if body.same_as(func.body) else func.with_body(body)


def check_constant_bounds(func: Any) -> Any:
    """Raise LanguageError (with the source line) for an access certain to leave its buffer.

    One exception, upstream's: a fragment (T.alloc_fragment) that a loop writes past its
    declared extent. Upstream gives a fragment the registers the loops that write it need,
    and its examples rely on it (the attention-sink kernels declare ``sinks`` with
    ``heads`` elements and fill and read ``block_M``). Such a fragment is sized to what its
    loops write, with a warning that names the declaration to fix; returns the function with
    those fragments grown."""
    checker = _Checker()
    checker.stmt(func.body, False)
    if not checker.grow:
        return func
    import warnings

    replaced: list[tuple[Any, Any]] = []
    for buffer, extents, span in checker.grow.values():
        declared = tuple(int(d.value) for d in buffer.shape)
        warnings.warn(f"T.alloc_fragment {buffer.name!r} is declared {declared} but its loops write it up to "
                      f"{tuple(e - 1 for e in extents)}: it is sized {tuple(extents)}, as upstream sizes a fragment "
                      f"by the loops that write it; declare it {tuple(extents)}" + source_location(span),
                      stacklevel=4)
        replaced.append((buffer, tirx.decl_buffer(extents, buffer.dtype, name=buffer.name, scope=buffer.scope())))

    def on_buffer(buffer: Any) -> Any:
        for old, new in replaced:
            if buffer.same_as(old):
                return new
        return buffer

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.Buffer, on_buffer), order="post"))


__all__ = ["check_constant_bounds", "legalize_negative_indices", "source_location"]
