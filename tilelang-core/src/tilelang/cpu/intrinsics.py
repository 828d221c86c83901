"""Intrinsic lowering rules the CPU backend adds to TVM's for the ``c`` kind.

TVM 0.27 has no ``c``-target rule for ``tirx.fabs`` (T.abs on floats) nor for
``tirx.popcount`` (T.popcount, T.__ffs), so the C host codegen fails on them with
"Unresolved call". The rules map them to the C library's fabsf/fabs (ISO C 7.12.7.2) and
to GCC's and Clang's ``__builtin_popcount`` / ``__builtin_popcountll`` (the CPU backend's
C compilers). Imported once by the CPU pipeline; importing registers.
"""

from __future__ import annotations

from typing import Any

from tvm.tirx import Cast as cast
from tvm.tirx import (
    call_pure_extern,
    const,
    register_intrin_lowering,
    reinterpret,
    shift_right,
)

_C_MATH = {"float32": "{}f", "float64": "{}"}


def _c_math_rule(op: Any) -> Any:
    dtype = str(op.ty.dtype) if hasattr(op.ty, "dtype") else str(op.ty)
    pattern = _C_MATH.get(dtype)
    if pattern is None:
        return op
    name = op.op.name.split(".", 1)[1]  # "tirx.fabs" -> "fabs"
    return call_pure_extern(op.ty, pattern.format(name), *op.args)


register_intrin_lowering("tirx.fabs", target="c", f=_c_math_rule, level=99)


def _c_popcount_rule(op: Any) -> Any:
    """``int __builtin_popcount(unsigned int)`` on each 32-bit half: the C codegen declares
    every extern it calls, and a declaration must match the builtin's exactly (uint64_t is
    not ``unsigned long long`` on Linux, so __builtin_popcountll cannot be declared)."""
    (value,) = op.args
    bits = int(str(value.ty.dtype).lstrip("uint") or 32)
    if bits <= 32:
        word = cast("uint32", reinterpret(f"uint{bits}", value)) if bits < 32 else reinterpret("uint32", value)
        return cast(op.ty, call_pure_extern("int32", "__builtin_popcount", word))
    wide = reinterpret("uint64", value)
    halves = [cast("uint32", wide), cast("uint32", shift_right(wide, const(32, "uint64")))]
    return cast(op.ty, call_pure_extern("int32", "__builtin_popcount", halves[0])
                + call_pure_extern("int32", "__builtin_popcount", halves[1]))


register_intrin_lowering("tirx.popcount", target="c", f=_c_popcount_rule, level=99)
