"""LowerAtomics (CUDA): ``tl.atomic_add_element(dst[i], v)`` -> ``atomicAdd(&dst[i], v)``
(CUDA C++ Programming Guide, "Atomic Functions": float, double, int, unsigned int, and
__half / __nv_bfloat16 on the architectures this backend targets)."""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tilelang.backend.pass_pipeline import prim_func_pass
from tilelang.errors import LanguageError
from tilelang.language.ops import ATOMIC_ADD_ELEMENT
from tvm import tirx

ATOMIC_ADD_DTYPES = ("float32", "float64", "int32", "uint32", "float16", "bfloat16")


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    kernel = str(func.attrs.get("global_symbol", "main")) if func.attrs else "main"
    unsupported: list[str] = []

    def on_evaluate(stmt: Any) -> Any:
        if getattr(getattr(stmt.value, "op", None), "name", None) != ATOMIC_ADD_ELEMENT:
            return stmt
        target, value = stmt.value.args
        dtype = str(target.source.dtype)
        if dtype not in ATOMIC_ADD_DTYPES:
            unsupported.append(f"{target.source.name} ({dtype})")
            return stmt
        return tirx.Evaluate(tirx.call_extern(dtype, "atomicAdd", tirx.address_of(target), value))

    body = tvm_ffi.structural_map(func.body, (tirx.Evaluate, on_evaluate), order="post")
    if unsupported:  # raised after the walk: FFI callbacks lose the exception type
        raise LanguageError(f"kernel {kernel!r}: T.atomic_add on {', '.join(sorted(set(unsupported)))}: CUDA "
                            f"has atomic adds for {', '.join(ATOMIC_ADD_DTYPES)}; accumulate in one of those")
    return func.with_body(body)


def LowerAtomics() -> Any:
    return prim_func_pass(_run, "tl.cuda.LowerAtomics")
