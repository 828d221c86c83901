"""LowerAtomics (CUDA): atomic element ops -> CUDA's atomic functions (CUDA C++ Programming
Guide, "Atomic Functions") and the helpers of ``tl_device.h`` that fill their gaps.

* ``tl.atomic_rmw_element(kind, dst[i], v, order)`` -> ``atomicAdd/Max/Min/Or/And/Xor(&dst[i], v)``
  where CUDA has the function for the element type, ``tl_atomic_max/min`` (a
  compare-and-swap loop) for floating max / min. CUDA's atomics return the previous value,
  so the op stays an expression (``return_prev``) or a statement as written.
* ``tl.atomic_load_element`` / ``tl.atomic_store_element`` -> ``tl_atomic_load/store``.

CUDA's atomic functions are relaxed; a stronger ``memory_order`` puts ``__threadfence()``
before (release) and / or after (acquire) the atomic (``tl_atomic_ordered``). A tile
atomic written with ``use_tma=True`` is served by these element atomics (the same result;
this backend has no TMA bulk reduction). A type without an atomic is a LanguageError
naming the types that have one.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tilelang.backend.pass_pipeline import prim_func_pass
from tilelang.errors import LanguageError
from tilelang.language.ops import (
    ATOMIC_LOAD_ELEMENT,
    ATOMIC_RMW_ELEMENT,
    ATOMIC_RMW_KINDS,
    ATOMIC_STORE_ELEMENT,
)
from tvm import tirx

_FLOATS = ("float32", "float64", "float16", "bfloat16")
#: element types each kind has an atomic for: CUDA's own functions (int64 is `long` in
#: TVM's CUDA source, for which CUDA declares no overload), or a tl_device.h loop
ATOMIC_DTYPES = {
    "add": ("float32", "float64", "int32", "uint32", "float16", "bfloat16"),
    "max": ("int32", "uint32", *_FLOATS),
    "min": ("int32", "uint32", *_FLOATS),
    "or": ("int32", "uint32"),
    "and": ("int32", "uint32"),
    "xor": ("int32", "uint32"),
}
#: loads and stores move the element's bits: any 2-, 4- or 8-byte type
ACCESS_DTYPES = ("int16", "uint16", "int32", "uint32", "int64", "uint64", *_FLOATS)
_CUDA_NAMES = {"add": "atomicAdd", "max": "atomicMax", "min": "atomicMin", "or": "atomicOr",
               "and": "atomicAnd", "xor": "atomicXor"}
_NOUNS = {"add": "adds"}  # "CUDA has atomic adds for ...", "atomic max for ..."


def _function(kind: str, dtype: str) -> str:
    if kind in ("max", "min") and dtype in _FLOATS:
        return f"tl_atomic_{kind}"
    return _CUDA_NAMES[kind]


def _ordered(call: Any, order: Any) -> Any:
    if isinstance(order, tirx.IntImm) and order.value == 0:
        return call
    return tirx.call_extern(str(call.ty), "tl_atomic_ordered", order, call)


class _Lowering:
    def __init__(self) -> None:
        self.unsupported: dict[str, set[str]] = {}

    def refuse(self, what: str, buffer: Any) -> None:
        self.unsupported.setdefault(what, set()).add(f"{buffer.name} ({buffer.dtype})")

    def on_call(self, call: Any) -> Any:
        name = getattr(getattr(call, "op", None), "name", None)
        if name == ATOMIC_RMW_ELEMENT:
            kind_index, target, value, order = call.args
            kind, dtype = ATOMIC_RMW_KINDS[int(kind_index.value)], str(target.source.dtype)
            if dtype not in ATOMIC_DTYPES[kind]:
                self.refuse(kind, target.source)
                return call
            atomic = tirx.call_extern(dtype, _function(kind, dtype), tirx.address_of(target), value)
            return _ordered(atomic, order)
        if name == ATOMIC_LOAD_ELEMENT:
            source, order = call.args
            if str(source.source.dtype) not in ACCESS_DTYPES:
                self.refuse("load", source.source)
                return call
            return tirx.call_extern(str(source.source.dtype), "tl_atomic_load", tirx.address_of(source), order)
        if name == ATOMIC_STORE_ELEMENT:
            target, value, order = call.args
            if str(target.source.dtype) not in ACCESS_DTYPES:
                self.refuse("store", target.source)
                return call
            return tirx.call_extern("int32", "tl_atomic_store", tirx.address_of(target), value, order)
        return call

    def error(self, kernel: str) -> LanguageError:
        parts = []
        for what, buffers in sorted(self.unsupported.items()):
            listed = ATOMIC_DTYPES.get(what, ACCESS_DTYPES)
            parts.append(f"T.atomic_{what} on {', '.join(sorted(buffers))}: CUDA has atomic "
                         f"{_NOUNS.get(what, what + 's' if what in ('load', 'store') else what)} for "
                         f"{', '.join(listed)}")
        return LanguageError(f"kernel {kernel!r}: {'; '.join(parts)}; use one of those types")


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    kernel = str(func.attrs.get("global_symbol", "main")) if func.attrs else "main"
    lowering = _Lowering()
    body = tvm_ffi.structural_map(func.body, (tvm.ir.Call, lowering.on_call), order="post")
    if lowering.unsupported:  # raised after the walk: FFI callbacks lose the exception type
        raise lowering.error(kernel)
    return func.with_body(body)


def LowerAtomics() -> Any:
    return prim_func_pass(_run, "tl.cuda.LowerAtomics")
