"""RefuseNarrowFloats: the CPU backend has no arithmetic for fp6 and float8_e8m0fnu (fp4 e2m1
is stored as bytes and computed in float32 by LowerSubByteAccess, on every backend; e4m3 and
e5m2 by ComputeFp8, fp8.py).

TVM's LLVM and C code generators stop on these types with an internal check; the kernel
gets a LanguageError instead, naming the buffer and where such kernels run (the CUDA
backend legalizes fp8 through CUDA's __nv_fp8 types).
"""

from __future__ import annotations

from typing import Any

from ...backend.pass_pipeline import prim_func_pass
from ...errors import LanguageError
from ...transform.subbyte import is_subbyte
from .fp8 import FORMATS as FP8_FORMATS

_NARROW_FLOATS = ("float8_", "float6_", "float4_")  # float8_e4m3fn, ...; not float64


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    import tvm_ffi
    from tvm import tirx

    kernel = str(func.attrs.get("global_symbol", "main")) if func.attrs else "main"
    found: list[tuple[str, str]] = []

    def visit(var: Any) -> None:
        ty = getattr(var, "ty", None)
        if isinstance(ty, tirx.BufferType) and str(ty.dtype).startswith(_NARROW_FLOATS) and not is_subbyte(ty.dtype) \
                and str(ty.dtype) not in FP8_FORMATS:
            found.append((var.name, str(ty.dtype)))

    for param in func.params:
        visit(param)
    tvm_ffi.structural_walk(func.body, (tirx.AllocBuffer, lambda a: visit(a.buffer)))
    if found:
        name, dtype = found[0]
        raise LanguageError(
            f"kernel {kernel!r}: buffer {name!r} has dtype {dtype!r}, which the CPU backend cannot "
            "compute with (its fp8 arithmetic covers float8_e4m3fn and float8_e5m2); compile it for "
            "CUDA (target='cuda'), or convert to float16/float32 on the host")
    return func


def RefuseNarrowFloats() -> Any:
    return prim_func_pass(_run, "tl.cpu.RefuseNarrowFloats")
