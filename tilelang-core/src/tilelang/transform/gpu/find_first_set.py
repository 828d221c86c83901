"""FindFirstSet: ``T.__ffs(x)`` as a dialect's own find-first-set functions.

Core builds ``T.__ffs`` as arithmetic every backend compiles (tilelang.language.bit_search):
``x == 0 ? 0 : popcount(x ^ (x - 1))``, which names ``x`` three times -- a ballot inside
was taken three times, and an ``x`` with an effect would have it three times. A dialect
with its own functions (CUDA's and HIP's ``__ffs`` / ``__ffsll``) passes their names and
the expression becomes one call, ``x`` once. Run it first, while the expression is as core
built it; anything else is left as it is (still correct, only slower).
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx

from ...backend.pass_pipeline import prim_func_pass
from ...language.ops import is_call_to


def _is_int(expr: Any, value: int) -> bool:
    return isinstance(expr, tirx.IntImm) and expr.value == value


def found_first_set(select: Any) -> Any:
    """``x`` where ``select`` is core's ``T.__ffs(x)`` with the same ``x`` at each place;
    else None."""
    condition, zero, count = select.condition, select.true_value, select.false_value
    if not (isinstance(condition, tirx.EQ) and _is_int(condition.b, 0) and _is_int(zero, 0)
            and isinstance(count, tirx.Cast) and is_call_to(count.value, "tirx.popcount")):
        return None
    bits = count.value.args[0]
    if not (isinstance(bits, tirx.BitwiseXor) and isinstance(bits.b, tirx.Sub) and _is_int(bits.b.b, 1)):
        return None
    x = condition.a
    return x if all(tvm_ffi.structural_equal(x, other) for other in (bits.a, bits.b.a)) else None


def FindFirstSet(function32: str, function64: str, name: str = "tl.gpu.FindFirstSet") -> Any:
    """``T.__ffs(x)`` as ``function32(x)`` / ``function64(x)`` (an int32 / int64 operand,
    returning the one-based position of the lowest set bit, 0 for 0)."""

    def on_select(select: Any) -> Any:
        x = found_first_set(select)
        if x is None:
            return select
        dtype = str(x.ty.dtype)
        signed_type = "int64" if dtype.endswith("64") else "int32"
        inner = x.args[0] if is_call_to(x, "tirx.reinterpret") else None
        if inner is not None and str(inner.ty.dtype) == signed_type:  # core made a signed x unsigned
            signed = inner
        else:
            signed = tirx.reinterpret(signed_type, x) if dtype.startswith("uint") else x
        function = function64 if signed_type == "int64" else function32
        return tirx.call_pure_extern("int32", function, signed)

    def run(func: Any, mod: Any, ctx: Any) -> Any:
        body = tvm_ffi.structural_map(func.body, (tirx.Select, on_select), order="post")
        return func if body.same_as(func.body) else func.with_body(body)

    return prim_func_pass(run, name)
