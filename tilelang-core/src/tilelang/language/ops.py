"""IR ops TileLang registers with TVM (ops are created by registering their attributes)."""

from __future__ import annotations

import tvm
from tvm.tirx import CallEffectKind

#: marks a loop extent written with T.Parallel until the frontend turns the loop parallel
PARALLEL_EXTENT = "tl.parallel_extent"


def _register(name: str, effect: int, printer: str) -> None:
    tvm.ir.register_op_attr(name, "TCallEffectKind", effect)
    tvm.ir.register_op_attr(name, "TScriptPrinterName", printer)


_register(PARALLEL_EXTENT, CallEffectKind.Pure.value, "T.parallel_extent")

#: tile operations (tilelang.language.tile); operands are buffer regions
TILE_OPS = {name: f"tl.{name}" for name in ("copy", "fill", "gemm", "reduce", "cumsum", "use_swizzle",
                                             "atomic_add", "annotate_layout")}
for _name, _op in TILE_OPS.items():
    _register(_op, CallEffectKind.Opaque.value, f"tl_{_name}")

#: one element's atomic update, ``tl.atomic_add_element(dst[i], value)``: what LowerTileOps
#: leaves of T.atomic_add; each backend lowers it (an atomic instruction, or a plain update
#: where the backend runs the kernel serially)
ATOMIC_ADD_ELEMENT = "tl.atomic_add_element"
_register(ATOMIC_ADD_ELEMENT, CallEffectKind.Opaque.value, "tl_atomic_add_element")


def is_call_to(expr: object, op_name: str) -> bool:
    op = getattr(expr, "op", None)
    return op is not None and getattr(op, "name", None) == op_name


def tl_op_names_in(node: object) -> set[str]:
    """Names of every ``tl.*`` op still called somewhere in a PrimFunc or statement."""
    import tvm_ffi

    found: set[str] = set()

    def visit(call: object) -> None:
        name = getattr(getattr(call, "op", None), "name", None)
        if isinstance(name, str) and name.startswith("tl."):
            found.add(name)

    tvm_ffi.structural_walk(node, (tvm.ir.Call, visit))
    return found
