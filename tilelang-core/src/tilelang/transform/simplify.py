"""Upstream's ``tilelang.transform.simplify``: TVM's arithmetic simplification of a kernel
before it is compiled. Upstream's SIMT GEMM and GEMV tests build their kernels through it
(``@simplify_prim_func`` on the factory, ``apply_simplify(main)``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ..errors import LanguageError


def Simplify(simplify_arguments: bool = False) -> Any:
    """TVM's StmtSimplify pass (``simplify_arguments`` is upstream's; TVM 0.27 simplifies the
    body, and the parameters stay as written)."""
    from tvm import tirx

    return tirx.transform.StmtSimplify()


def apply_simplify(stmt: Any, inline_let: bool = False) -> Any:
    """``stmt`` (a PrimFunc, or an IRModule of one) simplified; returns the PrimFunc, without
    the tensor parameters its body never refers to, as upstream's (its GEMV without a bias
    is called with A, B, C). ``inline_let`` is upstream's and accepted: TVM's Simplify
    already substitutes the lets it can prove cheap."""
    import tvm
    from tvm import tirx

    if isinstance(stmt, tirx.PrimFunc):
        mod = tvm.IRModule({"main": stmt})
    elif isinstance(stmt, tvm.IRModule):
        mod = stmt
    else:
        raise LanguageError(f"apply_simplify: expected a PrimFunc or an IRModule, got {type(stmt).__name__}")
    functions = list(Simplify()(mod).functions.values())
    if len(functions) != 1:
        raise LanguageError(f"apply_simplify: expected one function, the module has {len(functions)}")
    return _without_unused_tensors(functions[0])


def _without_unused_tensors(func: Any) -> Any:
    from tvm import tirx

    from ..engine.lower import unused_tensor_params

    unused = unused_tensor_params(func)
    if not unused:
        return func
    params = [p for p in func.params if p.name not in unused]
    return tirx.PrimFunc(params, func.body, func.ret_type, func.attrs, func.span)


def simplify_prim_func(factory: Callable[..., Any]) -> Callable[..., Any]:
    """A decorator: the kernel factory's PrimFunc, simplified (apply_simplify)."""

    @functools.wraps(factory)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return apply_simplify(factory(*args, **kwargs))

    return wrapper


__all__ = ["Simplify", "apply_simplify", "simplify_prim_func"]
