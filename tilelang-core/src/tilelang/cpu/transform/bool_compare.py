"""LegalizeBoolCompare: ``==``/``!=`` between booleans compare them as int8 on the CPU.

TVM's LLVM codegen picks the comparison instruction from the operand type: signed and
unsigned integers get ``icmp``, anything else ``fcmp``, so ``mask[k] != 0`` on a bool
buffer (upstream's block-sparse kernels test their masks so) emits ``fcmp one i1``, which
LLVM's verifier rejects ("Invalid operand types for FCmp instruction"). Widening both
sides to int8 (a zero-extension) keeps the meaning and gets an integer compare.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx

from ...backend.pass_pipeline import prim_func_pass


def _is_bool(expr: Any) -> bool:
    return str(expr.ty) == "bool"


def _widen(expr: Any) -> Any:
    return tirx.Cast("int8", expr)


def _on_compare(node: Any) -> Any:
    if not (_is_bool(node.a) and _is_bool(node.b)):
        return node
    return type(node)(_widen(node.a), _widen(node.b))


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    body = tvm_ffi.structural_map(func.body, ((tirx.EQ, tirx.NE), _on_compare), order="post")
    return func if body.same_as(func.body) else func.with_body(body)


def LegalizeBoolCompare() -> Any:
    return prim_func_pass(_run, "tl.cpu.LegalizeBoolCompare")
