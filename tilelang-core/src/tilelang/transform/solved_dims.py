"""solve_dimension_symbols: a symbol that only a tensor dimension's expression gives.

Upstream accepts ``A: T.Tensor((n * 4,), T.int32)`` where no other dimension and no scalar
parameter gives ``n``: the call's tensor determines it (16 elements: ``n = 4``). Here such a
dimension, linear in one symbol (``a * n + b`` with whole numbers ``a > 0`` and ``b``),
becomes a symbol of its own, ``<parameter>_shape<axis>``, bound from the tensor like any
symbolic dimension, and the kernel starts with ``n = (that - b) // a``. Every tensor
parameter whose shape or strides mention ``n`` is redeclared over its data with ``n`` as
written (the subbyte parameters' pattern, transform/subbyte.py), so the kernel body is
unchanged. That the dimension is ``a * n + b`` for a whole ``n >= 0`` is checked when the
kernel is called (``CompiledArtifact.shape_checks``, jit/arguments.py and each launcher):
17 elements for ``n * 4`` is an ArgumentError, not a kernel that handles 16.

Other expressions (two unknown symbols, ``n * n``, ``n // 2``) are left as they are, and
kernel_params refuses them as before.
"""

from __future__ import annotations

from typing import Any

from tvm import tirx
from tvm.sym.analyzer import Analyzer

from ..language.ops import substitute, uses_var

#: (parameter index, axis, the new symbol's name, a, b, the solved symbol's name, the dimension as written)
ShapeCheck = tuple[int, int, str, int, int, str, str]


def _known(func: Any) -> list[Any]:
    known = []
    for param in func.params:
        ty = param.ty
        if not isinstance(ty, tirx.BufferType):
            known.append(param)
        else:
            known.extend(d for d in [*ty.shape, *ty.strides] if isinstance(d, tirx.Var))
    return known


def solve_dimension_symbols(func: Any) -> tuple[Any, tuple[ShapeCheck, ...]]:
    """``func`` with each symbol that only a linear dimension expression gives solved from
    that dimension, and the checks a call must pass (see the module docstring)."""
    known, analyzer = _known(func), Analyzer()
    values: list[tuple[Any, Any]] = []  # (a solved symbol, its value)
    checks: list[ShapeCheck] = []
    new_dims: dict[tuple[int, int], Any] = {}
    for index, param in enumerate(func.params):
        if not isinstance(param.ty, tirx.BufferType):
            continue
        for axis, dim in enumerate(param.ty.shape):
            if isinstance(dim, (tirx.IntImm, tirx.Var)):
                continue
            unknown = [v for v in tirx.analysis.undefined_vars(dim, []) if not any(v.same_as(k) for k in known)]
            if len(unknown) != 1:
                continue
            var = unknown[0]
            b = analyzer.simplify(substitute(dim, [(var, tirx.const(0, var.ty.dtype))]))
            a = analyzer.simplify(substitute(dim, [(var, tirx.const(1, var.ty.dtype))]) - b)
            if not (isinstance(a, tirx.IntImm) and isinstance(b, tirx.IntImm) and a.value > 0
                    and analyzer.can_prove_equal(dim, var * a + b)):
                continue
            symbol = tirx.Var(f"{param.name}_shape{axis}", var.ty)
            values.append((var, tirx.floordiv(symbol - b, a)))
            new_dims[(index, axis)] = symbol
            checks.append((index, axis, symbol.name, int(a.value), int(b.value), var.name, str(dim)))
            known.append(var)
    if not values:
        return func, ()
    params, prologue = [], [tirx.Bind(var, value) for var, value in values]
    for index, param in enumerate(func.params):
        ty = param.ty
        mentions = isinstance(ty, tirx.BufferType) and any(
            uses_var(d, var) for var, _ in values for d in [*ty.shape, *ty.strides])
        if not mentions:
            params.append(param)
            continue
        shape = [new_dims.get((index, axis), substitute(d, values)) for axis, d in enumerate(ty.shape)]
        strides = [substitute(s, values) for s in ty.strides]
        stored = tirx.decl_buffer(shape, str(ty.dtype), name=param.name, strides=strides or None)
        params.append(stored)
        prologue.append(tirx.DeclBuffer(param, data=tirx.buffer_data(stored)))
    body = tirx.SeqStmt([*prologue, func.body])
    return tirx.PrimFunc(params, body, func.ret_type, func.attrs, func.span), tuple(checks)


__all__ = ["ShapeCheck", "solve_dimension_symbols"]
