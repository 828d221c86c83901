"""WidenLargeBufferIndices: 64-bit index arithmetic for buffers that may hold 2**31 or more
elements (shared, before FlattenBuffer; every backend gets it through flatten_and_vectorize).

The language computes indices in int32 (loop variables, block indices and T.symbolic
dimensions are int32 unless declared otherwise), and FlattenBuffer multiplies them by the
row strides in the indices' type. A (65537, 32768) int8 tensor, or one with symbolic
dimensions, then wraps around to a negative offset: a segfault, or a write somewhere else.
Each index of such a buffer is rebuilt here with every operand widened to int64 before any
arithmetic, so the flattened offset is computed in 64 bits; FlattenBuffer then promotes the
strides, and NarrowDataType(32) narrows back whatever it can prove fits (so buffers of
known small extent keep int32 code).
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx
from tvm.sym.analyzer import Analyzer

from .pipeline import prim_func_pass

INT32_MAX = 2**31 - 1
_ARITH = ("Add", "Sub", "Mul", "FloorDiv", "FloorMod", "Div", "Mod", "Min", "Max")


def _arith_types() -> tuple[type, ...]:
    return tuple(t for t in (getattr(tirx, name, None) for name in _ARITH) if isinstance(t, type))


def may_exceed_int32(buffer: Any, analyzer: Any) -> bool:
    """Whether ``buffer``'s element count can pass INT32_MAX (symbolic extents count at
    their type's largest value)."""
    count: Any = tirx.const(1, "int64")
    for extent in buffer.shape:
        if isinstance(extent, tirx.IntImm):
            count = count * tirx.const(int(extent.value), "int64")
        else:
            count = count * tirx.Cast("int64", extent)
    if isinstance(count, tirx.IntImm):
        return int(count.value) > INT32_MAX
    return analyzer.const_int_bound(count).max_value > INT32_MAX


class _Widen:
    def __init__(self) -> None:
        self.arith = _arith_types()

    def __call__(self, expr: Any) -> Any:
        dtype = str(getattr(expr.ty, "dtype", ""))
        if dtype == "int64" or not dtype.startswith(("int", "uint")) or "x" in dtype:
            return expr  # already wide, not an integer, or a vector (left as it is)
        if isinstance(expr, tirx.IntImm):
            return tirx.const(int(expr.value), "int64")
        if isinstance(expr, self.arith):
            return type(expr)(self(expr.a), self(expr.b))
        return tirx.Cast("int64", expr)


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    analyzer = Analyzer()
    widen = _Widen()
    verdicts: dict[Any, bool] = {}

    def large(buffer: Any) -> bool:
        for known, verdict in verdicts.items():
            if known.same_as(buffer):
                return verdict
        verdicts[buffer] = may_exceed_int32(buffer, analyzer)
        return verdicts[buffer]

    def widened(indices: Any) -> list[Any] | None:
        new = [widen(i) for i in indices]
        return new if any(not n.same_as(i) for n, i in zip(new, indices)) else None

    def on_store(stmt: Any) -> Any:
        if not large(stmt.buffer):
            return stmt
        indices = widened(stmt.indices)
        return stmt if indices is None else tirx.BufferStore(stmt.buffer, stmt.value, indices)

    def on_load(load: Any) -> Any:
        buffer = load.source
        if not large(buffer):
            return load
        indices = widened(load.indices)
        return load if indices is None else tirx.BufferLoad(buffer, indices)

    from tvm.ir import TensorLoad

    body = tvm_ffi.structural_map(func.body, [(tirx.BufferStore, on_store), (TensorLoad, on_load)],
                                  order="post")
    return func if body.same_as(func.body) else func.with_body(body)


def WidenLargeBufferIndices() -> Any:
    return prim_func_pass(_run, "tl.WidenLargeBufferIndices")


__all__ = ["INT32_MAX", "WidenLargeBufferIndices", "may_exceed_int32"]
