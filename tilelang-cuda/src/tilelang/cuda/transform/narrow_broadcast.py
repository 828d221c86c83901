"""PackByteBroadcasts: an 8-bit value broadcast to a vector of 4n lanes.

TVM's CUDA code generator packs a broadcast byte only for a 4-lane constant; for a
runtime value it stopped ("Check failed: p.has_value()"), and for 16 lanes it printed
``make_int4`` with 16 arguments; an fp8 broadcast of 8 or 16 lanes stopped on "lanes ==
1 || lanes == 2 || lanes == 4" (a vectorized zero fill of an fp8 tensor, upstream's issue
1601). Upstream's issue 2480 fills a
local int8 vector that way (``packed[0:32] = T.Broadcast(src[0], 32)``). Here the byte is
packed into a 32-bit word (``(x & 0xff) * 0x01010101``), the word broadcast to n lanes of
int32, and the result reinterpreted as the 4n-lane byte vector.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tilelang.plugin import prim_func_pass
from tvm import tirx


def _on_broadcast(node: Any) -> Any:
    dtype = tvm.DataType(str(node.ty.dtype))
    if dtype.bits != 8 or dtype.lanes % 4:
        return node
    integer = dtype.type_code in (0, 1)  # int8 / uint8; else fp8, which TVM broadcasts up to 4 lanes
    if not integer and dtype.lanes == 4:
        return node
    unsigned = node.value if dtype.type_code == 1 else tirx.reinterpret("uint8", node.value)
    byte = tirx.Cast("uint32", unsigned)
    word = tirx.reinterpret("int32", byte * tirx.const(0x01010101, "uint32"))
    words = word if dtype.lanes == 4 else tirx.Broadcast(word, dtype.lanes // 4)
    return tirx.reinterpret(str(node.ty.dtype), words)


def _on_ramp(node: Any) -> Any:
    """A byte ramp (``A[i] = T.cast(i + 1, "int8")`` under T.vectorized(4)) printed as
    ``make_int`` (no such function): computed in int32 lanes and narrowed."""
    dtype = tvm.DataType(str(node.ty.dtype))
    if dtype.bits != 8 or dtype.type_code not in (0, 1) or dtype.lanes != 4:  # other widths print
        return node
    wide = tirx.Ramp(tirx.Cast("int32", node.base), tirx.Cast("int32", node.stride), dtype.lanes)
    return tirx.Cast(str(node.ty.dtype), wide)


def _on_select(node: Any) -> Any:
    """``T.Select(i < 512, A[i], 0.0)`` vectorized where the condition is the same for every
    lane: TVM stored the broadcast condition in a temporary of the values' type (``float4
    v_ = make_ushort4(...)``), which does not compile; one scalar branch picks a vector."""
    if isinstance(node.condition, tirx.Broadcast):
        return tirx.if_then_else(node.condition.value, node.true_value, node.false_value)
    return node


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    body = tvm_ffi.structural_map(func.body, [(tirx.Broadcast, _on_broadcast), (tirx.Ramp, _on_ramp),
                                              (tirx.Select, _on_select)], order="post")
    return func if body.same_as(func.body) else func.with_body(body)


def PackByteBroadcasts() -> Any:
    return prim_func_pass(_run, "tl.cuda.PackByteBroadcasts")
