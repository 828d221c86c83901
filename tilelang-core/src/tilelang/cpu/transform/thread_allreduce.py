"""``T.tvm_thread_allreduce`` on the CPU: the reduction across a block's threads, in phases.

On a GPU, TVM's LowerThreadAllreduce turns the call (inside its ``reduce_scope`` attribute,
which carries the combiner) into warp shuffles and shared memory. Here a block's threads
run in phases between barriers (barrier_phases.py), so the collective becomes what those
phases can run: each thread leaves its value in a slot of a shared tile, a barrier, each
thread combines the slots of the threads it reduces with (in thread order, so all of them
get the same bits) into its output, and a barrier before the tile is written again.
Upstream's gemv example writes its split-K sum this way.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx
from tvm.ir import TensorLoad

from ...errors import LanguageError
from ...language.ops import block_barrier, is_call_to, substitute
from .barrier_phases import linear_thread, thread_count

_REDUCE_SCOPE = "reduce_scope"


def _allreduce(stmt: Any) -> Any:
    """The tvm_thread_allreduce call of a ``reduce_scope`` attribute, or None."""
    body = stmt.body
    if isinstance(body, tirx.Evaluate) and is_call_to(body.value, "tirx.tvm_thread_allreduce"):
        return body.value
    return None


def lower_thread_allreduce(kernel: str, body: Any, threads: list[tuple[Any, Any]]) -> Any:
    """``body`` of a block whose ``threads`` (loop var, extent; outermost first) it reads,
    with each thread allreduce written out over a shared tile with two barriers."""
    count = thread_count(threads)
    errors: list[LanguageError] = []

    def on_attr(stmt: Any) -> Any:
        if stmt.attr_key != _REDUCE_SCOPE or errors:
            return stmt
        try:
            return written_out(stmt)
        except LanguageError as err:  # raised below, past the FFI, with its type
            errors.append(err)
            return stmt

    def written_out(stmt: Any) -> Any:
        call = _allreduce(stmt)
        reducer = stmt.node
        if call is None or not isinstance(reducer, tirx.CommReducer):
            raise LanguageError(f"kernel {kernel!r}: a reduce_scope attribute without T.tvm_thread_allreduce "
                                "in it; the CPU backend lowers only that form")
        size = int(call.args[0].value)
        if size != 1 or len(reducer.lhs) != 1:
            raise LanguageError(f"kernel {kernel!r}: T.tvm_thread_allreduce of {size} values at once; the CPU "
                                "backend reduces one value per call (write one call per value)")
        value, cond, out = call.args[1], call.args[2], call.args[3]
        axes = list(call.args[4:])
        reduced = []
        for axis in axes:
            match = next(((v, e) for v, e in threads if v.same_as(axis)), None)
            if match is None:
                raise LanguageError(f"kernel {kernel!r}: T.tvm_thread_allreduce over {axis}, which is not one "
                                    "of the block's thread indices")
            reduced.append(match)
        if not isinstance(out, TensorLoad):
            raise LanguageError(f"kernel {kernel!r}: T.tvm_thread_allreduce writes to {out}, not a buffer element")
        dtype = str(value.dtype)
        identity = reducer.identity_element[0]

        def combine(x: Any, y: Any) -> Any:
            return substitute(reducer.result[0], [(reducer.lhs[0], x), (reducer.rhs[0], y)])

        slots = tirx.decl_buffer([count], dtype, name="allreduce_slots", scope="shared")
        acc = tirx.decl_buffer([1], dtype, name="allreduce_acc", scope="local")
        others = {var: tirx.Var(f"{var.name}_other", var.dtype) for var, _ in reduced}
        gather: Any = tirx.BufferStore(acc, combine(tirx.BufferLoad(acc, [0]),
                                                    tirx.BufferLoad(slots, [linear_thread(threads, list(others.items()))])), [0])
        for var, extent in reversed(reduced):
            gather = tirx.For(others[var], 0, extent, tirx.ForKind.SERIAL, gather)
        own = value if isinstance(cond, tirx.IntImm) and cond.value else tirx.Select(cond, value, identity)
        return tirx.SeqStmt([
            tirx.AllocBuffer(slots),
            tirx.BufferStore(slots, own, [linear_thread(threads)]),
            block_barrier(),
            tirx.AllocBuffer(acc),
            tirx.BufferStore(acc, identity, [0]),
            gather,
            tirx.BufferStore(out.source, tirx.BufferLoad(acc, [0]), list(out.indices)),
            block_barrier(),  # before the slots are written again
        ])

    body = tvm_ffi.structural_map(body, (tirx.AttrStmt, on_attr), order="post")
    if errors:
        raise errors[0]
    return body
