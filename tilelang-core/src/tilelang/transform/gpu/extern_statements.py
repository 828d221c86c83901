"""VoidExternStatements: an extern call made as a statement returns nothing.

Upstream's kernels call their own device functions for their effect,
``T.call_extern("handle", "decode_i2u_to_i8s", T.access_ptr(src, "r"), T.access_ptr(dst,
"w"))`` (bitnet's int2 decode), where the C function returns ``void``. TVM's C-family code
generators print a call of type ``handle`` as ``((void*)decode_i2u_to_i8s(...))``, a cast of
a void value that nvcc refuses ("invalid type conversion"). Such a call whose value nothing
reads is given the type ``void``, which they print as the plain call.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx

from ...backend.pass_pipeline import prim_func_pass


def _void(stmt: Any) -> Any:
    call = stmt.value
    if not isinstance(call, tirx.Call) or getattr(call.op, "name", "") != "tirx.call_extern" or \
            str(getattr(call.ty, "dtype", "handle")) != "handle":
        return stmt
    return tirx.Evaluate(tirx.call_extern("void", *call.args), span=stmt.span)


def VoidExternStatements() -> Any:
    def run(func: Any, mod: Any, ctx: Any) -> Any:
        body = tvm_ffi.structural_map(func.body, (tirx.Evaluate, _void), order="post")
        return func if body.same_as(func.body) else func.with_body(body)

    return prim_func_pass(run, "tl.gpu.VoidExternStatements")
