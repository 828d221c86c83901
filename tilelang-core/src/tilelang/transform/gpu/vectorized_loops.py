"""LegalizeVectorizedLoops: a ``T.vectorized(n)`` loop as vectors a GPU can load and store.

TVM's vectorizer turns such a loop into one vector of n lanes, whatever n is, and the
dialects' code generators print vectors of at most 16 bytes: ``T.vectorized(128)`` over
float32 failed to compile ("Cannot convert type float32x128"), ``T.vectorized(1)`` did too
("lanes > 1"), and a vector whose first element is not aligned to its size faults at run
time (a misaligned address). Upstream's vectorizer splits the loop instead; so does this
pass: the loop becomes a serial loop over vectors of v lanes, v the largest power of two that

* divides n,
* keeps every vector within ``max_vector_bytes`` (the widest element the body reads,
  writes or casts to decides), and
* divides the element offset of every access at the loop's first lane (its alignment: a
  stride of 130 floats allows 2 lanes, of 132 four), where the access moves one element per
  lane; an access of another stride allows no vector. An offset that depends on a symbolic
  size (``n * row``) does not limit the width: its alignment is the caller's, as before.

v = 1 leaves a serial loop. The loop's meaning does not change: its iterations are
independent by the contract of ``T.vectorized``.
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
from ...language.ops import substitute


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
    return max([widest, *(_bytes(c.ty.dtype) for c in casts)])


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

        body = tvm_ffi.structural_map(func.body, (tirx.For, on_for), order="post")
        return func if body.same_as(func.body) else func.with_body(body)

    return prim_func_pass(run, "tl.gpu.LegalizeVectorizedLoops")


__all__ = ["LegalizeVectorizedLoops"]
