"""Names that upstream TileLang's TVM fork has and Apache TVM 0.27 does not.

Upstream's kernels import TVM directly (``from tvm import tirx``) and annotate helpers with
``tirx.PrimExpr``. TVM 0.27 folded every expression into ``tvm.ir.Expr``; a primitive
expression is an ``Expr`` whose type is a ``PrimType`` (``tvm.ir.expr.is_prim_expr``).
``install()`` adds, where TVM lacks them, so such code runs unchanged:

* ``tvm.tirx.PrimExpr``: a class whose ``isinstance`` answers exactly that;
* ``tvm.tirx.Call`` and ``tvm.tirx.StringImm``: TVM 0.27 keeps these classes in ``tvm.ir``
  (``isinstance(x, tirx.Call)`` in upstream's code asks about the same nodes);
* ``PrimFunc.buffer_map``: upstream's parameter -> buffer map; a TVM 0.27 tensor parameter
  is itself the buffer (a ``Var`` of ``BufferType``), so each maps to itself;
* ``tvm.arith``: upstream's name for TVM 0.27's ``tvm.sym`` (``tvm.arith.Analyzer()``,
  ``detect_iter_map``, ``IntervalSet``: the same module under its former name);
* ``Expr.dtype``: upstream's expressions carry ``.dtype`` (``val.dtype == T.uint8``); in
  TVM 0.27 it is ``expr.ty.dtype``. The property answers for primitive-typed expressions
  and raises AttributeError otherwise, so ``hasattr(x, "dtype")`` stays False for others.

It adds names only, never replaces one: a TVM that has them keeps its own. The one
exception is ``tvm.transform.PassContext``, which becomes a subclass that also takes
TileLang's pass-config keys (tilelang.tvm_pass_context).

Called when ``tvm.tirx`` is imported after ``import tilelang`` (``install_on_import``: an
upstream script reads ``tirx.PrimExpr`` in its annotations at its top level, before any
``T.<name>`` has loaded the language), when the language's names load
(tilelang.language._surface) and on ``from tilelang import tvm``.
Upstream's spelling of ``tirx`` (not ``tir``) is TVM 0.27's too; ``tvm.arith`` is the one
module alias.
"""

from __future__ import annotations

import sys
from typing import Any

from .tvm_import import ExecHook


class _PrimExprMeta(type):
    def __instancecheck__(cls, value: Any) -> bool:
        from tvm.ir.expr import is_prim_expr

        return is_prim_expr(value)


class PrimExpr(metaclass=_PrimExprMeta):
    """A TVM expression of a primitive type (``isinstance(x, tirx.PrimExpr)``): upstream's
    base class, answered here by TVM 0.27's ``is_prim_expr``. Not constructible; build
    expressions with ``tirx.const``, ``tirx.Var``, arithmetic and ``T.*``."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("tirx.PrimExpr is an abstract expression type; build expressions with "
                        "tirx.const(value, dtype), tirx.Var(name, dtype) or arithmetic on them")


def _expr_dtype(expr: Any) -> Any:
    from tvm.ir import PrimType

    ty = expr.ty
    if isinstance(ty, PrimType):
        return ty.dtype
    raise AttributeError(f"{type(expr).__name__} of type {ty} has no dtype (only primitive-typed "
                         "expressions have one)")


def _var_dtype(tvm_property: Any) -> Any:
    """TVM's ``Var.dtype`` (tensor variables), answering for primitive variables as well."""

    def dtype(var: Any) -> Any:
        from tvm.ir import PrimType

        if isinstance(var.ty, PrimType):
            return var.ty.dtype
        return tvm_property.fget(var)

    dtype._tilelang_prim = True  # type: ignore[attr-defined]
    return property(dtype, doc=tvm_property.__doc__)


def _buffer_map(func: Any) -> dict[Any, Any]:
    from tvm import tirx

    return {p: p for p in func.params if isinstance(p.ty, tirx.BufferType)}


def install() -> None:
    """Add upstream's missing names to TVM's modules (idempotent)."""
    import tvm
    from tvm import ir, tirx
    from tvm.ir import Expr

    if not hasattr(tvm, "arith") and "tvm.arith" not in sys.modules:
        import tvm.sym

        tvm.arith = tvm.sym
        sys.modules["tvm.arith"] = tvm.sym
    if not hasattr(tirx, "PrimExpr"):
        tirx.PrimExpr = PrimExpr
    for name in ("Call", "StringImm"):
        if not hasattr(tirx, name):
            setattr(tirx, name, getattr(ir, name))
    if "dtype" not in dir(Expr):
        Expr.dtype = property(_expr_dtype, doc="The dtype of a primitive-typed expression (expr.ty.dtype).")
    own = ir.Var.__dict__.get("dtype")
    if isinstance(own, property) and not getattr(own.fget, "_tilelang_prim", False):
        ir.Var.dtype = _var_dtype(own)
    from . import tvm_pass_context

    tvm_pass_context.install()  # PassContext(config={"tl.*": ...}): the one class replaced
    if "buffer_map" not in dir(tirx.PrimFunc):
        tirx.PrimFunc.buffer_map = property(_buffer_map, doc="Each tensor parameter -> its buffer (TVM 0.27: "
                                            "the parameter itself, a Var of BufferType).")


def _run_then_install(run: Any, module: Any) -> None:
    run(module)
    install()


_AFTER_TIRX = ExecHook("tvm.tirx", _run_then_install)


def install_on_import() -> None:
    """``install`` as soon as ``tvm.tirx`` exists: now if it is imported already, else right
    after its import (``import tilelang`` itself imports no TVM)."""
    if "tvm.tirx" in sys.modules:
        install()
    else:
        _AFTER_TIRX.install()
