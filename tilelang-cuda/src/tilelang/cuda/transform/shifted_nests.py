"""T.Parallel nests that reach a GEMM's C a fixed distance from their own indices:
``acc[i + s * 16, j]`` in a nest over (i, j), ``s`` an outer loop's. Sparse MLA's
backward copies its dKV accumulator out in halves that way::

    for s in range(2):
        for i, j in T.Parallel(32, 512):
            if i < 16:
                half[i, j] = acc[i + s * 16, j]

Such a nest is the nest over C's own indices that it stands for, guarded to the iterations
it had, so C can stay in registers (the tensor-core pass walks each thread's own elements
of it). Iterations whose C index falls outside C are dropped by that guard; that loses
nothing only where they did nothing, so the nest's body must be an ``if`` whose condition
keeps every C index within C (``i < 16`` with ``s`` in 0..1 above), or the indices must
be within C on every iteration. Nests that cannot be shown so keep C out of registers (the
SIMT lowering), as before.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tilelang.plugin import (
    buffer_accesses,
    parallel_nest,
    static_ints,
    substitute,
    uses_var,
)
from tvm import tirx
from tvm.ir import TensorLoad


def nest_shift(loops: list[Any], inner: Any, buffers: list[Any], analyzer: Any) -> list[Any] | None:
    """The per-axis offsets at which the nest (``loops`` around ``inner``) reaches
    ``buffers`` (fragments of one shape): every access is at the loop variables plus
    these offsets, which do not change within the nest. Zeros with the loops over the
    buffers' shape: the nest's own indices. None: some access is elsewhere, or an
    iteration the guard would drop is not shown to do nothing."""
    found = [indices for b, indices, _ in buffer_accesses(inner) if any(b.same_as(f) for f in buffers)]
    shape = static_ints(buffers[0].shape) if buffers else None
    if not found or shape is None or len(loops) != len(shape):
        return None
    inside = [loop.loop_var for loop in loops] + _bound_within(inner)
    shift: list[Any] | None = None
    for indices in found:
        if len(indices) != len(loops):
            return None
        offsets = [analyzer.simplify(index - loop.loop_var) for index, loop in zip(indices, loops)]
        if not all(_invariant(offset, inside) for offset in offsets):
            return None
        if shift is None:
            shift = offsets
        elif not all(analyzer.can_prove_equal(a, b) for a, b in zip(shift, offsets)):
            return None
    if is_own(loops, shift, shape, analyzer):
        return shift
    condition = inner.condition if isinstance(inner, tirx.IfThenElse) and _idle(inner.else_case) else None
    with analyzer.constraint_scope(condition if condition is not None else tirx.const(True, "bool")):
        within = all(analyzer.can_prove(loop.loop_var + offset >= 0) and
                     analyzer.can_prove(loop.loop_var + offset < extent)
                     for loop, offset, extent in zip(loops, shift, shape))
    return shift if within else None


def _bound_within(node: Any) -> list[Any]:
    """The variables that ``node`` binds (its loops', its ``x = ...``)."""
    found: list[Any] = []
    tvm_ffi.structural_walk(node, [(tirx.For, lambda loop: found.append(loop.loop_var)),
                                   (tirx.Bind, lambda bind: found.append(bind.var))])
    return found


def _invariant(offset: Any, inside: list[Any]) -> bool:
    """``offset`` is the same on every iteration of the nest: it names none of the nest's
    variables and reads no buffer (which an iteration might write)."""
    loads: list[Any] = []
    tvm_ffi.structural_walk(offset, (TensorLoad, loads.append))
    return not loads and not any(uses_var(offset, var) for var in inside)


def _idle(stmt: Any) -> bool:
    """No statement, or one that does nothing (``T.evaluate(0)``: an ``elif`` of a Python
    False)."""
    return stmt is None or (isinstance(stmt, tirx.Evaluate) and isinstance(stmt.value, tirx.IntImm))


def is_own(loops: list[Any], shift: list[Any], shape: list[int], analyzer: Any) -> bool:
    """The shift is none and the loops run over the whole shape."""
    return all(analyzer.can_prove_equal(offset, 0) and analyzer.can_prove_equal(loop.min, 0) and
               analyzer.can_prove_equal(loop.extent, extent)
               for loop, offset, extent in zip(loops, shift, shape))


def accessed_by_shifted_nests(body: Any, nests: list[tuple[list[Any], Any]], buffers: list[Any],
                              analyzer: Any) -> bool:
    """Every element access of ``buffers`` (fragments of one shape that keep one layout) in
    ``body`` is made by one of its T.Parallel ``nests`` (``parallel_nest``'s (loops, body)),
    which reaches them at one shift (``nest_shift``)."""

    def count(node: Any) -> int:
        return sum(1 for b, _, _ in buffer_accesses(node) if any(b.same_as(f) for f in buffers))

    owned = 0
    for loops, inner in nests:
        reached = count(inner)
        if reached and nest_shift(loops, inner, buffers, analyzer) is None:
            return False
        owned += reached
    return owned == count(body)


def over_own_indices(loops: list[Any], inner: Any, shift: list[Any], shape: list[int]) -> tuple[list[Any], Any]:
    """The nest as one over the buffer's own indices (``nest_shift``'s ``shift``): each loop
    variable now the buffer's index on its axis, the body guarded to the nest's
    iterations."""
    guard = None
    pairs = []
    for loop, offset in zip(loops, shift):
        var = loop.loop_var
        was = var - offset  # the nest's own variable, from the buffer's index
        pairs.append((var, was))
        cond = tirx.And(was >= loop.min, was < loop.min + loop.extent)
        guard = cond if guard is None else tirx.And(guard, cond)
    body: Any = tirx.IfThenElse(guard, substitute(inner, pairs), None)
    for loop, extent in reversed(list(zip(loops, shape))):
        body = tirx.For(loop.loop_var, 0, extent, loop.kind, body, annotations=loop.annotations)
    return parallel_nest(body)

