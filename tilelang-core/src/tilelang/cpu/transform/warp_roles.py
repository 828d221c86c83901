"""LowerWarpRoles: upstream's explicit warp-specialized language on the CPU.

A warp-specialized kernel (``T.ws`` roles, ``T.alloc_barrier``, ``T.mbarrier_*`` /
``T.barrier_*``, ``T.tma_copy``) hands tiles from a producer role to a consumer role
through barrier phases. On the CPU each role runs as one agent, in program order:

* ``with T.ws(k):`` runs its body once per block, as the block's own statements do (tile
  operations in it cover their whole tile, as on a GPU they are spread over the role's
  threads). A role body that reads the thread index is refused: it would need the role's
  threads one by one.
* A barrier is a 64-bit counter: completed phases in the high half, arrivals of the current
  phase in the low half. An arrival inside a role counts as all of the role's threads
  arriving (the role's threads arrive together, as upstream's kernels have them); one outside
  the roles as all of the block's threads.
* ``T.mbarrier_wait_parity(bar, p)`` checks that the phase of parity ``p`` has completed
  and otherwise stops the kernel with a RuntimeError naming the wait's line: running the
  roles one after another in program order cannot satisfy that wait (upstream's GEMM
  pipelines, whose loop body issues the producer's step before the consumer's, always
  can; roles that each loop over the whole K range, each waiting on the other, cannot).
* ``T.tma_copy`` is a ``T.copy`` whose bytes have landed when it returns, so expected
  transaction bytes (``T.mbarrier_expect_tx``) are delivered at once and add nothing to wait
  for. ``T.set_max_nreg`` and ``T.fence_proxy_async`` order nothing here.
* ``T.get_warp_group_idx()`` is the role's first warpgroup inside a role, the thread's
  warpgroup elsewhere.

Kernels that pick roles by thread index themselves (``if tx < 128:``) and use barriers are
refused, naming the line: which of their statements run per thread is only known later.
"""

from __future__ import annotations

import math
from typing import Any

import tvm
import tvm_ffi
from tvm import tirx
from tvm.ir import StringImm

from ...backend.pass_pipeline import prim_func_pass
from ...errors import LanguageError
from ...language import barriers as B
from ...language.bounds import source_location
from ...language.ops import TILE_OPS, uses_var

_MASK = (1 << 32) - 1  # arrivals of the current phase: the counter's low half


def _buffer(value: Any) -> Any:
    """The buffer of a barrier region or element (a TensorRegion / TensorLoad in TVM 0.27)."""
    return value.source if hasattr(value, "source") else value.buffer


def _op_name(node: Any) -> str:
    return str(getattr(getattr(node, "op", None), "name", "")) if isinstance(node, tvm.ir.Call) else ""


def _calls(stmt: Any) -> list[Any]:
    found: list[Any] = []
    tvm_ffi.structural_walk(stmt, (tvm.ir.Call, lambda c: found.append(c) if _op_name(c) in B.EXPLICIT_OPS else None))
    return found


def _thread_vars(body: Any) -> tuple[list[Any], list[int]]:
    """The block's thread variables and their extents (the kernel's launch attributes,
    wherever statements before the kernel put them; of several kernels, the first's)."""
    variables, extents, tags = [], [], set()
    for attr in _launch_attrs(body):
        tag = attr.node.thread_tag
        if tag.startswith("threadIdx") and tag not in tags:
            tags.add(tag)
            variables.append(attr.node.var)
            extents.append(int(attr.value))
    return variables, extents


class _Lowering:
    def __init__(self, func: Any, name: str) -> None:
        self.name = name
        self.threads, self.extents = _thread_vars(func.body)
        # with the scalars bound from them (warp_idx = tid // 32), in binding order
        self.thread_derived = list(self.threads)
        tvm_ffi.structural_walk(func.body, (tirx.Bind, self._note_bind))
        self.block_threads = math.prod(self.extents)
        self.counts: dict[Any, list[int]] = {}  # barrier buffer -> arrive count of each barrier
        tvm_ffi.structural_walk(func.body, (tvm.ir.Call, self._note_init))

    def _note_init(self, call: Any) -> None:
        if _op_name(call) == B.BARRIER_INIT:
            self.counts[_buffer(call.args[0])] = [int(c.value) for c in call.args[1:]]

    def refuse(self, what: str, stmt: Any, why: str) -> LanguageError:
        return LanguageError(f"kernel {self.name!r}, {what}: {why}{source_location(getattr(stmt, 'span', None))}")

    def _note_bind(self, bind: Any) -> None:
        if any(uses_var(bind.value, var) for var in self.thread_derived):
            self.thread_derived.append(bind.var)

    def reads_thread(self, node: Any) -> bool:
        """Whether ``node`` reads the thread index, directly or through a scalar bound from it."""
        return any(uses_var(node, var) for var in self.thread_derived)

    # -- barriers ------------------------------------------------------------------------
    def _count(self, load: Any) -> Any:
        barrier = _buffer(load)
        counts = next((c for buffer, c in self.counts.items() if buffer.same_as(barrier)), None)
        if counts is None:
            raise LanguageError(f"kernel {self.name!r}: barrier {barrier.name!r} is used but not made by "
                                "T.alloc_barrier")
        index = load.indices[0]
        if len(set(counts)) == 1:
            return tirx.const(counts[0], "uint64")
        chosen: Any = tirx.const(counts[-1], "uint64")
        for i in range(len(counts) - 2, -1, -1):
            chosen = tirx.Select(index == i, tirx.const(counts[i], "uint64"), chosen)
        return chosen

    def arrive(self, load: Any, threads: int) -> Any:
        """counter = (phases + arrivals // count) << 32 | arrivals % count, arrivals = the
        current phase's plus ``threads``."""
        value = tirx.BufferLoad(_buffer(load), load.indices)
        count = self._count(load)
        arrivals = tirx.bitwise_and(value, tirx.const(_MASK, "uint64")) + tirx.const(threads, "uint64")
        phases = tirx.shift_right(value, tirx.const(32, "uint64")) + tirx.floordiv(arrivals, count)
        new = tirx.bitwise_or(tirx.shift_left(phases, tirx.const(32, "uint64")), tirx.floormod(arrivals, count))
        return tirx.BufferStore(_buffer(load), new, load.indices)

    def wait(self, stmt: Any, load: Any, parity: Any) -> Any:
        phases = tirx.shift_right(tirx.BufferLoad(_buffer(load), load.indices), tirx.const(32, "uint64"))
        done = tirx.Cast("int32", tirx.bitwise_and(phases, tirx.const(1, "uint64"))) != tirx.Cast("int32", parity)
        span = stmt.span
        where = f" ({span.source_name.name}:{span.line})" if span is not None and span.line else ""
        text = (f"kernel {self.name!r}: T.mbarrier_wait_parity({_buffer(load).name}[{load.indices[0]}], {parity})"
                f"{where} waits for a barrier phase that has not completed. The CPU runs a kernel's warp roles one "
                "after another in program order, and no statement before this wait completes that phase; put each "
                "role's step for an iteration in one loop body, producer first (upstream's warp-specialized GEMM "
                "examples do), or compile for a GPU")
        return tirx.AssertStmt(done, StringImm("RuntimeError"), [StringImm(text)])

    # -- statements ------------------------------------------------------------------------
    def lower(self, stmt: Any, role: tuple[int, int] | None) -> Any:
        """``stmt`` (an Evaluate of an explicit op) as the CPU runs it."""
        call = stmt.value
        op = _op_name(call)
        threads = (role[1] - role[0]) if role is not None else self.block_threads
        if op == B.BARRIER_INIT:
            buffer = _buffer(call.args[0])
            stores = [tirx.BufferStore(buffer, tirx.const(0, "uint64"), [tirx.const(i, "int32")])
                      for i in range(len(call.args) - 1)]
            return stores[0] if len(stores) == 1 else tirx.SeqStmt(stores)
        if op in (B.MBARRIER_ARRIVE, B.MBARRIER_ARRIVE_EXPECT_TX):
            return self.arrive(call.args[0], threads)
        if op == B.MBARRIER_WAIT:
            return self.wait(stmt, call.args[0], call.args[1])
        if op == B.TMA_COPY:
            return tirx.Evaluate(tvm.ir.Call(tvm.ir.Op.get(TILE_OPS["copy"]), [call.args[0], call.args[1]],
                                             ret_ty="int32"))
        if op in (B.MBARRIER_EXPECT_TX, B.SET_MAX_NREG, B.FENCE_PROXY_ASYNC):
            return tirx.Evaluate(tirx.const(0, "int32"))
        raise self.refuse(B.EXPLICIT_OPS[op], stmt, "not lowered on the CPU (arrivals on another block's barrier "
                          "need thread-block clusters, which the CPU does not have); compile for a GPU")

    def role_body(self, branch: Any) -> Any:
        attr = branch.then_case
        lo, hi = (int(a.value) for a in attr.value.args)
        body = attr.body
        if self.reads_thread(body):
            raise self.refuse("T.ws", branch, "on the CPU a warp role runs once for all of its threads (its tile "
                              "operations cover their whole tile), so its body may not read the thread index; "
                              "write the role with tile operations, or compile for a GPU")
        return self.rewrite(body, (lo, hi))

    def rewrite(self, body: Any, role: tuple[int, int] | None) -> Any:
        def on_evaluate(stmt: Any) -> Any:
            if _op_name(stmt.value) in B.EXPLICIT_OPS and _op_name(stmt.value) != B.WARP_ROLE:
                return self.lower(stmt, role)
            return stmt

        def on_if(branch: Any) -> Any:
            if _is_role(branch):
                if role is not None:
                    raise self.refuse("T.ws", branch, "a warp role inside another one; give each its own T.ws block")
                return self.role_body(branch)
            return branch

        def on_call(call: Any) -> Any:
            if _op_name(call) != B.WARP_GROUP_IDX:
                return call
            if role is not None:
                return tirx.const(role[0] // B.WARP_GROUP_THREADS, "int32")
            linear, stride = tirx.const(0, "int32"), 1
            for var, extent in zip(self.threads, self.extents):
                linear, stride = linear + var * stride, stride * extent
            return tirx.floordiv(linear, B.WARP_GROUP_THREADS)

        # roles first (pre-order): their bodies are rewritten with the role's thread count
        return tvm_ffi.structural_map(body, [(tirx.IfThenElse, on_if), (tirx.Evaluate, on_evaluate),
                                             (tvm.ir.Call, on_call)], order="pre")


def _is_role(stmt: Any) -> bool:
    return isinstance(stmt, tirx.IfThenElse) and isinstance(stmt.then_case, tirx.AttrStmt) and \
        stmt.then_case.attr_key == B.WARP_ROLE_ATTR


def _launch_attrs(body: Any) -> list[Any]:
    found: list[Any] = []
    tvm_ffi.structural_walk(body, (tirx.AttrStmt, lambda s: found.append(s) if s.attr_key == "thread_extent" else None))
    return found


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    if not _calls(func.body):
        return func
    name = str(func.attrs["global_symbol"]) if func.attrs is not None and "global_symbol" in func.attrs else "main"
    lowering = _Lowering(func, name)
    _refuse_thread_picked_roles(lowering, func.body)
    return func.with_body(lowering.rewrite(func.body, None))


def _refuse_thread_picked_roles(lowering: _Lowering, body: Any) -> None:
    """Barrier ops outside T.ws in code that reads the thread index (``if tx < 128:``)."""
    stmts: list[Any] = []

    def visit(stmt: Any) -> None:
        if _is_role(stmt):
            return
        if isinstance(stmt, tirx.IfThenElse) and lowering.reads_thread(stmt.condition) and \
                any(_op_name(c) != B.WARP_ROLE for c in _calls(stmt)):
            stmts.append(stmt)

    def visit_op(stmt: Any) -> None:  # mbars[warp_idx], A[row, 0:K] with row from the thread index
        if _op_name(stmt.value) in B.EXPLICIT_OPS and _op_name(stmt.value) != B.WARP_ROLE and \
                lowering.reads_thread(stmt.value):
            per_thread.append(stmt)

    per_thread: list[Any] = []
    tvm_ffi.structural_walk(body, [(tirx.IfThenElse, visit), (tirx.Evaluate, visit_op)])
    if per_thread:
        op = B.EXPLICIT_OPS[_op_name(per_thread[0].value)]
        raise lowering.refuse(op, per_thread[0], "its barrier or tile depends on the thread index (a barrier or "
                              "tile per warp); on the CPU barrier operations run once for all of the block's or "
                              "role's threads; compile for a GPU")
    if stmts:
        first = stmts[0]
        raise lowering.refuse("barriers in code that chooses threads by their index", first,
                              "on the CPU warp roles are T.ws blocks, each run once for all of its threads; a "
                              "branch on the thread index that waits on or arrives at barriers would run per "
                              "thread; write the roles as `with T.ws(k):`, or compile for a GPU")


def LowerWarpRoles() -> Any:
    return prim_func_pass(_run, "tl.cpu.LowerWarpRoles")
