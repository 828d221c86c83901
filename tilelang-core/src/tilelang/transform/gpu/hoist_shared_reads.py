"""HoistSharedReads: shared-memory reads in an ``if`` condition or a loop's bounds become a
bound scalar just before the statement.

TVM's ThreadSync (``s_tir.transform.ThreadSync``) records shared accesses per statement and
refuses a load it meets outside one (an ``if`` condition, a ``for`` extent): "Check failed:
allow_append_". Kernels do read shared tiles there -- block-sparse attention tests
``if block_mask[k] != 0`` on a mask copied into a (shared-placed) fragment. Binding the
value first turns the read into a statement of its own, which ThreadSync orders after the
writes that produced it (a barrier goes before the binding when needed); the condition is
evaluated once either way, so the program means the same.

``while`` conditions are left alone: they are re-evaluated every iteration, so hoisting
them would change the program.

An ``if`` whose condition is the same in every thread of the block (it reads no thread
index, no per-thread register and no variable derived from either) is marked
``tvm_thread_invariant``: ThreadSync may then place a barrier inside it (a pipelined loop
under ``if block_mask[k]`` needs one per iteration), which is safe because all threads take
the same branch. ThreadSync refuses such barriers under any other condition ("Cannot insert
syncs inside condition"), so marking is needed, and only uniform conditions are marked.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx
from tvm.ir import Call, TensorLoad

from ...backend.pass_pipeline import prim_func_pass

_SHARED_SCOPES = ("shared", "shared.dyn")


def _reads_shared(expr: Any) -> bool:
    found = False

    def visit(load: Any) -> None:
        nonlocal found
        source = load.source
        if isinstance(source, tirx.Buffer) and source.scope() in _SHARED_SCOPES:
            found = True

    tvm_ffi.structural_walk(expr, [(TensorLoad, visit)])
    return found


class Uniformity:
    """Which variables and per-thread buffers may differ between the threads of a block.

    Variant: thread indices; variables bound (``Bind``/``Let``/``for``) from a variant
    expression; local buffers stored with a variant index or value, or stored under a
    variant ``if``/``while``/loop (a local scalar holding ``T.min(...)`` of block indices,
    written by every thread alike, stays uniform). Shared and global memory read the same
    in every thread. Solved by iterating to a fixed point (a few walks of the body).
    IR objects are keyed by their handle: Python wrappers of one node differ."""

    def __init__(self, body: Any, threads: Any = ()) -> None:
        """``threads``: thread variables beside the ``thread_extent`` attributes in ``body``
        (a CPU block's thread loops)."""
        self.vars: dict[int, Any] = {}
        self.buffers: dict[int, Any] = {}
        for var in threads:
            self._add(self.vars, var)
        tvm_ffi.structural_walk(body, [(tirx.AttrStmt, self._on_attr)])
        while True:
            size = len(self.vars) + len(self.buffers)
            tvm_ffi.structural_walk(body, [((tirx.Bind, tirx.Let), self._on_bind), (tirx.For, self._on_for),
                                           ((tirx.IfThenElse, tirx.While), self._on_branch),
                                           (tirx.BufferStore, self._on_store)])
            if len(self.vars) + len(self.buffers) == size:
                return

    def uniform(self, expr: Any) -> bool:
        """Whether ``expr`` has one value in all threads of a block."""
        uniform = True

        def on_var(var: Any) -> None:
            nonlocal uniform
            uniform = uniform and var.__chandle__() not in self.vars

        def on_load(load: Any) -> None:
            nonlocal uniform
            source = load.source
            if not isinstance(source, tirx.Buffer):
                uniform = False
            elif source.scope() not in ("global", *_SHARED_SCOPES) and source.__chandle__() in self.buffers:
                uniform = False

        tvm_ffi.structural_walk(expr, [(tirx.Var, on_var), (TensorLoad, on_load)])
        return uniform

    def _on_attr(self, stmt: Any) -> None:
        if stmt.attr_key == "thread_extent" and stmt.node.thread_tag.startswith("threadIdx"):
            self._add(self.vars, stmt.node.var)

    def _on_bind(self, stmt: Any) -> None:
        if not self.uniform(stmt.value):
            self._add(self.vars, stmt.var)

    def _on_for(self, stmt: Any) -> None:
        if not (self.uniform(stmt.min) and self.uniform(stmt.extent)):
            self._add(self.vars, stmt.loop_var)
            self._taint_stores(stmt.body)

    def _on_branch(self, stmt: Any) -> None:
        if not self.uniform(stmt.condition):
            self._taint_stores(stmt)

    def _on_store(self, stmt: Any) -> None:
        if not (self.uniform(stmt.value) and all(self.uniform(i) for i in stmt.indices)):
            self._add(self.buffers, stmt.buffer)

    def _taint_stores(self, node: Any) -> None:
        tvm_ffi.structural_walk(node, [(tirx.BufferStore, lambda st: self._add(self.buffers, st.buffer))])

    @staticmethod
    def _add(table: dict[int, Any], node: Any) -> None:
        table[node.__chandle__()] = node  # the value keeps the node (and its handle) alive


class _Hoister:
    def __init__(self, uniformity: Uniformity) -> None:
        self.count = 0
        self.uniformity = uniformity

    def bind(self, expr: Any, name: str, binds: list[Any]) -> Any:
        """``expr`` itself, or a fresh variable bound to it (appended to ``binds``)."""
        if not _reads_shared(expr):
            return expr
        var = tirx.Var(f"{name}_{self.count}", expr.ty)
        self.count += 1
        binds.append(tirx.Bind(var, expr))
        return var

    def on_if(self, stmt: Any) -> Any:
        binds: list[Any] = []
        uniform = self.uniformity.uniform(stmt.condition)
        cond = self.bind(stmt.condition, "cond", binds)
        if uniform and not _is_marked_invariant(cond):
            cond = tirx.call_intrin(cond.ty, "tirx.tvm_thread_invariant", cond)
            self.count += 1
        elif not binds:
            return stmt
        branch = tirx.IfThenElse(cond, stmt.then_case, stmt.else_case)
        return tirx.SeqStmt([*binds, branch]) if binds else branch

    def on_for(self, stmt: Any) -> Any:
        binds: list[Any] = []
        lo = self.bind(stmt.min, "lo", binds)
        extent = self.bind(stmt.extent, "extent", binds)
        if not binds:
            return stmt
        loop = tirx.For(stmt.loop_var, lo, extent, stmt.kind, stmt.body, stmt.thread_binding,
                        stmt.annotations)
        return tirx.SeqStmt([*binds, loop])


def _is_marked_invariant(cond: Any) -> bool:
    return isinstance(cond, Call) and getattr(cond.op, "name", "") == "tirx.tvm_thread_invariant"


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    hoister = _Hoister(Uniformity(func.body))
    body = tvm_ffi.structural_map(func.body, [(tirx.IfThenElse, hoister.on_if), (tirx.For, hoister.on_for)],
                                  order="post")
    return func if hoister.count == 0 else func.with_body(body)


def HoistSharedReads() -> Any:
    return prim_func_pass(_run, "tl.gpu.HoistSharedReads")
