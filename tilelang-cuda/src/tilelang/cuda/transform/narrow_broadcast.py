"""PackByteBroadcasts: a runtime int8/uint8 value broadcast to a vector of 4n lanes.

TVM's CUDA code generator packs a broadcast byte only for a 4-lane constant; for a
runtime value it stopped ("Check failed: p.has_value()"), and for 16 lanes it printed
``make_int4`` with 16 arguments. Upstream's issue 2480 fills a
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
    if dtype.bits != 8 or dtype.type_code not in (0, 1) or dtype.lanes % 4:  # int8 / uint8 only
        return node
    byte = tirx.Cast("uint32", tirx.reinterpret("uint8", node.value) if dtype.type_code == 0 else node.value)
    word = tirx.reinterpret("int32", byte * tirx.const(0x01010101, "uint32"))
    words = word if dtype.lanes == 4 else tirx.Broadcast(word, dtype.lanes // 4)
    return tirx.reinterpret(str(node.ty.dtype), words)


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    body = tvm_ffi.structural_map(func.body, (tirx.Broadcast, _on_broadcast), order="post")
    return func if body.same_as(func.body) else func.with_body(body)


def PackByteBroadcasts() -> Any:
    return prim_func_pass(_run, "tl.cuda.PackByteBroadcasts")
