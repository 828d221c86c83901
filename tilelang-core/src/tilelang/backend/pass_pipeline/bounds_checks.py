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

In GPU device code an assertion has nowhere to go: there (``trap=``, the dialect's trap
function, given by the GPU pipelines) a failed check prints the access with its index
values, block and thread, then traps, which the launch reports as a failed kernel.
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


def _check(buffer: Any, indices: Any, guards: list[Any], what: str, span: Any, trap: str | None = None) -> Any:
    condition = _in_range(buffer, indices)
    if condition is None:
        return None
    for guard in guards:
        condition = tirx.Or(tirx.Not(guard), condition)
    shape = ", ".join(str(d) for d in buffer.shape)
    from tvm.ir import StringImm

    if trap is not None:
        return _device_check(condition, buffer, indices, what, shape, span, trap)
    text = (f"tl.bounds_check: out-of-bounds {what} {buffer.name}[{', '.join(str(i) for i in indices)}] "
            f"(shape ({shape})){_where(span)}")

    # positional, as launch_checks.py: the FFI takes (condition, kind, parts) whatever the
    # Python signature's names say
    return tirx.AssertStmt(condition, StringImm("IndexError"), [StringImm(text)])


def _device_check(condition: Any, buffer: Any, indices: Any, what: str, shape: str, span: Any, trap: str) -> Any:
    """printf the access (index values, block, thread), then trap."""
    from tvm.ir import StringImm

    scalar = [i for i in indices if "x" not in str(getattr(i.ty, "dtype", ""))]
    if len(scalar) != len(indices):
        return None  # vector indices: the scalar accesses before vectorization were checked
    holes = ", ".join("%lld" for _ in indices)
    text = (f"tl.bounds_check: out-of-bounds {what} {buffer.name}[{holes}] (shape ({shape})){_where(span)}, "
            "block (%d, %d, %d) thread (%d, %d, %d)\\n")  # printed verbatim into C: an escaped newline
    where = [tirx.call_extern("int32", name) for name in (
        "tl_block_x", "tl_block_y", "tl_block_z", "tl_thread_x", "tl_thread_y", "tl_thread_z")]
    report = tirx.Evaluate(tirx.call_extern("int32", "printf", StringImm(text),
                                            *[tirx.Cast("int64", i) for i in indices], *where))
    return tirx.IfThenElse(tirx.Not(condition), tirx.SeqStmt([report, tirx.Evaluate(tirx.call_extern("int32", trap))]),
                           None)


def _instrument(stmt: Any, trap: str | None = None) -> Any:
    checks = []
    if isinstance(stmt, tirx.BufferStore):
        exprs = [stmt.value, *stmt.indices]
        store = _check(stmt.buffer, stmt.indices, [], "write to", stmt.span, trap)
        if store is not None:
            checks.append(store)
    elif isinstance(stmt, tirx.Evaluate):
        exprs = [stmt.value]
    else:
        exprs = [stmt.value] if hasattr(stmt, "value") else []
    for expr in exprs:
        for load, guards in _guarded_loads(expr):
            check = _check(load.source, load.indices, guards, "read of", stmt.span, trap)
            if check is not None:
                checks.append(check)
    return tirx.SeqStmt([*checks, stmt]) if checks else stmt


def _run(func: Any, trap: str | None) -> Any:
    if not bounds_check_enabled():
        return func
    # (a Bind's value is not checked: the assert would have to share the Bind's scope)
    body = tvm_ffi.structural_map(func.body, [((tirx.BufferStore, tirx.Evaluate, tirx.LetStmt),
                                               lambda stmt: _instrument(stmt, trap))], order="post")
    return func.with_body(body)


def InstrumentBoundsChecks(trap: str | None = None) -> Any:
    """``trap``: GPU device code's trap function (checks print and trap instead of asserting)."""
    return prim_func_pass(lambda func, mod, ctx: _run(func, trap), "tl.InstrumentBoundsChecks")


__all__ = ["CONFIG_KEYS", "InstrumentBoundsChecks", "bounds_check_enabled"]
