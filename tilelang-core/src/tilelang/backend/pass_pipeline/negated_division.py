"""FlipNegatedDivisions: ``(c - i) // d`` and ``(c - i) % d`` rewritten over ``+i`` before
FlattenBuffer (every backend gets it through flatten_and_vectorize).

TVM 0.27's iterator-map simplification, which FlattenBuffer applies to every index,
rewrites a division of ``c - i`` (a loop variable with coefficient -1, plus a constant) by
``d`` as ``i // -d + c // d``, which is wrong whenever ``i`` and ``c`` leave remainders:
``A[(31 - i) // 2]`` read ``A[14]`` at ``i = 1`` instead of ``A[15]``, and ``(c - i) % d``
lost its offset the same way. Kernels that walk a tensor backwards (a reversed copy, the
upper half of sub-byte elements read in reverse) got wrong values silently.

A division whose dividend ``a`` has only negative variable coefficients is rewritten by
the identities (exact for every integer ``a`` and ``d > 0``)::

    a // d  ==  -(((d - 1) - a) // d)
    a %  d  ==  (d - 1) - (((d - 1) - a) % d)

after which the variables count upwards, a form the iterator map gets right
(tests/test_negated_division.py checks both against the brute force).
"""

from __future__ import annotations

from typing import Any

from .pipeline import prim_func_pass


def _coefficients_all_negative(expr: Any, analyzer: Any) -> bool:
    """Whether ``expr`` is linear in its variables with only negative coefficients."""
    import tvm
    import tvm_ffi
    from tvm import tirx

    from ...language.ops import substitute

    nodes: list[Any] = []
    tvm_ffi.structural_walk(expr, (object, nodes.append))
    affine = (tirx.Add, tirx.Sub, tirx.Mul, tirx.IntImm, tirx.Var)
    if not all(isinstance(n, affine) for n in nodes if tvm.ir.is_prim_expr(n)) or not all(
            str(v.ty).startswith(("int", "uint")) for v in nodes if isinstance(v, tirx.Var)):
        return False  # loads, calls, pointers: not the affine form the iterator map rewrites
    found: list[Any] = []
    for v in nodes:
        if isinstance(v, tirx.Var) and not any(v.same_as(f) for f in found):
            found.append(v)
    if not found:
        return False
    for var in found:
        step = analyzer.simplify(substitute(expr, [(var, var + 1)]) - expr)
        if not isinstance(step, tirx.IntImm) or step.value >= 0:
            return False
    return True


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    import tvm_ffi
    from tvm import tirx
    from tvm.sym.analyzer import Analyzer

    analyzer = Analyzer()

    def flip(node: Any) -> Any:
        divisor = node.b
        if not (isinstance(divisor, tirx.IntImm) and divisor.value > 0):
            return node
        if not _coefficients_all_negative(node.a, analyzer):
            return node
        flipped = (divisor - 1) - node.a
        if isinstance(node, tirx.FloorDiv):
            return tirx.const(0, str(divisor.ty.dtype)) - tirx.floordiv(flipped, divisor)
        return (divisor - 1) - tirx.floormod(flipped, divisor)

    body = tvm_ffi.structural_map(func.body, ((tirx.FloorDiv, tirx.FloorMod), flip), order="post")
    return func if body.same_as(func.body) else func.with_body(body)


def FlipNegatedDivisions() -> Any:
    return prim_func_pass(_run, "tl.FlipNegatedDivisions")
