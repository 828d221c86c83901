"""RelaxParamAlignment: assume no more alignment of tensor arguments than their dtype's.

MakePackedAPI marks every tensor parameter's data pointer with ``storage_alignment`` 64
(TVM's default buffer alignment), and LLVM then emits aligned vector loads (vmovaps):
numpy and torch give no such guarantee — a small numpy array is 16-byte aligned, a view
can start anywhere — and an aligned load from such a pointer faults. Removing the
attribute makes codegen assume only the natural alignment of the element type.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx

from ...backend.pass_pipeline import prim_func_pass


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    def on_attr(stmt: Any) -> Any:
        return stmt.body if stmt.attr_key == "storage_alignment" else stmt

    body = tvm_ffi.structural_map(func.body, (tirx.AttrStmt, on_attr), order="post")
    return func.with_body(body)


def RelaxParamAlignment() -> Any:
    return prim_func_pass(_run, "tl.cpu.RelaxParamAlignment")
