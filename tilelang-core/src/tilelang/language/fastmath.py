"""Upstream's approximate and rounding-explicit math: ``T.__exp(x)`` ... and ``T.ieee_add(x, y,
rounding_mode)`` ...

Each is an op (``tlmath.fast_<name>``, ``tlmath.ieee_<name>``: not ``tl.*``, which names
ops a backend must lower before code generation; these are lowered by TVM's LowerIntrin,
per target kind) whose meaning is backend-neutral: a
fast approximation of ``exp`` (etc.), or an IEEE operation in the named rounding mode. Core
lowers them where a backend has nothing better (the ``default`` intrinsic rule): the
precise function, and for IEEE operations round-to-nearest arithmetic, which is what the
ordinary operators do. A backend with hardware approximations or rounding-mode
instructions registers its own rule for its target kind (the CUDA backend: ``__expf``,
``__fadd_rz`` ...). A rounding mode other than ``rn`` on a backend without such a rule
is a CompileError at compile time, naming the call.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx
from tvm.tirx import register_intrin_lowering

from ..errors import CompileError, LanguageError, LanguageTypeError
from .ops import CallEffectKind, _register

FAST_FUNCTIONS = ("exp", "exp10", "log", "log2", "log10", "sin", "cos", "tan")
#: name -> (operand count, rounding modes the operation takes)
IEEE_OPERATIONS = {
    "add": (2, ("rn", "rz", "ru", "rd")), "sub": (2, ("rn", "rz", "ru", "rd")),
    "mul": (2, ("rn", "rz", "ru", "rd")), "fmaf": (3, ("rn", "rz", "ru", "rd")),
    "frcp": (1, ("rn", "rz", "ru", "rd")), "fsqrt": (1, ("rn", "rz", "ru", "rd")),
    "frsqrt": (1, ("rn",)), "fdiv": (2, ("rn", "rz", "ru", "rd")),
}

for _name in FAST_FUNCTIONS:
    _register(f"tlmath.fast_{_name}", CallEffectKind.Pure.value, f"T.__{_name}")
#: ``T.fast_rcp(x)``: an approximate ``1 / x`` (core's rule: the division)
FAST_RCP = "tlmath.fast_rcp"
_register(FAST_RCP, CallEffectKind.Pure.value, "T.fast_rcp")
for _name in IEEE_OPERATIONS:
    _register(f"tlmath.ieee_{_name}", CallEffectKind.Pure.value, f"T.ieee_{_name}")


def _dtype(value: Any) -> str:
    # TVM 0.27: a scalar Var's `.dtype` is its buffer type's; its value type is `.ty`
    return str(value.ty.dtype)


def _float(x: Any, what: str) -> Any:
    value = tirx.const(x, "float32") if isinstance(x, (int, float)) else x
    dtype = _dtype(value)
    if not dtype.startswith(("float", "bfloat")) or dtype.startswith("float8"):
        raise LanguageTypeError(f"{what} only supports floating-point inputs, but got {dtype}")
    return value


def fast(name: str, x: Any) -> Any:
    value = _float(x, f"T.__{name}")
    return tirx.call_intrin(_dtype(value), f"tlmath.fast_{name}", value)


def ieee(name: str, operands: tuple[Any, ...], rounding_mode: str) -> Any:
    modes = IEEE_OPERATIONS[name][1]
    if rounding_mode not in modes:
        raise LanguageError(f"T.ieee_{name}: Invalid rounding mode {rounding_mode!r}; rounding_mode must be one "
                            f"of {list(modes)}")
    values = [_float(v, f"T.ieee_{name}") for v in operands]
    dtype = _dtype(values[0])
    values = [v if _dtype(v) == dtype else tirx.Cast(dtype, v) for v in values]
    return tirx.call_intrin(dtype, f"tlmath.ieee_{name}", *values, tvm.ir.StringImm(rounding_mode))


def __exp(x: Any) -> Any: return fast("exp", x)  # noqa: E704
def __exp10(x: Any) -> Any: return fast("exp10", x)  # noqa: E704
def __log(x: Any) -> Any: return fast("log", x)  # noqa: E704
def __log2(x: Any) -> Any: return fast("log2", x)  # noqa: E704
def __log10(x: Any) -> Any: return fast("log10", x)  # noqa: E704
def __sin(x: Any) -> Any: return fast("sin", x)  # noqa: E704
def __cos(x: Any) -> Any: return fast("cos", x)  # noqa: E704
def __tan(x: Any) -> Any: return fast("tan", x)  # noqa: E704


def fast_rcp(x: Any) -> Any:
    """Upstream's ``T.fast_rcp(x)``: ``1 / x``, approximate where the backend has a faster
    reciprocal (CUDA: ``__fdividef(1.0f, x)`` for float32)."""
    value = _float(x, "T.fast_rcp")
    return tirx.call_intrin(_dtype(value), FAST_RCP, value)


def ieee_add(x: Any, y: Any, rounding_mode: str = "rn") -> Any: return ieee("add", (x, y), rounding_mode)  # noqa: E704
def ieee_sub(x: Any, y: Any, rounding_mode: str = "rn") -> Any: return ieee("sub", (x, y), rounding_mode)  # noqa: E704
def ieee_mul(x: Any, y: Any, rounding_mode: str = "rn") -> Any: return ieee("mul", (x, y), rounding_mode)  # noqa: E704
def ieee_fmaf(x: Any, y: Any, z: Any, rounding_mode: str = "rn") -> Any: return ieee("fmaf", (x, y, z), rounding_mode)
def ieee_frcp(x: Any, rounding_mode: str = "rn") -> Any: return ieee("frcp", (x,), rounding_mode)  # noqa: E704
def ieee_fsqrt(x: Any, rounding_mode: str = "rn") -> Any: return ieee("fsqrt", (x,), rounding_mode)  # noqa: E704
def ieee_frsqrt(x: Any) -> Any: return ieee("frsqrt", (x,), "rn")  # noqa: E704
def ieee_fdiv(x: Any, y: Any, rounding_mode: str = "rn") -> Any: return ieee("fdiv", (x, y), rounding_mode)  # noqa: E704


# -- core's rules: the precise function; IEEE operations in round-to-nearest ---------------

def _precise(name: str) -> Any:
    function = getattr(tirx, name)
    return lambda op: function(op.args[0])


_NEAREST = {
    "add": lambda a: a[0] + a[1], "sub": lambda a: a[0] - a[1], "mul": lambda a: a[0] * a[1],
    "fmaf": lambda a: a[0] * a[1] + a[2], "frcp": lambda a: tirx.const(1.0, _dtype(a[0])) / a[0],
    "fsqrt": lambda a: tirx.sqrt(a[0]), "frsqrt": lambda a: tirx.rsqrt(a[0]), "fdiv": lambda a: a[0] / a[1],
}


def _nearest(name: str) -> Any:
    def rule(op: Any) -> Any:
        *operands, mode = op.args
        if str(mode.value) != "rn":
            dtype = _dtype(operands[0])
            if dtype in ("float16", "bfloat16"):  # upstream's words for half precision
                raise CompileError(
                    f"T.ieee_{name}(..., rounding_mode={str(mode.value)!r}) on {dtype}: Only rounding mode "
                    "'rn' is available for half precision; compute in float32 for the other modes")
            raise CompileError(
                f"T.ieee_{name}(..., rounding_mode={str(mode.value)!r}): the backend compiling this "
                "kernel has no arithmetic in that rounding mode; only 'rn' (round to nearest, what "
                "the ordinary operators do) is available here")
        return _NEAREST[name](list(operands))

    return rule


for _name in FAST_FUNCTIONS:
    register_intrin_lowering(f"tlmath.fast_{_name}", target="default", f=_precise(_name), level=10)
register_intrin_lowering(FAST_RCP, target="default", f=lambda op: tirx.const(1.0, _dtype(op.args[0])) / op.args[0],
                         level=10)
for _name in IEEE_OPERATIONS:
    register_intrin_lowering(f"tlmath.ieee_{_name}", target="default", f=_nearest(_name), level=10)

__all__ = ["FAST_FUNCTIONS", "FAST_RCP", "IEEE_OPERATIONS", "fast", "fast_rcp", "ieee"] + [
    f"__{n}" for n in FAST_FUNCTIONS] + [
    f"ieee_{n}" for n in IEEE_OPERATIONS]
