"""LowerWarpOps (CUDA): core's warp-op lowering with CUDA's warp functions (CUDA C++
Programming Guide, "Warp Shuffle Functions", "Warp Vote Functions", "Warp Match Functions",
"Synchronization Functions"): 32 lanes, the member mask first, a 32-bit ballot (widened to
upstream's uint64). ``__match_all_sync`` reports through a pointer; ``tl_match_all_sync``
(tl_device.h) returns its value alone."""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tilelang.plugin import LowerWarpOps as _LowerWarpOps
from tilelang.plugin import WarpFunctions

# the op names of tilelang.language.ops (the plugin API lists functions, not constants)
CUDA_WARP = WarpFunctions(
    vendor="CUDA",
    warp_size=32,
    functions={
        "tl.shfl_sync": "__shfl_sync",
        "tl.shfl_xor_sync": "__shfl_xor_sync",
        "tl.shfl_down_sync": "__shfl_down_sync",
        "tl.shfl_up_sync": "__shfl_up_sync",
        "tl.sync_warp": "__syncwarp",
        "tl.any_sync": "__any_sync",
        "tl.all_sync": "__all_sync",
        "tl.ballot_sync": "__ballot_sync",
        "tl.activemask": "__activemask",
        "tl.match_any_sync": "__match_any_sync",
        "tl.match_all_sync": "tl_match_all_sync",
        "tl.syncthreads_count": "__syncthreads_count",
        "tl.syncthreads_and": "__syncthreads_and",
        "tl.syncthreads_or": "__syncthreads_or",
        "tl.fns": "__fns",  # T.__fns: not a warp function, but CUDA's alone as they are
    },
    masked=True,
    ballot_bits=32,
)


def LowerWarpOps() -> Any:
    return _LowerWarpOps(CUDA_WARP, "tl.cuda.LowerWarpOps")


def _found_first_set(select: Any) -> Any:
    """``x`` where ``select`` is core's ``T.__ffs(x)``: ``x == 0 ? 0 : popcount(x ^ (x - 1))``
    (tilelang.language.bit_search), with the same ``x`` at each place; else None."""
    from tvm import tirx

    condition, zero, count = select.condition, select.true_value, select.false_value
    if not (isinstance(condition, tirx.EQ) and isinstance(zero, tirx.IntImm) and zero.value == 0
            and isinstance(count, tirx.Cast) and isinstance(count.value, tirx.Call)
            and getattr(count.value.op, "name", "") == "tirx.popcount"):
        return None
    bits = count.value.args[0]
    if not (isinstance(bits, tirx.BitwiseXor) and isinstance(bits.b, tirx.Sub)
            and isinstance(bits.b.b, tirx.IntImm) and bits.b.b.value == 1):
        return None
    x = condition.a
    same = all(tvm_ffi.structural_equal(x, other) for other in (bits.a, bits.b.a))
    if not same or not isinstance(condition.b, tirx.IntImm) or condition.b.value != 0:
        return None
    return x


def FindFirstSet() -> Any:
    """``T.__ffs(x)`` as CUDA's ``__ffs`` / ``__ffsll`` (upstream's source has them): core
    builds it as arithmetic every backend compiles, which names ``x`` three times, so a
    ballot in it was taken three times (and an ``x`` with an effect would have had it three
    times). Runs first, while the expression is as core built it."""
    from tilelang.plugin import prim_func_pass
    from tvm import tirx

    def on_select(select: Any) -> Any:
        x = _found_first_set(select)
        if x is None:
            return select
        dtype = str(x.ty.dtype)
        wide = dtype.endswith("64")
        signed_type = "int64" if wide else "int32"
        inner = x.args[0] if isinstance(x, tirx.Call) and getattr(x.op, "name", "") == "tirx.reinterpret" else None
        if inner is not None and str(inner.ty.dtype) == signed_type:  # core made a signed x unsigned
            signed = inner
        else:
            signed = tirx.reinterpret(signed_type, x) if dtype.startswith("uint") else x
        return tirx.call_pure_extern("int32", "__ffsll" if wide else "__ffs", signed)

    def run(func: Any, mod: Any, ctx: Any) -> Any:
        body = tvm_ffi.structural_map(func.body, (tirx.Select, on_select), order="post")
        return func if body.same_as(func.body) else func.with_body(body)

    return prim_func_pass(run, "tl.cuda.FindFirstSet")
