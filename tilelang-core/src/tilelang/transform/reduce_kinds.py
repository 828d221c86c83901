"""What each reduction kind starts from and how it combines: shared by the tile-op
lowering, the block-wide reductions and backends' own reductions (tensor-core row families),
so that every path gives one result."""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx


def _base(kind: str) -> str:
    """A NaN-propagating kind's plain one (``max_nan`` -> ``max``)."""
    return kind.removesuffix("_nan")


def isnan(value: Any) -> Any:
    """``isnan`` of any floating value: TVM builds it for float16/32/64 only, so other floats
    (bfloat16, fp8) are tested in float32, which keeps NaN (vectors lane by lane)."""
    dtype = tvm.DataType(str(value.ty))
    if str(dtype.with_lanes(1)) not in ("float16", "float32", "float64"):
        value = tirx.Cast(str(tvm.DataType("float32").with_lanes(dtype.lanes)), value)
    return tirx.isnan(value)


def reduce_identity(kind: str, dtype: Any) -> Any:
    """The value a cleared reduction starts from: -inf / +inf for floating max / min (as
    upstream: a row of -inf reduces to -inf), the type's extremes for integers, all ones
    for bitand, else 0."""
    kind, dtype = _base(kind), str(dtype)
    is_float = dtype.startswith(("float", "bfloat"))
    if kind == "max":
        return tirx.const(float("-inf"), dtype) if is_float else tirx.min_value(dtype)
    if kind == "min":
        return tirx.const(float("inf"), dtype) if is_float else tirx.max_value(dtype)
    if kind == "bitand":
        return tirx.max_value(dtype) if dtype.startswith(("uint", "bool")) else tirx.const(-1, dtype)
    return tirx.const(0, dtype)


def reduce_operand(kind: str, value: Any) -> Any:
    """What a reduction of ``kind`` combines of an element (its magnitude for abs kinds)."""
    return tirx.abs(value) if kind in ("abssum", "absmax", "absmax_nan") else value


def reduce_combine(kind: str, acc: Any, value: Any) -> Any:
    """``acc`` and ``value`` combined. The ``*_nan`` kinds (``nan_propagate=True``) give a
    NaN operand back, the NaN-free ones max/min, which return the non-NaN operand.

    Both operands may be read more than once, and inside a select, whose branches C and CUDA
    evaluate only when taken: pass loads and names, not calls (a warp shuffle has to be
    executed by every lane: store it first)."""
    if kind.endswith("_nan"):
        plain = reduce_combine(_base(kind), acc, value)
        return tirx.Select(isnan(acc), acc, tirx.Select(isnan(value), value, plain))
    if kind in ("max", "absmax"):
        return tirx.max(acc, value)
    if kind == "min":
        return tirx.min(acc, value)
    if kind == "bitand":
        return tirx.bitwise_and(acc, value)
    if kind == "bitor":
        return tirx.bitwise_or(acc, value)
    if kind == "bitxor":
        return tirx.bitwise_xor(acc, value)
    return acc + value
