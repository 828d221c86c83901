"""The cutedsl router: which kernels leave ``cuda`` for ``cutedsl``, and why not.

Opt-in only (nothing changes unless asked): ``TILELANG_ROUTE=cutedsl`` (or
``cuda->cutedsl``), or this backend's own spelling ``TILELANG_USE_CUTEDSL=1`` (the seed's
``FLAGTREE_USE_TILEIR=1``). A kernel that uses a construct this backend does not lower yet
stays on ``cuda`` with that reason recorded in its route. Kernels that use a cutedsl
language extension are routed by core (the extension's provider) whatever the switch.
"""

from __future__ import annotations

import os
from typing import Any

from tilelang.plugin import KernelRouter, RouteDecision, RouteRequest

USE_ENV = "TILELANG_USE_CUTEDSL"
BACKEND = "cutedsl"

#: tile ops the pipeline lowers into code the CuTe DSL printer knows
TILE_OPS = frozenset({"tl.copy", "tl.fill", "tl.reduce", "tl.use_swizzle", "tl.ext", "tl.parallel_extent",
                      "tl.transpose", "tl.gemm"})
#: TVM builtins and math the printer maps (tilelang.cutedsl.printer)
BUILTINS = frozenset({
    "tirx.exp", "tirx.exp2", "tirx.log", "tirx.log2", "tirx.sqrt", "tirx.rsqrt", "tirx.fabs",
    "tirx.tanh", "tirx.sin", "tirx.cos", "tirx.floor", "tirx.ceil", "tirx.pow", "tirx.if_then_else",
    "tirx.shift_right", "tirx.shift_left", "tirx.bitwise_and", "tirx.bitwise_or", "tirx.bitwise_xor",
    "tirx.tvm_storage_sync", "tirx.likely", "tirx.ret", "tirx.isnan", "tirx.round", "tirx.trunc",
    "tirx.sigmoid", "tirx.erf", "tirx.exp10", "tirx.log10", "tirx.nearbyint", "tirx.fmod",
})
DTYPES = frozenset({"float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64",
                    "uint8", "uint16", "uint32", "uint64", "bool"})


def opted_in(request: RouteRequest) -> bool:
    return request.opted_in or os.environ.get(USE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def unsupported_reason(kernel: Any) -> str | None:
    """None when this backend lowers every construct ``kernel`` uses, else the first one it
    does not, in words (what stays on cuda says this)."""
    import tvm
    import tvm_ffi
    from tvm import tirx

    for param in kernel.params:
        buffer = param.ty
        if not isinstance(buffer, tirx.BufferType):
            if str(getattr(buffer, "dtype", "")) not in DTYPES:
                return f"scalar parameter {param.name!r} of type {buffer}"
            continue  # passed by value, as its CuTe DSL type
        if str(buffer.dtype) not in DTYPES:
            return f"parameter {param.name!r} of dtype {buffer.dtype}"
        if not all(isinstance(d, (tirx.IntImm, tirx.Var)) for d in buffer.shape):
            return f"parameter {param.name!r} has an extent that is an expression (static or symbolic extents only)"
    found: list[str] = []

    def visit(call: Any) -> None:
        name = getattr(getattr(call, "op", None), "name", None)
        if isinstance(name, str) and name.startswith("prim."):  # prim.if_then_else: TVM's other spelling
            name = "tirx." + name[5:]
        if not isinstance(name, str) or name in TILE_OPS or name in BUILTINS:
            return
        if name.startswith("tl.atomic"):
            found.append("atomics")
        else:
            found.append(f"the op {name}")

    tvm_ffi.structural_walk(kernel.body, (tvm.ir.Call, visit))
    if found:
        return found[0]
    return simt_gemm_reason(kernel)


def simt_gemm_reason(kernel: Any) -> str | None:
    """Why a T.gemm of ``kernel`` would take the SIMT loops (tens of times slower than
    tensor cores: such a kernel is better left on cuda), or None. ``target="cutedsl"``
    still compiles it."""
    from .gemm import _Plan

    plan = _Plan(kernel)
    plan.analyze()
    for name, args in plan.ops:
        staged = any(a.same_as(args) for a in plan.staged)  # MMA atoms through shared memory
        if name == "gemm" and plan.find(args[2].source, plan.accumulators) is None and not staged:
            return (f"T.gemm into {args[2].source.name!r} on CuTe MMA atoms (it needs float16/bfloat16 operands, "
                    "B in shared memory, a float32 accumulator and tiles the warps divide; else it takes SIMT "
                    "loops)")
    return None


def route(request: RouteRequest) -> RouteDecision | None:
    if request.backend != "cuda" or not opted_in(request):
        return None
    why = unsupported_reason(request.kernel)
    if why is not None:
        return RouteDecision("cuda", f"cutedsl does not lower {why}")
    return RouteDecision(BACKEND, "supported by cutedsl and opted in")


ROUTER = KernelRouter(BACKEND, route, description="opt-in: CUDA kernels whose constructs cutedsl lowers")
