"""LowerAtomics (CPU): atomic element ops -> plain accesses.

A plain read-modify-write is an atomic one only when nothing runs concurrently, so
LowerKernelLaunchToLoops runs a kernel that uses atomics on one thread (blocks and
T.Parallel loops in sequence: see :func:`uses_atomics`); this pass then lowers

* ``tl.atomic_rmw_element(kind, dst[i], v, order)`` as a statement to
  ``dst[i] = combine(dst[i], v)``;
* the same op inside an expression (``P[i] = T.atomic_add(B[0], A[i], return_prev=True)``)
  to ``prev = dst[i]; dst[i] = combine(prev, v)`` placed before the statement, and ``prev``
  in the expression — in evaluation order, so two such updates in one statement see each
  other as they would in sequence;
* ``tl.atomic_load_element(src[i], order)`` to ``src[i]`` and
  ``tl.atomic_store_element(dst[i], v, order)`` to ``dst[i] = v``.

Memory orders need nothing more on one thread. A tile atomic written with ``use_tma=True``
(a request for a GPU's TMA bulk reduction) is refused, as upstream's CPU backend does.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ...backend.pass_pipeline import prim_func_pass
from ...errors import LanguageError
from ...language.bounds import source_location
from ...language.ops import (
    ATOMIC_ELEMENT_OPS,
    ATOMIC_LOAD_ELEMENT,
    ATOMIC_RMW_ELEMENT,
    ATOMIC_RMW_KINDS,
    ATOMIC_STORE_ELEMENT,
)
from ...transform.lower_tile_ops import ATOMIC_USE_TMA_ATTR

#: expressions that evaluate some operands only under a condition: an update hoisted out
#: of one would happen unconditionally
_CONDITIONAL = (tirx.Select, tirx.And, tirx.Or)
_IF_THEN_ELSE = tvm.ir.Op.get("prim.if_then_else")


def _op_name(node: Any) -> str | None:
    return getattr(getattr(node, "op", None), "name", None)


def uses_atomics(node: Any) -> bool:
    found: list[Any] = []
    tvm_ffi.structural_walk(node, (tvm.ir.Call, lambda c: found.append(c) if _op_name(c) in ATOMIC_ELEMENT_OPS
                                   else None))
    return bool(found)


def _combine(kind: str, old: Any, value: Any) -> Any:
    if kind == "add":
        return old + value
    if kind == "max":
        return tirx.max(old, value)
    if kind == "min":
        return tirx.min(old, value)
    return {"or": tirx.bitwise_or, "and": tirx.bitwise_and, "xor": tirx.bitwise_xor}[kind](old, value)


class _Lowering:
    def __init__(self, kernel: str) -> None:
        self.kernel = kernel
        self.counter = 0
        self.errors: list[LanguageError] = []

    def expr(self, expr: Any, prefix: list[Any]) -> Any:
        """``expr`` without atomic element ops; the updates it performs go to ``prefix``."""
        if not uses_atomics(expr):
            return expr
        self._refuse_conditional(expr)
        self._refuse_vectors(expr)

        def on_call(call: Any) -> Any:
            name = _op_name(call)
            if name == ATOMIC_LOAD_ELEMENT:
                return call.args[0]
            if name != ATOMIC_RMW_ELEMENT:
                return call
            kind, target, value, _order = call.args
            self.counter += 1
            prev = tirx.Var(f"{target.source.name}_prev{self.counter}", str(target.source.dtype))
            prefix.extend([tirx.Bind(prev, target), _rmw_store(kind, target, value, prev)])
            return prev

        return tvm_ffi.structural_map(expr, (tvm.ir.Call, on_call), order="post")

    def _refuse_conditional(self, expr: Any) -> None:
        def check(node: Any) -> None:
            operands = node.args[1:] if _op_name(node) == _IF_THEN_ELSE.name else \
                [node] if isinstance(node, _CONDITIONAL) else []
            if any(_op_name(c) == ATOMIC_RMW_ELEMENT for o in operands for c in _calls(o)):
                self.errors.append(LanguageError(
                    f"kernel {self.kernel!r}: an atomic update with return_prev inside a conditional "
                    f"expression ({type(node).__name__}) would run whatever the condition; assign it in "
                    "an `if` statement instead"))

        tvm_ffi.structural_walk(expr, check)

    def _refuse_vectors(self, expr: Any) -> None:
        def check(node: Any) -> None:
            if any(_op_name(v) == ATOMIC_RMW_ELEMENT for v in node.vectors):
                self.errors.append(LanguageError(
                    f"kernel {self.kernel!r}: T.atomic_addx{len(node.vectors)}(..., return_prev=True) gives a "
                    "vector of previous values, which the CPU backend does not build (its C target has no "
                    "vector types); take each element's previous value with "
                    "T.atomic_add(dst[i], v, return_prev=True)"))

        tvm_ffi.structural_walk(expr, (tirx.Shuffle, check))

    def stmt(self, stmt: Any) -> Any:
        before = len(self.errors)
        result = self._stmt(stmt)
        for k in range(before, len(self.errors)):  # point at the user's line
            self.errors[k] = LanguageError(str(self.errors[k]) + source_location(stmt.span))
        return result

    def _stmt(self, stmt: Any) -> Any:
        prefix: list[Any] = []
        if isinstance(stmt, tirx.Evaluate) and _op_name(stmt.value) == ATOMIC_RMW_ELEMENT:
            kind, target, value, _order = (self.expr(a, prefix) for a in stmt.value.args)
            new = _rmw_store(kind, target, value, target)
        elif isinstance(stmt, tirx.Evaluate) and _op_name(stmt.value) == ATOMIC_STORE_ELEMENT:
            target, value, _order = (self.expr(a, prefix) for a in stmt.value.args)
            new = tirx.BufferStore(target.source, value, list(target.indices))
        elif isinstance(stmt, tirx.Evaluate):
            new = tirx.Evaluate(self.expr(stmt.value, prefix))
        elif isinstance(stmt, tirx.BufferStore):
            value = self.expr(stmt.value, prefix)
            indices = [self.expr(i, prefix) for i in stmt.indices]
            new = tirx.BufferStore(stmt.buffer, value, indices)
        elif isinstance(stmt, tirx.Bind):
            new = tirx.Bind(stmt.var, self.expr(stmt.value, prefix))
        elif isinstance(stmt, tirx.IfThenElse):
            new = tirx.IfThenElse(self.expr(stmt.condition, prefix), stmt.then_case, stmt.else_case)
        else:
            return stmt
        return tirx.SeqStmt([*prefix, new]) if prefix else new


def _calls(expr: Any) -> list[Any]:
    found: list[Any] = []
    tvm_ffi.structural_walk(expr, (tvm.ir.Call, found.append))
    return found


def _rmw_store(kind: Any, target: Any, value: Any, old: Any) -> Any:
    """``dst[i] = combine(old, v)``: ``old`` is the element itself, or its value read before."""
    combined = _combine(ATOMIC_RMW_KINDS[int(kind.value)], old, value)
    return tirx.BufferStore(target.source, combined, list(target.indices))


def _flatten(seq: Any) -> Any:
    """Splice the sequences this pass made into their parent, so a ``Bind`` it placed
    before a statement stays in scope for the statements after it."""
    flat: list[Any] = []
    for s in seq.seq:
        flat.extend(s.seq if isinstance(s, tirx.SeqStmt) else [s])
    return tirx.SeqStmt(flat) if len(flat) != len(seq.seq) else seq


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    kernel = str(func.attrs.get("global_symbol", "main")) if func.attrs else "main"
    tma: list[Any] = []
    tvm_ffi.structural_walk(func.body, (tirx.For, lambda f: tma.append(f) if ATOMIC_USE_TMA_ATTR in f.annotations
                                        else None))
    if tma:
        raise LanguageError(
            f"kernel {kernel!r}: T.atomic_add(..., use_tma=True) asks for a TMA bulk reduction, which "
            "GPUs have (sm_90+) and the CPU backend does not; drop use_tma (the plain tile "
            "T.atomic_add computes the same result)")
    if not uses_atomics(func.body):
        return func
    lowering = _Lowering(kernel)
    leaves = (tirx.Evaluate, tirx.BufferStore, tirx.Bind, tirx.IfThenElse)
    body = tvm_ffi.structural_map(func.body, [(leaves, lowering.stmt), (tirx.SeqStmt, _flatten)], order="post")
    if lowering.errors:  # raised after the walk: FFI callbacks lose the exception type
        raise lowering.errors[0]
    return func.with_body(body)


def LowerAtomics() -> Any:
    return prim_func_pass(_run, "tl.cpu.LowerAtomics")


__all__ = ["LowerAtomics", "uses_atomics"]
