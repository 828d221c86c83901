"""The CUDA rules for core's approximate and rounding-explicit math (``T.__exp``,
``T.ieee_add`` ...; see ``tilelang.language.fastmath``): CUDA's intrinsic functions
(CUDA C++ Programming Guide, "Intrinsic Functions"): ``__expf`` ... for float32 (``T.fast_rcp``:
``__fdividef(1.0f, x)``), and the
``__f<op>_<mode>`` / ``__d<op>_<mode>`` operations in every rounding mode. Other dtypes keep
core's rule (the precise function, round-to-nearest arithmetic). Importing registers."""

from __future__ import annotations

from typing import Any

from tilelang.plugin import FAST_FUNCTIONS, IEEE_OPERATIONS
from tvm.tirx import FloatImm, call_pure_extern, register_intrin_lowering

#: IEEE operation -> (float32 name, float64 name), "{}" the rounding mode
_IEEE = {
    "add": ("__fadd_{}", "__dadd_{}"), "sub": ("__fsub_{}", "__dsub_{}"), "mul": ("__fmul_{}", "__dmul_{}"),
    "fmaf": ("__fmaf_{}", "__fma_{}"), "frcp": ("__frcp_{}", "__drcp_{}"),
    "fsqrt": ("__fsqrt_{}", "__dsqrt_{}"), "frsqrt": ("__frsqrt_{}", None), "fdiv": ("__fdiv_{}", "__ddiv_{}"),
}


def _dtype(op: Any) -> str:
    return str(op.ty.dtype) if hasattr(op.ty, "dtype") else str(op.ty)


def _fast(name: str) -> Any:
    def rule(op: Any) -> Any:
        if _dtype(op) != "float32":
            return op  # core's default rule: the precise function
        return call_pure_extern("float32", f"__{name}f", op.args[0])

    return rule


def _ieee(name: str) -> Any:
    def rule(op: Any) -> Any:
        *operands, mode = op.args
        names = _IEEE[name]
        pattern = {"float32": names[0], "float64": names[1]}.get(_dtype(op))
        if pattern is None:
            return op
        return call_pure_extern(_dtype(op), pattern.format(str(mode.value)), *operands)

    return rule


for _name in FAST_FUNCTIONS:
    register_intrin_lowering(f"tlmath.fast_{_name}", target="cuda", f=_fast(_name), level=20)


def _fast_rcp(op: Any) -> Any:
    if _dtype(op) != "float32":
        return op  # core's default rule: the division
    return call_pure_extern("float32", "__fdividef", FloatImm("float32", 1.0), op.args[0])


register_intrin_lowering("tlmath.fast_rcp", target="cuda", f=_fast_rcp, level=20)  # T.fast_rcp
for _name in IEEE_OPERATIONS:
    register_intrin_lowering(f"tlmath.ieee_{_name}", target="cuda", f=_ieee(_name), level=20)
