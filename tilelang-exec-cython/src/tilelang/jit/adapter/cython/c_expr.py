"""Launch metadata expressions as C.

A :class:`tilelang.engine.artifact.KernelLaunch` stores grid, block, dynamic shared memory
and scalar operands as Python expressions over the kernel's scalar parameters and
symbolic dimensions (written by ``tilelang.backend.pass_pipeline.python_expr``), because
that is what the serialized artifact carries. The generated wrapper evaluates them in C,
so each one is parsed, checked against that small grammar and printed as C here:

- names become the wrapper's locals (``int64_t`` for integers, ``double`` for floats);
- ``//`` and ``%`` keep Python's floor semantics (``tl_floordiv``/``tl_floormod`` in
  tl_runtime.h; C's ``/`` truncates towards zero);
- ``min``/``max``/``int``/``float``, comparisons, ``x if c else y``, ``and``/``or``/``not``.

Anything else is a CompileError at build time, never a C compile failure or a wrong launch.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping

from tilelang.errors import CompileError

_ARITH = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*"}
_COMPARE = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}


class _Rejected(Exception):
    """An expression outside the grammar (internal: becomes a CompileError)."""


class CExpr:
    """One C expression and whether it is floating point (else int64_t)."""

    __slots__ = ("code", "is_float")

    def __init__(self, code: str, is_float: bool) -> None:
        self.code = code
        self.is_float = is_float


def _float(e: CExpr) -> str:
    return e.code if e.is_float else f"((double){e.code})"


def _constant(value: object) -> CExpr:
    if isinstance(value, bool):
        return CExpr("1" if value else "0", False)
    if isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise _Rejected(f"integer constant {value} does not fit int64")
        return CExpr(f"INT64_C({value})" if value >= 0 else f"(-INT64_C({-value}))", False)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _Rejected(f"constant {value} is not finite")
        return CExpr(f"({value!r})", True)
    raise _Rejected(f"constant {value!r} is not a number")


class _Printer:
    def __init__(self, names: Mapping[str, CExpr]) -> None:
        self.names = names

    def visit(self, node: ast.AST) -> CExpr:
        if isinstance(node, ast.Expression):
            return self.visit(node.body)
        if isinstance(node, ast.Constant):
            return _constant(node.value)
        if isinstance(node, ast.Name):
            if node.id not in self.names:
                raise _Rejected(f"unknown name {node.id!r}")
            return self.names[node.id]
        if isinstance(node, ast.BinOp):
            return self._binary(node)
        if isinstance(node, ast.UnaryOp):
            operand = self.visit(node.operand)
            if isinstance(node.op, ast.USub):
                return CExpr(f"(-{operand.code})", operand.is_float)
            if isinstance(node.op, ast.UAdd):
                return operand
            if isinstance(node.op, ast.Not):
                return CExpr(f"(!{operand.code})", False)
        if isinstance(node, ast.Compare):
            return self._compare(node)
        if isinstance(node, ast.BoolOp):
            op = " && " if isinstance(node.op, ast.And) else " || "
            return CExpr("(" + op.join(self.visit(v).code for v in node.values) + ")", False)
        if isinstance(node, ast.IfExp):
            cond, yes, no = self.visit(node.test), self.visit(node.body), self.visit(node.orelse)
            if yes.is_float or no.is_float:
                return CExpr(f"({cond.code} ? {_float(yes)} : {_float(no)})", True)
            return CExpr(f"({cond.code} ? {yes.code} : {no.code})", False)
        if isinstance(node, ast.Call):
            return self._call(node)
        raise _Rejected(f"{type(node).__name__} is not allowed")

    def _binary(self, node: ast.BinOp) -> CExpr:
        a, b = self.visit(node.left), self.visit(node.right)
        is_float = a.is_float or b.is_float
        if type(node.op) in _ARITH:
            op = _ARITH[type(node.op)]
            if is_float:
                return CExpr(f"({_float(a)} {op} {_float(b)})", True)
            return CExpr(f"({a.code} {op} {b.code})", False)
        if isinstance(node.op, ast.FloorDiv):
            if is_float:
                return CExpr(f"floor({_float(a)} / {_float(b)})", True)
            return CExpr(f"tl_floordiv({a.code}, {b.code})", False)
        if isinstance(node.op, ast.Mod):
            if is_float:
                return CExpr(f"tl_floormod_f({_float(a)}, {_float(b)})", True)
            return CExpr(f"tl_floormod({a.code}, {b.code})", False)
        raise _Rejected(f"operator {type(node.op).__name__} is not allowed")

    def _compare(self, node: ast.Compare) -> CExpr:
        parts, left = [], self.visit(node.left)
        for op, right_node in zip(node.ops, node.comparators):
            if type(op) not in _COMPARE:
                raise _Rejected(f"comparison {type(op).__name__} is not allowed")
            right = self.visit(right_node)
            if left.is_float or right.is_float:
                parts.append(f"({_float(left)} {_COMPARE[type(op)]} {_float(right)})")
            else:
                parts.append(f"({left.code} {_COMPARE[type(op)]} {right.code})")
            left = right
        return CExpr("(" + " && ".join(parts) + ")", False)

    def _call(self, node: ast.Call) -> CExpr:
        if not isinstance(node.func, ast.Name) or node.keywords:
            raise _Rejected("only min, max, int and float may be called")
        name = node.func.id
        if name not in ("min", "max", "int", "float"):
            raise _Rejected(f"call of {name!r} is not allowed")
        args = [self.visit(a) for a in node.args]
        if name in ("min", "max") and len(args) == 2:
            if args[0].is_float or args[1].is_float:
                fn = "fmin" if name == "min" else "fmax"
                return CExpr(f"{fn}({_float(args[0])}, {_float(args[1])})", True)
            return CExpr(f"tl_{name}({args[0].code}, {args[1].code})", False)
        if name == "int" and len(args) == 1:
            # Python's int() of a float truncates towards zero, like a C cast
            return CExpr(f"((int64_t){args[0].code})", False)
        if name == "float" and len(args) == 1:
            return CExpr(_float(args[0]), True)
        raise _Rejected(f"call of {name!r} with {len(args)} argument(s) is not allowed")


def c_expression(text: str, names: Mapping[str, CExpr], where: str) -> CExpr:
    """The C form of one metadata expression; ``names`` maps each name it may use to its C
    local. Raises CompileError naming ``where`` for anything outside the grammar."""
    try:
        return _Printer(names).visit(ast.parse(text, mode="eval"))
    except (SyntaxError, _Rejected) as err:
        raise CompileError(f"{where}: {text!r} cannot be evaluated in the generated C wrapper "
                           f"({err}); the launch metadata is corrupt or uses a name no argument "
                           "binds (symbolic strides?)") from None
