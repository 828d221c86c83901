"""Atomics on cutedsl: core's LowerAtomics with CuTe DSL's atomic functions
(``cute.arch.atomic_add/max/min/or/and/xor`` on a pointer, ``atomic_fmax/fmin`` for float32
max/min, each returning the previous value), and their printing. A ``memory_order``
stronger than relaxed becomes the atomic's ``sem`` (PTX's ``.acquire``/``.release``/
``.acq_rel``, at ``gpu`` scope). Atomic loads and stores have no CuTe function here: such
kernels are refused with the types that would be taken (none)."""

from __future__ import annotations

from typing import Any

from tilelang.plugin import AtomicFunctions
from tilelang.plugin import LowerAtomics as _LowerAtomics

_INTS = ("int32", "uint32")
PREFIX = "tl_cute_atomic_"
CUTE_ATOMICS = AtomicFunctions(
    vendor="CuTe DSL",
    rmw={
        "add": (PREFIX + "add", ("float32", *_INTS)),
        "max": (PREFIX + "max", ("float32", *_INTS)),
        "min": (PREFIX + "min", ("float32", *_INTS)),
        "or": (PREFIX + "or", _INTS),
        "and": (PREFIX + "and", _INTS),
        "xor": (PREFIX + "xor", _INTS),
    },
    float_minmax={"max": PREFIX + "fmax", "min": PREFIX + "fmin"},
    ordered=PREFIX + "ordered",
)
#: MEMORY_ORDERS index (relaxed, consume, acquire, release, acq_rel, seq_cst) -> PTX sem
SEMANTICS = (None, "acquire", "acquire", "release", "acq_rel", "acq_rel")


def LowerAtomics() -> Any:
    return _LowerAtomics(CUTE_ATOMICS, "tl.cutedsl.LowerAtomics")


def atomic_call(printer: Any, name: str, args: list[Any], order: int = 0) -> str:
    """``cute.arch.atomic_<kind>(pointer, value[, sem=...])`` for a lowered atomic call."""
    target, value = args
    load = target.args[0]  # address_of(buffer[index])
    buffer = getattr(load, "buffer", None) or load.source
    pointer = f"({printer.names[hash(buffer)]}.iterator + ({printer.expr(load.indices[0])}))"
    sem = SEMANTICS[order]
    extra = f', sem="{sem}", scope="gpu"' if sem else ""
    return f"cute.arch.atomic_{name[len(PREFIX):]}({pointer}, {printer.expr(value)}{extra})"
