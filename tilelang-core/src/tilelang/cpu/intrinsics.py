"""Intrinsic lowering rules the CPU backend adds to TVM's for the ``c`` kind.

TVM 0.27 has no ``c``-target rule for ``tirx.fabs`` (T.abs on floats), so the C host
codegen fails on it with "Unresolved call". The rule maps it to the C library's
fabsf/fabs (ISO C 7.12.7.2). Imported once by the CPU pipeline; importing registers.
"""

from __future__ import annotations

from typing import Any

from tvm.tirx import call_pure_extern, register_intrin_lowering

_C_MATH = {"float32": "{}f", "float64": "{}"}


def _c_math_rule(op: Any) -> Any:
    dtype = str(op.ty.dtype) if hasattr(op.ty, "dtype") else str(op.ty)
    pattern = _C_MATH.get(dtype)
    if pattern is None:
        return op
    name = op.op.name.split(".", 1)[1]  # "tirx.fabs" -> "fabs"
    return call_pure_extern(op.ty, pattern.format(name), *op.args)


register_intrin_lowering("tirx.fabs", target="c", f=_c_math_rule, level=99)
