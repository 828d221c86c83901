"""LegalizeVectorizedLoops: a ``T.vectorized(n)`` loop as vectors a GPU can load and store.

TVM's vectorizer turns such a loop into one vector of n lanes, whatever n is, and the
dialects' code generators print vectors of at most 16 bytes: ``T.vectorized(128)`` over
float32 failed to compile ("Cannot convert type float32x128"), ``T.vectorized(1)`` did too
("lanes > 1"), and a vector whose first element is not aligned to its size faults at run
time (a misaligned address). Upstream's vectorizer splits the loop instead; so does this
pass: the loop becomes a serial loop over vectors of v lanes, v the largest power of two that

* divides n,
* keeps every vector within ``max_vector_bytes`` (the widest element the body reads,
  writes, casts from or casts to decides), and
* divides the element offset of every access at the loop's first lane (its alignment: a
  stride of 130 floats allows 2 lanes, of 132 four), where the access moves one element per
  lane; an access of another stride allows no vector. An offset that depends on a symbolic
  size (``n * row``) does not limit the width: its alignment is the caller's, as before;
* keeps an access that several lanes share one element for all of a vector's lanes
  (``C[row, col // 6]``: 2 lanes, the element read once and broadcast).

v = 1 leaves a serial loop. The loop's meaning does not change: its iterations are
independent by the contract of ``T.vectorized``.

A vector store written by hand into a global buffer (``A[T.Ramp(t + 2, 1, 4)] = ...``,
upstream's issue 2554) is split the same way: TVM prints it as one vector store whatever
its address (its loads it gathers where it cannot prove the alignment), so it becomes an
unrolled loop of the widest aligned vectors, down to single elements.
"""

from __future__ import annotations

import math
from typing import Any

import tvm
import tvm_ffi
from tvm import tirx
from tvm.ir import TensorLoad
from tvm.sym.analyzer import Analyzer

from ...backend.pass_pipeline import prim_func_pass
from ...language.ops import substitute, uses_var


def _bytes(dtype: Any) -> int:
    text = str(dtype)
    if text in ("bool", "handle"):
        return 1
    dt = tvm.DataType(text)
    return max(1, dt.bits // 8)


def _accesses(body: Any) -> list[tuple[Any, Any]]:
    found: list[tuple[Any, Any]] = []
    tvm_ffi.structural_walk(body, [
        (TensorLoad, lambda load: found.append((load.source, load.indices))
         if isinstance(load.source, tirx.Buffer) else None),
        (tirx.BufferStore, lambda store: found.append((store.buffer, store.indices))),
    ])
    return found


def _widest(body: Any, accesses: list[tuple[Any, Any]]) -> int:
    widest = max([_bytes(buffer.dtype) for buffer, _ in accesses] or [1])
    casts: list[Any] = []
    tvm_ffi.structural_walk(body, (tirx.Cast, casts.append))
    # a cast computes in both types: fp8 from int32 goes through float32 vectors
    return max([widest, *(_bytes(c.ty.dtype) for c in casts), *(_bytes(c.value.ty.dtype) for c in casts)])


def _lanes_allowed(loop: Any, accesses: list[tuple[Any, Any]], analyzer: Analyzer, ranged: list[Any]) -> int:
    """The gcd of what every access allows: 0 = no limit (it does not move with the loop, or
    its offset depends on a symbolic size, whose alignment is the caller's: left as TVM
    vectorizes it)."""
    var, allowed = loop.loop_var, 0
    for buffer, indices in accesses:
        if any("x" in str(getattr(i.ty, "dtype", "")) for i in indices):
            return 1  # already a vector access
        offset = buffer.offset_of(list(indices))[0] if len(indices) else tirx.const(0, "int32")
        first = analyzer.simplify(substitute(offset, [(var, loop.min)]))
        step = analyzer.simplify(substitute(offset, [(var, loop.min + 1)]) - first)
        if isinstance(step, tirx.IntImm) and step.value == 0:
            # the same element for the first two lanes; where it changes further on
            # (C[row, col // 2]), a vector reads it only as wide as it stays one element
            uniform = _uniform_lanes(offset, loop, analyzer)
            allowed = uniform if allowed == 0 else math.gcd(allowed, uniform)
            continue
        if not (isinstance(step, tirx.IntImm) and step.value == 1):
            return 1
        free: list[Any] = []
        tvm_ffi.structural_walk(first, (tirx.Var, free.append))
        if not all(any(v.same_as(r) for r in ranged) for v in free):
            continue
        modular = analyzer.modular_set(first)
        alignment = math.gcd(int(modular.coeff), int(modular.base))
        allowed = math.gcd(allowed, alignment)  # gcd(x, 0) = x: an offset of 0 allows any width
    return allowed


def _uniform_lanes(offset: Any, loop: Any, analyzer: Analyzer, most: int = 64) -> int:
    """0 where ``offset`` does not move with the loop; else the widest power-of-two vector
    (aligned to its width from the loop's start) over whose lanes it provably stays the
    same (``col // 6``: 2)."""
    var = loop.loop_var
    if not uses_var(offset, var):
        return 0
    vector = tirx.Var("vector", var.ty)
    analyzer.bind(vector, tvm.ir.Range(0, 1 << 20))
    width = 1
    while width * 2 <= most:
        lanes = width * 2
        first = substitute(offset, [(var, loop.min + vector * lanes)])
        if not all(analyzer.can_prove(substitute(offset, [(var, loop.min + vector * lanes + j)]) == first)
                   for j in range(1, lanes)):
            break
        width = lanes
    return width


def _split(loop: Any, max_vector_bytes: int, analyzer: Analyzer, ranged: list[Any]) -> Any:
    if not isinstance(loop.extent, tirx.IntImm):
        return loop
    n = int(loop.extent.value)
    accesses = _accesses(loop.body)
    lanes = max(1, max_vector_bytes // _widest(loop.body, accesses))
    allowed = _lanes_allowed(loop, accesses, analyzer, ranged)
    v = 1
    while v * 2 <= lanes and n % (v * 2) == 0 and (allowed == 0 or allowed % (v * 2) == 0):
        v *= 2
    if v == n and n > 1:
        return loop
    var = loop.loop_var
    if v == 1:
        return tirx.For(var, loop.min, loop.extent, tirx.ForKind.SERIAL, loop.body, annotations=loop.annotations)
    outer, inner = tirx.Var(f"{var.name}_o", var.ty), tirx.Var(f"{var.name}_v", var.ty)
    body = substitute(loop.body, [(var, loop.min + outer * v + inner)])
    zero = tirx.const(0, str(var.ty))
    vector = tirx.For(inner, zero, tirx.const(v, str(var.ty)), tirx.ForKind.VECTORIZED, body)
    return tirx.For(outer, zero, tirx.const(n // v, str(var.ty)), tirx.ForKind.SERIAL, vector,
                    annotations=loop.annotations)


class _NotSliceable(Exception):
    """A vector expression whose lanes this pass does not take apart (a shuffle, a call of
    another arity): the store stays as written."""


def _lanes_of(expr: Any) -> int:
    return tvm.DataType(str(expr.ty)).lanes


def _with_lanes(dtype: Any, lanes: int) -> str:
    return str(tvm.DataType(str(dtype)).with_lanes(lanes))


_ELEMENTWISE = (tirx.Add, tirx.Sub, tirx.Mul, tirx.Div, tirx.Mod, tirx.FloorDiv, tirx.FloorMod, tirx.Min,
                tirx.Max, tirx.EQ, tirx.NE, tirx.LT, tirx.LE, tirx.GT, tirx.GE, tirx.And, tirx.Or)


def _slice(expr: Any, start: Any, width: int) -> Any:
    """Lanes ``start .. start + width - 1`` of a vector expression (a scalar for width 1)."""
    from tvm.ir import TensorLoad

    if _lanes_of(expr) == 1:
        return expr
    if isinstance(expr, tirx.Ramp):
        base = expr.base + start * expr.stride
        return base if width == 1 else tirx.Ramp(base, expr.stride, width)
    if isinstance(expr, tirx.Broadcast):
        return expr.value if width == 1 else tirx.Broadcast(expr.value, width)
    if isinstance(expr, TensorLoad) and isinstance(expr.source, tirx.Buffer):
        return tirx.BufferLoad(expr.source, [_slice(i, start, width) for i in expr.indices])
    if isinstance(expr, tirx.Cast):
        return tirx.Cast(_with_lanes(expr.ty, width), _slice(expr.value, start, width))
    if isinstance(expr, _ELEMENTWISE):
        return type(expr)(_slice(expr.a, start, width), _slice(expr.b, start, width))
    if isinstance(expr, tirx.Not):
        return tirx.Not(_slice(expr.a, start, width))
    if isinstance(expr, tirx.Select):
        return tirx.Select(_slice(expr.condition, start, width), _slice(expr.true_value, start, width),
                           _slice(expr.false_value, start, width))
    raise _NotSliceable(type(expr).__name__)


def _split_store(store: Any, max_vector_bytes: int, analyzer: Analyzer, ranged: list[Any]) -> Any:
    """A vector store into a global buffer whose first lane is not aligned to the vector
    (``A[T.Ramp(t + 2, 1, 4)] = ...``): TVM's code generator stores it as one vector
    whatever its address, which faults; here it becomes aligned vectors, down to one
    element each. Only global stores with indices of loop and thread indices are looked at:
    the compiler's own vector stores into shared memory and fragments are aligned by
    construction, and an offset with a symbolic size keeps the caller's alignment. A store
    wider than the widest vector, in any scope (``packed[0:32] = T.Broadcast(x, 32)`` of
    int8: upstream's issue 2480; CUDA has no 32-byte vector type), is split likewise."""
    if not store.indices:
        return store
    last = store.indices[-1]
    if not (isinstance(last, tirx.Ramp) and isinstance(last.stride, tirx.IntImm) and last.stride.value == 1):
        return store
    lanes = _lanes_of(last)
    if store.buffer.scope() != "global" and lanes * _bytes(store.buffer.dtype) <= max_vector_bytes:
        return store
    if any(_lanes_of(i) != 1 for i in store.indices[:-1]):
        return store
    first = analyzer.simplify(store.buffer.offset_of([*store.indices[:-1], last.base])[0])
    free: list[Any] = []
    tvm_ffi.structural_walk(first, (tirx.Var, free.append))
    if not all(any(v.same_as(r) for r in ranged) for v in free):
        return store
    modular = analyzer.modular_set(first)
    alignment = math.gcd(int(modular.coeff), int(modular.base))
    width = math.gcd(lanes, alignment) if alignment else lanes
    width = min(width, max(1, max_vector_bytes // _bytes(store.buffer.dtype)))
    width = 1 << (width.bit_length() - 1)  # a power of two that divides lanes
    if width == lanes or lanes % width:
        return store
    part = tirx.Var("lane", "int32")
    start = part * width
    try:
        value = _slice(store.value, start, width)
        indices = [_slice(i, start, width) for i in store.indices]
    except _NotSliceable:
        return store
    body = tirx.BufferStore(store.buffer, value, indices)
    return tirx.For(part, tirx.const(0, "int32"), tirx.const(lanes // width, "int32"), tirx.ForKind.UNROLLED, body)


def LegalizeVectorizedLoops(max_vector_bytes: int) -> Any:
    def run(func: Any, mod: Any, ctx: Any) -> Any:
        analyzer, ranged = Analyzer(), []  # loop, thread and block indices, with their ranges

        def bind(node: Any) -> None:
            if isinstance(node, tirx.For):
                ranged.append(node.loop_var)
                if isinstance(node.extent, tirx.IntImm) and node.extent.value > 0:
                    analyzer.bind(node.loop_var, tvm.ir.Range.from_min_extent(node.min, node.extent))
            elif (isinstance(node, tirx.AttrStmt) and node.attr_key == "thread_extent"
                  and isinstance(node.node, tirx.IterVar)):
                ranged.append(node.node.var)
                analyzer.bind(node.node.var, tvm.ir.Range.from_min_extent(tirx.const(0, "int32"), node.value))
            elif isinstance(node, (tirx.Bind, tirx.LetStmt)):
                lets.append(node)

        lets: list[Any] = []
        tvm_ffi.structural_walk(func.body, [(tirx.For, bind), (tirx.AttrStmt, bind), (tirx.Bind, bind),
                                            (tirx.LetStmt, bind)])
        # `col = bx * 32 + tx`: a name bound to loop and thread indices (the walk is not in
        # program order, so until nothing more resolves)
        changed = True
        while changed:
            changed = False
            for let in list(lets):
                if not str(getattr(let.var.ty, "dtype", "")).startswith(("int", "uint")):
                    lets.remove(let)  # a handle, a float: never part of an index's alignment
                    continue
                free: list[Any] = []
                tvm_ffi.structural_walk(let.value, (tirx.Var, free.append))
                if all(any(v.same_as(r) for r in ranged) for v in free):
                    lets.remove(let)
                    try:
                        analyzer.bind(let.var, let.value)
                    except TypeError:  # a value the analyzer does not take: not an index
                        continue
                    ranged.append(let.var)
                    changed = True

        def on_for(loop: Any) -> Any:
            return _split(loop, max_vector_bytes, analyzer, ranged) if loop.kind == tirx.ForKind.VECTORIZED else loop

        def on_store(store: Any) -> Any:
            return _split_store(store, max_vector_bytes, analyzer, ranged)

        body = tvm_ffi.structural_map(func.body, [(tirx.For, on_for), (tirx.BufferStore, on_store)], order="post")
        return func if body.same_as(func.body) else func.with_body(body)

    return prim_func_pass(run, "tl.gpu.LegalizeVectorizedLoops")


__all__ = ["LegalizeVectorizedLoops"]
