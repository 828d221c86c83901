"""What each reduction kind starts from and how it combines: shared by the tile-op
lowering, the block-wide reductions and backends' own reductions (tensor-core row families),
so that every path gives one result."""

from __future__ import annotations

from typing import Any

from tvm import tirx


def reduce_identity(kind: str, dtype: Any) -> Any:
    """The value a cleared reduction starts from: -inf / +inf for floating max / min (as
    upstream: a row of -inf reduces to -inf), the type's extremes for integers, all ones
    for bitand, else 0."""
    dtype = str(dtype)
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
    return tirx.abs(value) if kind in ("abssum", "absmax") else value


def reduce_combine(kind: str, acc: Any, value: Any) -> Any:
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
