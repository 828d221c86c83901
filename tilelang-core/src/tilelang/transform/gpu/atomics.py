"""LowerAtomics: atomic element ops -> a GPU dialect's atomic functions, given as data.

* ``tl.atomic_rmw_element(kind, dst[i], v, order)`` -> ``<rmw function>(&dst[i], v)`` for
  the element types the dialect has the function for (CUDA's ``atomicAdd`` ...; HIP names
  them alike), or the dialect's helper for floating max / min (a compare-and-swap loop).
  The functions return the previous value, so the op stays an expression (``return_prev``)
  or a statement as written.
* ``tl.atomic_load_element`` / ``tl.atomic_store_element`` -> the dialect's load / store
  helpers.

A ``memory_order`` stronger than relaxed wraps the atomic in the dialect's ``ordered``
helper (fences before and / or after). A type without an atomic is a LanguageError naming
the types that have one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ...backend.pass_pipeline import prim_func_pass
from ...errors import LanguageError
from ...language.ops import (
    ATOMIC_LOAD_ELEMENT,
    ATOMIC_RMW_ELEMENT,
    ATOMIC_RMW_KINDS,
    ATOMIC_STORE_ELEMENT,
)

_FLOATS = ("float32", "float64", "float16", "bfloat16")
_NOUNS = {"add": "adds"}  # "CUDA has atomic adds for ...", "atomic max for ..."


@dataclass(frozen=True)
class AtomicFunctions:
    """A dialect's atomics. ``rmw``: kind ("add", "max", "min", "or", "and", "xor") ->
    (function, element types it takes); ``float_minmax``: "max"/"min" -> the helper used
    for floating types; ``helpers``: (kind, element type) -> the helper used for that type
    instead of the kind's function (a type the function has no overload for, e.g. CUDA's
    64-bit integer adds); ``ordered``, ``load``, ``store``: helper names;
    ``access_dtypes``: the types loads and stores move; ``vendor`` names the dialect in
    error messages."""

    vendor: str
    rmw: Mapping[str, tuple[str, tuple[str, ...]]]
    float_minmax: Mapping[str, str] = field(default_factory=dict)
    helpers: Mapping[tuple[str, str], str] = field(default_factory=dict)
    ordered: str = ""
    load: str = ""
    store: str = ""
    access_dtypes: tuple[str, ...] = ()

    def function(self, kind: str, dtype: str) -> str | None:
        if kind in self.float_minmax and dtype in _FLOATS and dtype in self.rmw[kind][1]:
            return self.float_minmax[kind]
        name, dtypes = self.rmw[kind]
        return self.helpers.get((kind, dtype), name) if dtype in dtypes else None


def _ordered(call: Any, order: Any, wrapper: str) -> Any:
    if isinstance(order, tirx.IntImm) and order.value == 0:
        return call
    return tirx.call_extern(str(call.ty), wrapper, order, call)


class _Lowering:
    def __init__(self, functions: AtomicFunctions) -> None:
        self.functions = functions
        self.unsupported: dict[str, set[str]] = {}

    def refuse(self, what: str, buffer: Any) -> None:
        self.unsupported.setdefault(what, set()).add(f"{buffer.name} ({buffer.dtype})")

    def on_call(self, call: Any) -> Any:
        f = self.functions
        name = getattr(getattr(call, "op", None), "name", None)
        if name == ATOMIC_RMW_ELEMENT:
            kind_index, target, value, order = call.args
            kind, dtype = ATOMIC_RMW_KINDS[int(kind_index.value)], str(target.source.dtype)
            function = f.function(kind, dtype)
            if function is None:
                self.refuse(kind, target.source)
                return call
            return _ordered(tirx.call_extern(dtype, function, tirx.address_of(target), value), order, f.ordered)
        if name == ATOMIC_LOAD_ELEMENT:
            source, order = call.args
            if str(source.source.dtype) not in f.access_dtypes:
                self.refuse("load", source.source)
                return call
            return tirx.call_extern(str(source.source.dtype), f.load, tirx.address_of(source), order)
        if name == ATOMIC_STORE_ELEMENT:
            target, value, order = call.args
            if str(target.source.dtype) not in f.access_dtypes:
                self.refuse("store", target.source)
                return call
            return tirx.call_extern("int32", f.store, tirx.address_of(target), value, order)
        return call

    def error(self, kernel: str) -> LanguageError:
        parts = []
        for what, buffers in sorted(self.unsupported.items()):
            listed = self.functions.rmw[what][1] if what in self.functions.rmw else self.functions.access_dtypes
            noun = _NOUNS.get(what, what + "s" if what in ("load", "store") else what)
            parts.append(f"T.atomic_{what} on {', '.join(sorted(buffers))}: {self.functions.vendor} has atomic "
                         f"{noun} for {', '.join(listed)}")
        return LanguageError(f"kernel {kernel!r}: {'; '.join(parts)}; use one of those types")


def LowerAtomics(functions: AtomicFunctions, name: str = "tl.gpu.LowerAtomics") -> Any:
    def run(func: Any, mod: Any, ctx: Any) -> Any:
        kernel = str(func.attrs.get("global_symbol", "main")) if func.attrs else "main"
        lowering = _Lowering(functions)
        body = tvm_ffi.structural_map(func.body, (tvm.ir.Call, lowering.on_call), order="post")
        if lowering.unsupported:  # raised after the walk: FFI callbacks lose the exception type
            raise lowering.error(kernel)
        return func.with_body(body)

    return prim_func_pass(run, name)
