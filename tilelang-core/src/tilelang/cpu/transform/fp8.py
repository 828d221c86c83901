"""ComputeFp8 (CPU): float8_e4m3fn / float8_e5m2 tiles stored as bytes and computed in float32.

TVM's LLVM and C code generators have no fp8 type, and TVM's own fp8 legalization decodes
exponent 0 as a normal number (0x00 read as 0.0078125 in e4m3; note 99 found it on CUDA).
Here every fp8 buffer becomes a byte buffer of the same shape (a parameter keeps its fp8
type for the call's checks; the kernel reads its bytes through a view of its data), and:

* a read of an fp8 element is the element's value as a float32 (exact: every fp8 value is
  a float32), decoded from its bits, subnormals, infinities and NaN included;
* a value written to an fp8 element, or cast to fp8, is rounded as cuda_fp8.h's
  conversions with ``__NV_SATFINITE`` round it: to nearest, ties to an even code, beyond
  the largest finite value that value (infinities too), NaN 0x7F;
* ``+ - * /``, min and max of fp8 values are computed in float32 and rounded back to fp8
  (as the CUDA backend's ComputeFp8InFloat32 does).

So an fp8 kernel computes on the CPU what it computes on the GPU. float8_e8m0fnu and the
6-bit floats are still refused (RefuseNarrowFloats).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tvm
import tvm_ffi
from tvm import tirx
from tvm.ir import TensorLoad

from ...backend.pass_pipeline import prim_func_pass
from ...errors import LanguageError


@dataclass(frozen=True)
class Format:
    """An 8-bit float: mantissa bits, exponent bias, the largest finite code, and whether an
    all-ones exponent is infinity / NaN (e5m2) or only S.1111.111 is NaN (e4m3fn)."""

    mantissa: int
    bias: int
    max_code: int
    ieee: bool


FORMATS = {"float8_e4m3fn": Format(3, 7, 0x7E, False), "float8_e5m2": Format(2, 15, 0x7B, True)}


def _u32(value: int) -> Any:
    return tirx.IntImm("uint32", value)


def _i32(value: int) -> Any:
    return tirx.IntImm("int32", value)


def decode(byte: Any, fmt: Format) -> Any:
    """The float32 value of fp8 bits ``byte`` (a uint8 expression: a load, read again for
    each use, which the compiler merges)."""
    b = tirx.Cast("uint32", byte)
    sign = tirx.shift_left(tirx.shift_right(b, _u32(7)), _u32(31))
    exp = tirx.bitwise_and(tirx.shift_right(b, _u32(fmt.mantissa)), _u32(0x7F >> fmt.mantissa))
    man = tirx.bitwise_and(b, _u32((1 << fmt.mantissa) - 1))
    top = 0x7F >> fmt.mantissa
    # a normal number: the exponent rebiased to float32's, the mantissa at the top of its field
    normal = tirx.bitwise_or(tirx.shift_left(exp + _u32(127 - fmt.bias), _u32(23)),
                             tirx.shift_left(man, _u32(23 - fmt.mantissa)))
    nan = _u32(0x7FC00000)
    if fmt.ieee:
        special = tirx.Select(tirx.EQ(man, _u32(0)), _u32(0x7F800000), nan)
    else:
        special = tirx.Select(tirx.EQ(man, _u32((1 << fmt.mantissa) - 1)), nan, normal)
    bits = tirx.Select(tirx.EQ(exp, _u32(top)), special, normal)
    magnitude = tirx.reinterpret("float32", bits)
    # exponent 0: man units of 2^(1 - bias - mantissa), exact in float32
    subnormal = tirx.Cast("float32", man) * tirx.FloatImm("float32", 2.0 ** (1 - fmt.bias - fmt.mantissa))
    magnitude = tirx.Select(tirx.EQ(exp, _u32(0)), subnormal, magnitude)
    return tirx.reinterpret("float32", tirx.bitwise_or(tirx.reinterpret("uint32", magnitude), sign))


def encode(value: Any, fmt: Format) -> Any:
    """fp8 bits (uint8) of float32 ``value`` (evaluated once): nearest, ties to even,
    saturating, NaN 0x7F."""
    v = tirx.Var("fp8_value", tvm.ir.PrimType("float32"))
    return tirx.Let(v, value, _encode(v, fmt))


def _encode(value: Any, fmt: Format) -> Any:
    bits = tirx.reinterpret("uint32", value)
    sign = tirx.shift_right(bits, _u32(31))
    exp32 = tirx.Cast("int32", tirx.bitwise_and(tirx.shift_right(bits, _u32(23)), _u32(0xFF)))
    mant = tirx.bitwise_or(tirx.bitwise_and(bits, _u32(0x7FFFFF)), _u32(0x800000))  # the implicit bit
    # the fp8 exponent field (below 1: a subnormal), and how far the 24-bit mantissa moves right
    field = exp32 - _i32(127 - fmt.bias)
    shift = tirx.Max(_i32(23 - fmt.mantissa), _i32(24 - fmt.mantissa) - field)
    shift = tirx.Cast("uint32", tirx.Min(shift, _i32(31)))
    kept = tirx.shift_right(mant, shift)
    rest = tirx.bitwise_and(mant, tirx.shift_left(_u32(1), shift) - _u32(1))
    half = tirx.shift_left(_u32(1), shift - _u32(1))
    up = tirx.Or(tirx.GT(rest, half), tirx.And(tirx.EQ(rest, half), tirx.EQ(tirx.bitwise_and(kept, _u32(1)), _u32(1))))
    # codes are ordered like magnitudes, so a carry out of the mantissa moves to the next exponent
    base = tirx.shift_left(tirx.Cast("uint32", tirx.Max(field - _i32(1), _i32(0))), _u32(fmt.mantissa))
    code = base + kept + tirx.Cast("uint32", up)  # (kept holds a normal number's implicit bit: base + 1)
    code = tirx.Select(tirx.EQ(exp32, _i32(0)), _u32(0), tirx.Min(code, _u32(fmt.max_code)))  # float32 subnormals: 0
    code = tirx.bitwise_or(code, tirx.shift_left(sign, _u32(7)))
    return tirx.Cast("uint8", tirx.Select(tirx.isnan(value), _u32(0x7F), code))


def _fp8(dtype: Any) -> Format | None:
    return FORMATS.get(str(dtype))


def _round(value: Any, fmt: Format) -> Any:
    """float32 ``value`` rounded to the nearest fp8 value, as a float32 (what encode then
    decode give, computed on the float: nested fp8 operations nest no ``Let``, whose chains
    made LLVM's code generation take minutes)."""
    largest = _largest(fmt)
    magnitude = tirx.abs(value)
    saturated = tirx.Select(tirx.GT(magnitude, tirx.FloatImm("float32", largest)),
                            tirx.FloatImm("float32", largest), magnitude)  # NaN stays NaN
    # below the smallest normal: a multiple of the subnormal unit (nearest, ties to even)
    unit = 2.0 ** (1 - fmt.bias - fmt.mantissa)
    subnormal = tirx.nearbyint(saturated * tirx.FloatImm("float32", 1 / unit)) * tirx.FloatImm("float32", unit)
    # a normal number: float32's mantissa rounded to the format's bits (nearest, ties to even)
    drop = 23 - fmt.mantissa
    u = tirx.reinterpret("uint32", saturated)
    rounded = tirx.bitwise_and(u + _u32((1 << (drop - 1)) - 1) + tirx.bitwise_and(tirx.shift_right(u, _u32(drop)), _u32(1)),
                               _u32(~((1 << drop) - 1) & 0xFFFFFFFF))
    normal = tirx.reinterpret("float32", rounded)
    smallest_normal = tirx.FloatImm("float32", 2.0 ** (1 - fmt.bias))
    return tirx.copysign(tirx.Select(tirx.LT(saturated, smallest_normal), subnormal, normal), value)


def _largest(fmt: Format) -> float:
    """The largest finite value: 448 (e4m3fn), 57344 (e5m2)."""
    exponent = (fmt.max_code >> fmt.mantissa) - fmt.bias
    return (1 + (fmt.max_code & ((1 << fmt.mantissa) - 1)) / (1 << fmt.mantissa)) * 2.0 ** exponent


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    kernel = str(func.attrs.get("global_symbol", "main")) if func.attrs else "main"
    views: dict[int, Any] = {}  # fp8 buffer -> its bytes (a uint8 buffer over the same data)
    prologue: list[Any] = []

    def bytes_of(buffer: Any) -> Any:
        key = buffer.__chandle__()
        if key not in views:
            ty = buffer.ty
            views[key] = tirx.decl_buffer(list(ty.shape), "uint8", name=f"{buffer.name}_bits",
                                          strides=list(ty.strides) or None)
        return views[key]

    for param in func.params:
        if isinstance(param.ty, tirx.BufferType) and _fp8(param.ty.dtype) is not None:
            prologue.append(tirx.DeclBuffer(bytes_of(param), data=tirx.buffer_data(param)))
    floats: dict[int, Any] = {}  # an fp8 variable (``x = A[i]``) -> its float32 value's variable
    refusals: list[str] = []

    def as_float(node: Any) -> Any:
        """A node of an fp8 type whose operands are already float32 values: its value."""
        ty = getattr(node, "ty", None)
        fmt = _fp8(ty.dtype) if isinstance(ty, tvm.ir.PrimType) else None  # (not a buffer's variable)
        if fmt is None or tvm.DataType(str(node.ty.dtype)).lanes != 1:
            if fmt is not None:
                refusals.append(f"the vector {node}")
            return node
        kind = type(node).__name__
        if isinstance(node, TensorLoad):
            return decode(tirx.BufferLoad(bytes_of(node.source), list(node.indices)), fmt)
        if kind == "Var":
            key = node.__chandle__()
            if key not in floats:
                floats[key] = tirx.Var(node.name, tvm.ir.PrimType("float32"))
            return floats[key]
        if kind == "FloatImm":
            return _round(tirx.FloatImm("float32", float(node.value)), fmt)
        if kind == "Cast":
            return _round(tirx.Cast("float32", node.value), fmt)
        if kind in ("Min", "Max"):  # exact on values
            return getattr(tirx, kind)(node.a, node.b)
        if kind in ("Add", "Sub", "Mul", "Div"):
            return _round(getattr(tirx, kind)(node.a, node.b), fmt)
        if kind == "Select":
            return tirx.Select(node.condition, node.true_value, node.false_value)
        if kind == "Call" and str(node.op.name) == "tirx.if_then_else":
            return tirx.if_then_else(*node.args)
        refusals.append(f"{node}")
        return node

    def on_store(store: Any) -> Any:
        fmt = _fp8(store.buffer.ty.dtype)
        if fmt is None:
            return store
        return tirx.BufferStore(bytes_of(store.buffer), encode(store.value, fmt), list(store.indices))

    def on_bind(bind: Any) -> Any:
        if not isinstance(bind.var.ty, tvm.ir.PrimType) or _fp8(bind.var.ty.dtype) is None:  # (a pointer too)
            return bind
        return tirx.Bind(as_float(bind.var), bind.value)

    def on_alloc(node: Any) -> Any:
        return node if _fp8(node.buffer.ty.dtype) is None else tirx.AllocBuffer(bytes_of(node.buffer))

    def on_decl(node: Any) -> Any:
        return node if _fp8(node.buffer.ty.dtype) is None else tirx.DeclBuffer(bytes_of(node.buffer), data=node.data)

    expressions = (TensorLoad, tirx.Var, tirx.FloatImm, tirx.Cast, tirx.Min, tirx.Max, tirx.Add, tirx.Sub,
                   tirx.Mul, tirx.Div, tirx.Select, tvm.ir.Call)
    body = tvm_ffi.structural_map(func.body, [(expressions, as_float), (tirx.BufferStore, on_store),
                                              (tirx.Bind, on_bind), (tirx.AllocBuffer, on_alloc),
                                              (tirx.DeclBuffer, on_decl)], order="post")
    if refusals:
        raise LanguageError(f"kernel {kernel!r}: the CPU backend computes fp8 in float32 element by element; "
                            f"it cannot compute {refusals[0]}: cast the operands to float32 first")
    if not views:
        return func
    return func.with_body(tirx.SeqStmt([*prologue, body]) if prologue else body)


def ComputeFp8() -> Any:
    return prim_func_pass(_run, "tl.cpu.ComputeFp8")
