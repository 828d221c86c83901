"""Names that upstream TileLang's TVM fork has and Apache TVM 0.27 does not.

Upstream's kernels import TVM directly (``from tvm import tirx``) and annotate helpers with
``tirx.PrimExpr``. TVM 0.27 folded every expression into ``tvm.ir.Expr``; a primitive
expression is an ``Expr`` whose type is a ``PrimType`` (``tvm.ir.expr.is_prim_expr``).
``install()`` adds, where TVM lacks them, so such code runs unchanged:

* ``tvm.tirx.PrimExpr``: a class whose ``isinstance`` answers exactly that;
* ``Expr.dtype``: upstream's expressions carry ``.dtype`` (``val.dtype == T.uint8``); in
  TVM 0.27 it is ``expr.ty.dtype``. The property answers for primitive-typed expressions
  and raises AttributeError otherwise, so ``hasattr(x, "dtype")`` stays False for others.

It adds names only, never replaces one: a TVM that has them keeps its own.

Called when ``tvm.tirx`` is imported after ``import tilelang`` (``install_on_import``: an
upstream script reads ``tirx.PrimExpr`` in its annotations at its top level, before any
``T.<name>`` has loaded the language), when the language's names load
(tilelang.language._surface) and on ``from tilelang import tvm``.
Upstream's spelling of the module itself (``tirx``, not ``tir``) is TVM 0.27's too, so no
module alias is needed.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from typing import Any


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


def install() -> None:
    """Add upstream's missing names to TVM's modules (idempotent)."""
    from tvm import tirx
    from tvm.ir import Expr

    if not hasattr(tirx, "PrimExpr"):
        tirx.PrimExpr = PrimExpr
    if "dtype" not in dir(Expr):
        Expr.dtype = property(_expr_dtype, doc="The dtype of a primitive-typed expression (expr.ty.dtype).")


class _AfterTirx(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when ``tvm.tirx`` is about to be imported, it steps aside and
    hands back the normal spec with ``install`` run after the module's own code."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "tvm.tirx":
            return None
        _remove_finder()
        spec = importlib.util.find_spec(name)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run_module = loader.exec_module

        def exec_module(module: Any) -> None:
            run_module(module)
            install()

        loader.exec_module = exec_module  # this spec's own loader object
        return spec


_FINDER = _AfterTirx()


def _remove_finder() -> None:
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)


def install_on_import() -> None:
    """``install`` as soon as ``tvm.tirx`` exists: now if it is imported already, else right
    after its import (``import tilelang`` itself imports no TVM)."""
    if "tvm.tirx" in sys.modules:
        install()
    elif _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
