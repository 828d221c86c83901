"""LegalizeFloatMinMax: floating max and min on the CPU return the non-NaN operand, as on
the GPUs.

CUDA's ``max``/``min`` of floats are ``fmaxf``/``fminf`` (and ``__hmax``/``__hmin``), which
give back the operand that is not NaN; that is upstream's meaning of ``T.max`` and of a
``T.reduce_max`` without ``nan_propagate``. TVM's CPU code generators print a comparison
and a select instead, which takes the second operand whenever a comparison with NaN is
false: a row max that met a NaN restarted from the elements after it. Each floating
``Max``/``Min`` here becomes ``isnan(b) ? a : isnan(a) ? b : max(a, b)`` (vectors too),
so both operand orders skip the NaN, and a NaN comes out only where both are NaN.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx

from ...backend.pass_pipeline import prim_func_pass
from ...transform.reduce_kinds import isnan


def _is_float(expr: Any) -> bool:
    return str(expr.ty).split("x")[0].startswith(("float", "bfloat"))


def _on_minmax(node: Any) -> Any:
    if not _is_float(node):
        return node
    return tirx.Select(isnan(node.b), node.a, tirx.Select(isnan(node.a), node.b, node))


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    body = tvm_ffi.structural_map(func.body, ((tirx.Max, tirx.Min), _on_minmax), order="post")
    return func if body.same_as(func.body) else func.with_body(body)


def LegalizeFloatMinMax() -> Any:
    return prim_func_pass(_run, "tl.cpu.LegalizeFloatMinMax")
