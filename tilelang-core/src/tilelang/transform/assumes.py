"""LowerAssumes: ``T.assume(cond)`` is a promise to the compiler, checked where it can be.

Device code generators do not know TVM's ``tirx.assume`` (CUDA's failed with "Unresolved
call"), so every assume is removed from the function body once the middle end ran. An
assume whose condition depends only on the function's parameters and the symbolic
dimensions of its tensors, and which no branch or loop condition guards, is also checked
where the call starts: an assert at the top of the function, which the host code of the
packed entry point evaluates before any launch (tvm_ffi raises a RuntimeError saying
``Assume: <condition>``), as upstream TileLang does. Execution backends that launch from
their own metadata (nvrtc, cython) do not run that host code: for them, as for an assume
over loop or thread indices everywhere, a false assumption is the caller's error and the
result is undefined (docs/architecture-notes.md, note 63).
"""

from __future__ import annotations

from typing import Any

from ..backend.pass_pipeline import prim_func_pass

_COMPARE = {"LT": "<", "LE": "<=", "GT": ">", "GE": ">=", "EQ": "==", "NE": "!=", "And": "and", "Or": "or"}


def _is_assume(node: Any) -> bool:
    from tvm import tirx

    value = getattr(node, "value", None)
    return isinstance(node, tirx.Evaluate) and isinstance(value, tirx.Call) and getattr(value.op, "name", "") == "tirx.assume"


def describe(cond: Any) -> str:
    """The condition as the user wrote it (TVM prints comparisons as ``EqualOp(a, b)``)."""
    from tvm import tirx

    symbol = _COMPARE.get(type(cond).__name__)
    if symbol is not None:
        return f"{describe(cond.a)} {symbol} {describe(cond.b)}"
    if isinstance(cond, tirx.Not):
        return f"not ({describe(cond.a)})"
    return str(cond)


def _host_vars(func: Any) -> set[Any]:
    from tvm import tirx

    names: set[Any] = set(func.params)
    for param in func.params:
        if isinstance(param.ty, tirx.BufferType):
            names.update(d for d in [*param.ty.shape, *param.ty.strides] if isinstance(d, tirx.Var))
    return names


def _guarded_assumes(body: Any) -> list[Any]:
    """Assumes under a branch, a while loop or a loop of data-dependent extent: their
    condition need not hold for every call, so they are not hoisted."""
    import tvm_ffi
    from tvm import tirx

    guarded: list[Any] = []

    def under(node: Any) -> None:
        for part in (getattr(node, "then_case", None), getattr(node, "else_case", None), getattr(node, "body", None)):
            if part is not None:
                tvm_ffi.structural_walk(part, (tirx.Evaluate, lambda e: guarded.append(e) if _is_assume(e) else None))

    tvm_ffi.structural_walk(body, (tirx.IfThenElse, under))
    tvm_ffi.structural_walk(body, (tirx.While, under))
    return guarded


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    import tvm_ffi
    from tvm import tirx
    from tvm.ir import StringImm

    found: list[Any] = []
    tvm_ffi.structural_walk(func.body, (tirx.Evaluate, lambda e: found.append(e) if _is_assume(e) else None))
    if not found:
        return func
    host = _host_vars(func)
    guarded = _guarded_assumes(func.body)
    checks, seen = [], set()
    for node in found:
        cond = node.value.args[0]
        if any(node.same_as(g) for g in guarded):
            continue
        free = tirx.analysis.undefined_vars(cond, [])
        if not free or not all(v in host for v in free) or str(cond) in seen:
            continue
        seen.add(str(cond))
        # TVM 0.27's Python AssertStmt hands (kind, condition) on as (condition, kind)
        checks.append(tirx.AssertStmt(cond, StringImm("RuntimeError"), [StringImm(f"Assume: {describe(cond)}")]))
    body = tvm_ffi.structural_map(
        func.body, (tirx.Evaluate, lambda e: tirx.Evaluate(tirx.const(0, "int32")) if _is_assume(e) else e), order="post")
    if checks:
        body = tirx.SeqStmt([*checks, body])
    return func.with_body(body)


def LowerAssumes() -> Any:
    return prim_func_pass(_run, "tl.LowerAssumes")
