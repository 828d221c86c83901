"""InstrumentBoundsChecks: the opt-in runtime bounds check (``tl.bounds_check``, or TVM's
``tirx.instrument_bound_checkers``), run before FlattenBuffer while accesses still have one
index per axis.

TVM's own InstrumentBoundCheckers reads ``buffer_bound`` annotations that only its old
StorageFlatten wrote, so under this pipeline it checks nothing; this pass is what the two
keys turn on. Before each statement it asserts that every index of every access the
statement makes is inside its axis, with the access and the kernel's source line in the
message (an IndexError from tvm_ffi, a LaunchError naming it from a compiled launcher).
A load that an ``if_then_else`` (or the right side of ``and`` / ``or``) guards is checked
under that guard, so the zero-filled edges of tiles do not trip it.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx

from .pipeline import pass_config, prim_func_pass

CONFIG_KEYS = ("tl.bounds_check", "tirx.instrument_bound_checkers")


def bounds_check_enabled() -> bool:
    """Whether the active compilation asked for runtime bounds checks."""
    return any(bool(pass_config(key, False)) for key in CONFIG_KEYS)


def _op_name(expr: Any) -> str:
    op = getattr(expr, "op", None)
    return str(getattr(op, "name", "")) if op is not None else ""


def _where(span: Any) -> str:
    if span is None or not getattr(span, "line", 0):
        return ""
    return f" at {span.source_name.name}:{span.line}"


def _guarded_loads(expr: Any) -> list[tuple[Any, list[Any]]]:
    """Every load in ``expr`` with the conditions under which it is evaluated."""
    from tvm.ir import TensorLoad

    loads: list[Any] = []
    tvm_ffi.structural_walk(expr, [(TensorLoad, loads.append)])
    guards: list[list[Any]] = [[] for _ in loads]

    def guard(branch: Any, condition: Any) -> None:
        inner: list[Any] = []
        tvm_ffi.structural_walk(branch, [(TensorLoad, inner.append)])
        for load in inner:
            for k, known in enumerate(loads):
                if known.same_as(load):
                    guards[k].append(condition)

    def on_node(node: Any) -> None:
        if _op_name(node) == "prim.if_then_else" or _op_name(node) == "tirx.if_then_else":
            condition, then_value, else_value = node.args
            guard(then_value, condition)
            guard(else_value, tirx.Not(condition))
        elif isinstance(node, tirx.And):
            guard(node.b, node.a)
        elif isinstance(node, tirx.Or):
            guard(node.b, tirx.Not(node.a))

    from tvm.ir import Call

    tvm_ffi.structural_walk(expr, [((Call, tirx.And, tirx.Or), on_node)])
    return list(zip(loads, guards))


def _in_range(buffer: Any, indices: Any) -> Any:
    condition = None
    for index, extent in zip(indices, buffer.shape):
        if "x" in str(getattr(index.ty, "dtype", "")):  # a vector index: its lanes' ramp
            continue
        extent = tirx.Cast(str(index.ty.dtype), extent) if str(extent.ty.dtype) != str(index.ty.dtype) else extent
        axis = tirx.And(index >= tirx.const(0, str(index.ty.dtype)), index < extent)
        condition = axis if condition is None else tirx.And(condition, axis)
    return condition


def _check(buffer: Any, indices: Any, guards: list[Any], what: str, span: Any) -> Any:
    condition = _in_range(buffer, indices)
    if condition is None:
        return None
    for guard in guards:
        condition = tirx.Or(tirx.Not(guard), condition)
    shape = ", ".join(str(d) for d in buffer.shape)
    text = (f"tl.bounds_check: out-of-bounds {what} {buffer.name}[{', '.join(str(i) for i in indices)}] "
            f"(shape ({shape})){_where(span)}")
    from tvm.ir import StringImm

    # positional, as launch_checks.py: the FFI takes (condition, kind, parts) whatever the
    # Python signature's names say
    return tirx.AssertStmt(condition, StringImm("IndexError"), [StringImm(text)])


def _instrument(stmt: Any) -> Any:
    checks = []
    if isinstance(stmt, tirx.BufferStore):
        exprs = [stmt.value, *stmt.indices]
        store = _check(stmt.buffer, stmt.indices, [], "write to", stmt.span)
        if store is not None:
            checks.append(store)
    elif isinstance(stmt, tirx.Evaluate):
        exprs = [stmt.value]
    else:
        exprs = [stmt.value] if hasattr(stmt, "value") else []
    for expr in exprs:
        for load, guards in _guarded_loads(expr):
            check = _check(load.source, load.indices, guards, "read of", stmt.span)
            if check is not None:
                checks.append(check)
    return tirx.SeqStmt([*checks, stmt]) if checks else stmt


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    if not bounds_check_enabled():
        return func
    # (a Bind's value is not checked: the assert would have to share the Bind's scope)
    body = tvm_ffi.structural_map(func.body, [((tirx.BufferStore, tirx.Evaluate, tirx.LetStmt), _instrument)],
                                  order="post")
    return func.with_body(body)


def InstrumentBoundsChecks() -> Any:
    return prim_func_pass(_run, "tl.InstrumentBoundsChecks")


__all__ = ["CONFIG_KEYS", "InstrumentBoundsChecks", "bounds_check_enabled"]
