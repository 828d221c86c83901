"""ComputeFp8InFloat32: arithmetic on fp8 values (``+ - * /``, ``T.min``/``T.max``,
``T.clamp``, comparisons) computed in float32, each result rounded back to its fp8 type;
integers converted to fp8 through float32.

CUDA's ``__nv_fp8_e4m3`` / ``__nv_fp8_e5m2`` are storage types: no arithmetic operators and
no ``min``/``max`` overloads, so ``C[i] = T.max(A[i], B[i])`` on fp8 tensors did not compile
(nvcc: "no instance of overloaded function"). TVM's FP8ComputeLegalize skips every target
that "supports fp8" (sm_89 and newer) and so never rewrites them here. Each operation is
rounded to fp8 as written, as upstream computes them; min, max and comparisons are exact.

ConvertE8M0: every conversion to or from ``float8_e8m0fnu`` (MX block scales) calls
tl_device.h's ``tl_cvt_*e8m0*``, CUDA's rounding (up to a power of two, saturating) on
every arch. Without it, TVM's own legalization below sm_89 rounded to the nearest power
of two (and made an infinity NaN) while sm_90's ``__nv_fp8_e8m0`` rounds up: one kernel,
two answers. It runs before vectorization: a loop over these calls stays scalar.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tilelang.plugin import prim_func_pass
from tvm import tirx

_ARITHMETIC = (tirx.Add, tirx.Sub, tirx.Mul, tirx.Div, tirx.Min, tirx.Max)
_COMPARISONS = (tirx.EQ, tirx.NE, tirx.LT, tirx.LE, tirx.GT, tirx.GE)


def _fp8(expr: Any) -> str | None:
    dtype = str(getattr(expr.ty, "dtype", ""))
    return dtype if dtype.startswith("float8") else None


def _wide(dtype: str) -> str:
    lanes = dtype.partition("x")[2]
    return f"float32x{lanes}" if lanes else "float32"


def _on_binary(node: Any) -> Any:
    dtype = _fp8(node.a)
    if dtype is None:
        return node
    wide = _wide(dtype)
    result = type(node)(tirx.Cast(wide, node.a), tirx.Cast(wide, node.b))
    return result if isinstance(node, _COMPARISONS) else tirx.Cast(dtype, result)


def _on_cast(cast: Any) -> Any:
    """An fp8 value made from an integer or from another fp8 type goes through float32:
    CUDA converts fp8 from float (and its vector types from float2 / float4) only (e4m3 to
    e5m2 did not compile: "no suitable user-defined conversion")."""
    dtype = str(cast.ty.dtype)
    source = str(getattr(cast.value.ty, "dtype", ""))
    other_fp8 = source.startswith("float8") and source != dtype
    if not dtype.startswith("float8") or (source.startswith(("float", "bfloat")) and not other_fp8):
        return cast
    return tirx.Cast(dtype, tirx.Cast(_wide(dtype), cast.value))


E8M0 = "float8_e8m0fnu"


def _on_e8m0_cast(cast: Any) -> Any:
    dtype = str(cast.ty.dtype)
    source = str(getattr(cast.value.ty, "dtype", ""))
    if E8M0 not in (dtype, source) or dtype == source:
        return cast
    if dtype == E8M0:
        wide = source == "float64" or source.startswith(("int", "uint"))  # exact in double
        value = cast.value if source in ("float32", "float64") else tirx.Cast("float64" if wide else "float32",
                                                                                 cast.value)
        name = "tl_cvt_double_to_e8m0" if wide else "tl_cvt_float_to_e8m0"
        return tirx.reinterpret(E8M0, tirx.call_extern("uint8", name, value))
    value = tirx.call_extern("float32", "tl_cvt_e8m0_to_float", tirx.reinterpret("uint8", cast.value))
    return value if dtype == "float32" else tirx.Cast(dtype, value)


def ConvertE8M0() -> Any:
    def run(func: Any, mod: Any, ctx: Any) -> Any:
        body = tvm_ffi.structural_map(func.body, (tirx.Cast, _on_e8m0_cast), order="post")
        return func if body.same_as(func.body) else func.with_body(body)

    return prim_func_pass(run, "tl.cuda.ConvertE8M0")


def ComputeFp8InFloat32() -> Any:
    def run(func: Any, mod: Any, ctx: Any) -> Any:
        body = tvm_ffi.structural_map(func.body, [((*_ARITHMETIC, *_COMPARISONS), _on_binary),
                                                  (tirx.Cast, _on_cast)], order="post")
        return func if body.same_as(func.body) else func.with_body(body)

    return prim_func_pass(run, "tl.cuda.ComputeFp8InFloat32")
