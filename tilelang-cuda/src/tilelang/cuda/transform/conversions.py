"""PairConversions: a cast of 2 or 4 lanes as CUDA's paired conversions.

TVM's CUDA codegen prints a vector cast lane by lane (``__1.x = (half)(v_.x); __1.y =
...``): one cvt instruction per lane, then the packing. CUDA converts two lanes in one
instruction where PTX has one (``__float22half2_rn``: cvt.rn.f16x2.f32; bfloat16 and the
8-bit floats alike). This pass, the last before codegen (no TVM pass sees its calls),
turns such a cast into a helper of ``tl_convert.h``. TVM's codegen calls a function that
returns a vector once per lane, so each helper returns the converted lanes' bits as one
unsigned integer, which the kernel reinterprets as the vector. A cast of 4 lanes to
float32 (128 bits: no integer holds them) that is a store's whole value, from a contiguous
load, becomes two stores of 2 lanes. Upstream TileLang's codegen converts in pairs too;
its kernel-source checks look for these names.

The pairs: float32 <-> float16, float32 <-> bfloat16 (from sm_80, where TVM keeps bfloat16
a CUDA type), float32 / float16 <-> the 8-bit floats e4m3 and e5m2. Other casts, and
other lane counts, stay TVM's, except the 8-bit floats': a store of a cast of 8 or 16
lanes from or to them (a vectorized T.copy between an fp8 and a float16 tile) becomes
stores of 4 lanes, since TVM's codegen has no right way to print the wide cast.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tilelang.plugin import prim_func_pass
from tvm import tirx
from tvm.ir import TensorLoad  # what tensor loads are in apache-tvm 0.27

_FP8 = {"float8_e4m3fn": "__NV_E4M3", "float8_e5m2": "__NV_E5M2"}
_SHORT = {"float32": "float", "float16": "half", "bfloat16": "bfloat16"}
_BITS = {16: "uint16", 32: "uint32", 64: "uint64"}


def _helper(source: str, target: str, lanes: int) -> str | None:
    """tl_convert.h's helper converting ``lanes`` lanes (scalar type names), or None."""
    if {source, target} in ({"float32", "float16"}, {"float32", "bfloat16"}) or \
            (source in _FP8 and target == "float16"):
        if lanes == 4 and target == "float32":
            return None  # 128 bits: split into pairs by the store (on_store)
        if source in _FP8:
            return f"__tl_cvt_fp8x{lanes}_to_half{lanes}"
        return f"__tl_cvt_{_SHORT[source]}{lanes}_to_{_SHORT[target]}{lanes}"
    if source in _FP8 and target == "float32" and lanes == 2:
        return "__tl_cvt_fp8x2_to_float2"
    if target in _FP8 and source in ("float32", "float16"):
        return f"__tl_cvt_{_SHORT[source]}{lanes}_to_fp8x{lanes}<{_FP8[target]}>"
    return None


#: every helper call's name (template arguments included) -> the scalar type it converts to
CONVERSIONS = {name: target for source in ("float32", "float16", "bfloat16", *_FP8)
               for target in ("float32", "float16", "bfloat16", *_FP8) for lanes in (2, 4)
               if (name := _helper(source, target, lanes)) is not None}


def paired_conversion(source: Any, target: Any, bfloat16: bool = True) -> str | None:
    """The helper that converts a ``source`` vector to ``target`` (TVM dtypes of equal
    lanes), or None where the cast stays TVM's. ``bfloat16``: whether bfloat16 is a CUDA
    type on the arch (sm_80 on)."""
    source, target = tvm.DataType(str(source)), tvm.DataType(str(target))
    if source.lanes != target.lanes or source.lanes not in (2, 4):
        return None
    names = str(source.with_lanes(1)), str(target.with_lanes(1))
    if not bfloat16 and "bfloat16" in names:
        return None
    return _helper(*names, source.lanes)


def _paired(cast: Any, bfloat16: bool) -> Any:
    name = paired_conversion(cast.value.ty.dtype, cast.ty.dtype, bfloat16)
    if name is None:
        return cast
    dtype = tvm.DataType(str(cast.ty.dtype))
    bits = tirx.call_pure_extern(_BITS[dtype.bits * dtype.lanes], name, cast.value)
    return tirx.reinterpret(str(dtype), bits)


def _halves(store: Any, bfloat16: bool) -> Any:
    """``B[ramp of 4] = float32x4(A[ramp of 4])`` as two stores of two lanes each (their
    casts are then paired), or None where the store is not of that form."""
    load = store.value.value
    if not isinstance(load, TensorLoad) or not store.indices or not load.indices:
        return None
    ramps = [store.indices[-1], load.indices[-1]]
    if not all(isinstance(r, tirx.Ramp) and isinstance(r.stride, tirx.IntImm) and r.stride.value == 1
               for r in ramps):
        return None
    pair = str(tvm.DataType(str(load.ty.dtype)).with_lanes(2))
    if paired_conversion(pair, "float32x2", bfloat16) is None:
        return None
    return _sliced(store, 2)


def _wide_fp8_cast(expr: Any) -> bool:
    """Whether ``expr`` holds a cast of more than 4 lanes from or to an 8-bit float, which
    TVM's codegen prints as a reinterpretation of the bits (``(uint4)(*(uint2*)p)`` for
    e4m3 x 8 to half x 8, which nvcc refuses) or through a float32 vector CUDA lacks."""
    found: list[Any] = []

    def on_cast(cast: Any) -> None:
        dtype, source = tvm.DataType(str(cast.ty.dtype)), tvm.DataType(str(cast.value.ty.dtype))
        if dtype.lanes > 4 and any(str(t.with_lanes(1)).startswith("float8") for t in (dtype, source)):
            found.append(cast)

    tvm_ffi.structural_walk(expr, (tirx.Cast, on_cast))
    return bool(found)


def _lanes(expr: Any, first: int, lanes: int) -> Any | None:
    """``expr``'s lanes ``first`` .. ``first + lanes - 1`` as an expression of ``lanes``
    lanes, or None where ``expr`` is of a form not sliced here."""
    if isinstance(expr, tirx.Ramp):
        return tirx.Ramp(expr.base + expr.stride * first, expr.stride, lanes)
    if isinstance(expr, tirx.Broadcast):
        return tirx.Broadcast(expr.value, lanes)
    if isinstance(expr, tirx.Cast):
        value = _lanes(expr.value, first, lanes)
        return None if value is None else tirx.Cast(str(tvm.DataType(str(expr.ty.dtype)).with_lanes(lanes)), value)
    if isinstance(expr, TensorLoad):
        index = _lanes(expr.indices[-1], first, lanes) if expr.indices else None
        return None if index is None else tirx.BufferLoad(expr.source, [*expr.indices[:-1], index])
    return None


def _sliced(store: Any, lanes: int = 4) -> Any | None:
    """``B[ramp of n] = cast(...)`` as n / ``lanes`` stores of ``lanes`` lanes each (their
    casts then paired), or None where the store is not of that form."""
    index = store.indices[-1] if store.indices else None
    total = tvm.DataType(str(store.value.ty.dtype)).lanes
    if not isinstance(index, tirx.Ramp) or total % lanes:
        return None
    stores = []
    for first in range(0, total, lanes):
        value = _lanes(store.value, first, lanes)
        if value is None:
            return None
        stores.append(tirx.BufferStore(store.buffer, value, [*store.indices[:-1], _lanes(index, first, lanes)]))
    return tirx.SeqStmt(stores)


def PairConversions(arch: int) -> Any:
    """``arch``: the target's sm number (bfloat16 pairs from 80)."""
    bfloat16 = arch >= 80

    def on_store(store: Any) -> Any:
        if _wide_fp8_cast(store.value):
            split = _sliced(store)
            if split is not None:
                return tirx.SeqStmt([on_store(s) for s in split.seq])
        value = store.value
        if isinstance(value, tirx.Cast) and str(value.ty.dtype) == "float32x4":
            split = _halves(store, bfloat16)
            if split is not None:
                return split
        return store

    def run(func: Any, mod: Any, ctx: Any) -> Any:
        body = tvm_ffi.structural_map(func.body, (tirx.BufferStore, on_store), order="pre")
        body = tvm_ffi.structural_map(body, (tirx.Cast, lambda cast: _paired(cast, bfloat16)), order="post")
        return func if body.same_as(func.body) else func.with_body(body)

    return prim_func_pass(run, "tl.cuda.PairConversions")
