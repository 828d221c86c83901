"""The cutedsl router: which kernels leave ``cuda`` for ``cutedsl``, and why not.

Opt-in only (nothing changes unless asked): ``TILELANG_ROUTE=cutedsl`` (or
``cuda->cutedsl``), or this backend's own spelling ``TILELANG_USE_CUTEDSL=1`` (the seed's
``FLAGTREE_USE_TILEIR=1``). A kernel that uses a construct this backend does not lower yet
stays on ``cuda`` with that reason recorded in its route, and so does one whose GEMMs
would run far slower here (``slow_gemm_reason``: SIMT loops, or an accumulator taken
through shared memory every iteration). Kernels that use a cutedsl
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
    return slow_gemm_reason(kernel)


def _args_in_loops(kernel: Any) -> list[Any]:
    """The args of every tile op that runs inside a loop of ``kernel``."""
    import tvm_ffi
    from tilelang.plugin import tile_op_name
    from tvm import tirx
    from tvm_ffi.structural import WalkResult

    found: list[Any] = []

    def in_loop(loop: Any) -> Any:
        tvm_ffi.structural_walk(loop.body, (tirx.Evaluate, lambda stmt: found.append(stmt.value.args)
                                            if tile_op_name(stmt) is not None else None))
        return WalkResult.SKIP  # the outermost loop's walk saw the inner loops' ops

    tvm_ffi.structural_walk(kernel.body, (tirx.For, in_loop), order="pre")
    return found


def slow_gemm_reason(kernel: Any) -> str | None:
    """Why a T.gemm of ``kernel`` would run far slower here than on cuda (such a kernel is
    better left there), or None. ``target="cutedsl"`` still compiles it.

    - SIMT loops (no MMA atom fits): tens of times slower than tensor cores.
    - MMA atoms through shared memory in a loop (staged.py: an accumulator that other tile
      ops read, or a fragment A, as flash attention's per key block): every iteration takes
      the tile through shared memory and back, between barriers; flash attention ran 12x
      slower than on cuda on the H200 (docs/benchmarks/routing-h200-2026-12-01.md). A GEMM
      staged once (a product, then its row sums) is taken."""
    from .gemm import _Plan

    plan = _Plan(kernel)
    plan.analyze()
    looped = None
    for name, args in plan.ops:
        if name != "gemm" or plan.find(args[2].source, plan.accumulators) is not None:
            continue
        if not any(a.same_as(args) for a in plan.staged):
            return (f"T.gemm into {args[2].source.name!r} on CuTe MMA atoms (it needs float16/bfloat16 operands, "
                    "B in shared memory, a float32 accumulator and tiles the warps divide; else it takes SIMT "
                    "loops)")
        looped = _args_in_loops(kernel) if looped is None else looped
        if any(a.same_as(args) for a in looped):
            return (f"T.gemm into {args[2].source.name!r} in a loop at speed: other tile ops read its accumulator, "
                    "so every iteration would take it through shared memory (flash attention ran at 0.08x the "
                    "cuda path); target=\"cutedsl\" still compiles it")
    return None


def route(request: RouteRequest) -> RouteDecision | None:
    if request.backend != "cuda" or not opted_in(request):
        return None
    why = unsupported_reason(request.kernel)
    if why is not None:
        return RouteDecision("cuda", f"cutedsl does not lower {why}")
    return RouteDecision(BACKEND, "supported by cutedsl and opted in")


ROUTER = KernelRouter(BACKEND, route, description="opt-in: CUDA kernels whose constructs cutedsl lowers")
