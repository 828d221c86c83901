"""NameTheCpuDevice: a kernel without tensor parameters still names the device its
workspace is allocated on.

MakePackedAPI reads the device (type and id) of a function's workspace allocations from
its tensor arguments. A kernel with none (upstream's `def main():` kernels that compute
into local buffers only) left it unset, and host codegen stopped with TVM's internal
"Unknown device id in current IR". The CPU target has one device, (kDLCPU, 0), so such
a function gets TVM's device attributes around its body, as MakePackedAPI would write them.
"""

from __future__ import annotations

from typing import Any

from tvm import tirx

from ...backend.pass_pipeline import prim_func_pass

_KDL_CPU = 1


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    if any(isinstance(p.ty, tirx.BufferType) for p in func.params):
        return func
    node = tirx.StringImm("default")
    body = tirx.AttrStmt(node, "device_id", tirx.const(0, "int32"), func.body)
    return func.with_body(tirx.AttrStmt(node, "device_type", tirx.const(_KDL_CPU, "int32"), body))


def NameTheCpuDevice() -> Any:
    return prim_func_pass(_run, "tl.cpu.NameTheCpuDevice")
