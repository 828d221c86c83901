"""Barriers inside ``while`` loops: the loop is shown to TVM's ThreadSync as a counted loop.

TVM 0.27's ThreadSync (``s_tir.transform.ThreadSync``) counts a while loop's whole body as
being under a condition and refuses any barrier there ("Cannot insert syncs inside
condition"), so a kernel that walks its tiles with ``while`` (upstream's AMD flash
attention: ``while bx < num_q_blocks: ...``) and stages a tile through shared memory does not
compile. Marking the condition thread-invariant (as ``HoistSharedReads`` does for ``if``)
is not enough: ThreadSync then places the barriers within one iteration but none for the
dependence from one iteration to the next (a tile read at the end of one iteration and
rewritten at the start of the next), which is a race.

So, around ThreadSync, a ``while`` whose condition is the same in every thread of the block
(``hoist_shared_reads.Uniformity``: no thread index, no per-thread value) and reads no
shared memory becomes ``for _ in range(n)`` with an opaque trip count, the condition kept
in an annotation (``WhileAsLoop``); ThreadSync treats it as any loop, iteration-carried
dependences included; afterwards the loop is the same ``while`` again with the barriers
ThreadSync put in its body (``LoopAsWhile``). A uniform condition means every thread runs
the same iterations, so a barrier in the body is reached by all. A ``while`` whose
condition may differ between threads stays as it is (a barrier there could deadlock, and
ThreadSync keeps refusing one).
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx

from ...backend.pass_pipeline import prim_func_pass
from .hoist_shared_reads import Uniformity, _reads_shared

#: the annotation holding the while loop's condition while it is shown as a counted loop
WHILE_CONDITION = "tl.while_condition"


def _as_loop(func: Any, mod: Any, ctx: Any) -> Any:
    uniformity = None
    changed = False

    def on_while(stmt: Any) -> Any:
        nonlocal uniformity, changed
        if _reads_shared(stmt.condition):
            return stmt
        if uniformity is None:
            uniformity = Uniformity(func.body)
        if not uniformity.uniform(stmt.condition):
            return stmt
        changed = True
        trips = tirx.Var("while_trips", "int32")  # never defined: only ThreadSync sees the loop
        return tirx.For(tirx.Var("while_turn", "int32"), tirx.IntImm("int32", 0), trips, tirx.ForKind.SERIAL,
                        stmt.body, annotations={WHILE_CONDITION: stmt.condition})

    body = tvm_ffi.structural_map(func.body, [(tirx.While, on_while)], order="post")
    return func.with_body(body) if changed else func


def _as_while(func: Any, mod: Any, ctx: Any) -> Any:
    changed = False

    def on_for(stmt: Any) -> Any:
        nonlocal changed
        condition = stmt.annotations.get(WHILE_CONDITION) if stmt.annotations else None
        if condition is None:
            return stmt
        changed = True
        return tirx.While(condition, stmt.body)

    body = tvm_ffi.structural_map(func.body, [(tirx.For, on_for)], order="post")
    return func.with_body(body) if changed else func


def WhileAsLoop() -> Any:
    return prim_func_pass(_as_loop, "tl.gpu.WhileAsLoop")


def LoopAsWhile() -> Any:
    return prim_func_pass(_as_while, "tl.gpu.LoopAsWhile")
