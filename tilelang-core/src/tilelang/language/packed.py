"""Upstream's packed pair arithmetic: ``T.add2``, ``T.sub2``, ``T.mul2``, ``T.max2``,
``T.min2``, ``T.fma2`` and ``T.abs2`` on two-lane vectors (float32x2, float16x2,
bfloat16x2), as a kernel reads them with ``A[T.Ramp(2 * i, 1, 2)]``.

Each is the lane-wise operation on the pair, built as a vector expression, so every backend
compiles it: LLVM's vectors on the CPU; on CUDA, TVM's code generator prints the pair's
lanes (half2 / bfloat162 arithmetic where the type has it). ``T.max2`` / ``T.min2`` are
T.max / T.min lane by lane (for float32 pairs a NaN lane gives the other operand, on the
CPU and in CUDA's fmaxf / fminf). The operands must have one dtype: mixing
float16x2 and bfloat16x2 is an error (a ValueError, as upstream's).
"""

from __future__ import annotations

from typing import Any

from tvm import tirx

from ..errors import LanguageError

#: the pairs upstream's helpers take
PACKED_DTYPES = ("float32x2", "float16x2", "bfloat16x2")


def _pairs(name: str, *operands: Any) -> list[Any]:
    values = [tirx.convert(v) if not isinstance(v, tirx.PrimExpr) else v for v in operands]
    dtypes = [str(v.ty.dtype) for v in values]
    if len(set(dtypes)) != 1:
        raise LanguageError(f"T.{name}: the operands must have the same dtype, got {', '.join(dtypes)}")
    if dtypes[0] not in PACKED_DTYPES:
        raise LanguageError(f"T.{name}: takes a pair of {', '.join(PACKED_DTYPES)} (A[T.Ramp(2 * i, 1, 2)]), "
                            f"got {dtypes[0]}")
    return values


def add2(a: Any, b: Any) -> Any:
    """``a + b`` lane by lane."""
    a, b = _pairs("add2", a, b)
    return a + b


def sub2(a: Any, b: Any) -> Any:
    """``a - b`` lane by lane."""
    a, b = _pairs("sub2", a, b)
    return a - b


def mul2(a: Any, b: Any) -> Any:
    """``a * b`` lane by lane."""
    a, b = _pairs("mul2", a, b)
    return a * b


def max2(a: Any, b: Any) -> Any:
    """T.max of each lane."""
    a, b = _pairs("max2", a, b)
    return tirx.max(a, b)


def min2(a: Any, b: Any) -> Any:
    """T.min of each lane."""
    a, b = _pairs("min2", a, b)
    return tirx.min(a, b)


def fma2(a: Any, b: Any, c: Any) -> Any:
    """``a * b + c`` lane by lane (code generators may fuse it into one rounding)."""
    a, b, c = _pairs("fma2", a, b, c)
    return a * b + c


def abs2(a: Any) -> Any:
    """``|a|`` lane by lane."""
    (a,) = _pairs("abs2", a)
    return tirx.abs(a)
