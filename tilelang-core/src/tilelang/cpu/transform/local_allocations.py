"""PlaceLocalAllocations: a kernel's small local buffers live on the stack, and nothing is
allocated inside a ``while`` body, on the CPU's packed entry.

A name assigned in a kernel (``t = A[i] * 2``) and a ``T.alloc_var`` are one-element
``local`` buffers; on a GPU they are registers. For the CPU's packed entry, TVM's
``LowerTVMBuiltin`` turns every ``local`` allocation into a ``TVMBackendAllocWorkspace``
call at the allocation and a ``TVMBackendFreeWorkspace`` at the end of its scope, and the
scope it knows are a function, a ``for`` body and an ``if`` branch, not a ``while`` body:
a name assigned inside ``while`` got a workspace allocated in each iteration and freed once
after the loop, where the allocation does not dominate the free (LLVM: "Instruction does
not dominate all uses"; the C compiler: the name is out of scope), and every iteration but
the last leaked it.

So, before SplitHostDevice:

- a ``local`` / ``local.var`` / ``local.fragment`` allocation of a constant size under
  ``STACK_LIMIT_BYTES`` becomes a ``global``-scope one, which ``LowerTVMBuiltin`` leaves as
  a stack array on the CPU (as it does below TVM's ``kMaxStackAlloca``, 1024 bytes; the
  direct-call entry puts every buffer on the stack, compute_function.py) — a register's
  cost, as on the GPU, instead of a workspace call per scalar and iteration;
- an allocation still left inside a ``while`` body (a larger tile) moves in front of the
  loop, so it is allocated once and freed after the loop, in the same scope. Its contents
  are not carried between iterations by the program (a kernel writes a buffer it declares
  before reading it), so one allocation for all iterations keeps the meaning.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ...backend.pass_pipeline import prim_func_pass
from ...language.ops import uses_var

#: below TVM's kMaxStackAlloca (1024 bytes), under which LowerTVMBuiltin keeps a constant
#: CPU allocation on the stack
STACK_LIMIT_BYTES = 1024
_LOCAL_SCOPES = ("local", "local.var", "local.fragment")


def _constant_bytes(buffer: Any) -> int | None:
    count = 1
    for dim in buffer.shape:
        if not isinstance(dim, tirx.IntImm):
            return None
        count *= dim.value
    dtype = tvm.DataType(str(buffer.dtype))
    return count * max(dtype.bits * dtype.lanes // 8, 1)


def _small_locals_on_stack(body: Any) -> Any:
    replaced: list[tuple[Any, Any]] = []

    def on_alloc(stmt: Any) -> None:
        buffer = stmt.buffer
        size = _constant_bytes(buffer)
        if buffer.scope() in _LOCAL_SCOPES and size is not None and size < STACK_LIMIT_BYTES:
            fresh = tirx.decl_buffer(buffer.shape, buffer.dtype, buffer.name, scope="global")
            replaced.append((buffer, fresh))

    tvm_ffi.structural_walk(body, (tirx.AllocBuffer, on_alloc))
    if not replaced:
        return body

    def on_var(var: Any) -> Any:
        for old, new in replaced:
            if var.same_as(old):
                return new
        return var

    return tvm_ffi.structural_map(body, (tvm.ir.Var, on_var), order="post")


def _take_allocations(body: Any, loop_defined: list[Any]) -> tuple[Any, list[Any]]:
    """``body`` without the allocations of its own statement sequences that do not depend
    on a name bound inside the loop, and those allocations (nested loops and branches keep
    theirs: LowerTVMBuiltin scopes them)."""
    taken: list[Any] = []

    def hoistable(stmt: Any) -> bool:
        return isinstance(stmt, tirx.AllocBuffer) and not any(
            uses_var(dim, var) for dim in stmt.buffer.shape for var in loop_defined)

    def strip(stmt: Any) -> Any:
        if isinstance(stmt, tirx.SeqStmt):
            kept = []
            for child in stmt.seq:
                if hoistable(child):
                    taken.append(child)
                    continue
                if isinstance(child, tirx.Bind):
                    loop_defined.append(child.var)
                kept.append(strip(child))
            if not kept:
                return tirx.Evaluate(tirx.const(0, "int32"))
            return kept[0] if len(kept) == 1 else tirx.SeqStmt(kept)
        if isinstance(stmt, tirx.AttrStmt):
            return tirx.AttrStmt(stmt.node, stmt.attr_key, stmt.value, strip(stmt.body))
        if hoistable(stmt):
            taken.append(stmt)
            return tirx.Evaluate(tirx.const(0, "int32"))
        return stmt

    return strip(body), taken


def _hoist_out_of_while(body: Any) -> Any:
    def on_while(loop: Any) -> Any:
        inner, taken = _take_allocations(loop.body, [])
        if not taken:
            return loop
        return tirx.SeqStmt([*taken, tirx.While(loop.condition, inner)])

    return tvm_ffi.structural_map(body, (tirx.While, on_while), order="post")


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    body = _hoist_out_of_while(_small_locals_on_stack(func.body))
    return func if body.same_as(func.body) else func.with_body(body)


def PlaceLocalAllocations() -> Any:
    return prim_func_pass(_run, "tl.cpu.PlaceLocalAllocations")
