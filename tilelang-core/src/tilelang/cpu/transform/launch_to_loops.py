"""LowerKernelLaunchToLoops: T.Kernel on the CPU.

A kernel's blocks are independent, so the block grid becomes one fused parallel loop over
gx*gy*gz blocks (TVM's thread pool runs it; fusing keeps every core busy whatever axis
is long). A block's threads run one after another: TileLang semantics (T.Parallel over a
tile, no user-visible thread ids) need no more, and a kernel that reads its thread index
and syncs its threads runs them in phases between its barriers (barrier_phases.py).
Loops written with T.Parallel then run in parallel only at the outermost level — LLVM's parallel loops do not nest — and the
innermost ones are left to LLVM's vectorizer. A kernel that uses T.atomic_add runs on one
thread (its updates become plain ones: see atomics.py).
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx

from ...backend import pass_config
from ...backend.pass_pipeline import prim_func_pass
from ...errors import LanguageError
from ...language.ops import is_block_barrier, is_named_barrier, uses_var
from .atomics import uses_atomics
from .barrier_phases import linear_thread, run_in_phases
from .thread_allreduce import lower_thread_allreduce

_SERIAL, _PARALLEL = tirx.ForKind.SERIAL, tirx.ForKind.PARALLEL


def _launch_chain(stmt: Any) -> tuple[list[tuple[str, Any, Any]], Any]:
    chain = []
    while isinstance(stmt, tirx.AttrStmt) and stmt.attr_key == "thread_extent":
        chain.append((stmt.node.thread_tag, stmt.node.var, stmt.value))
        stmt = stmt.body
    return chain, stmt


def _serialize_parallel(body: Any) -> Any:
    def on_for(loop: Any) -> Any:
        if loop.kind != _PARALLEL:
            return loop
        return tirx.For(loop.loop_var, loop.min, loop.extent, _SERIAL, loop.body,
                        annotations=loop.annotations, span=loop.span)

    return tvm_ffi.structural_map(body, (tirx.For, on_for), order="post")


#: a T.Parallel nest (or a whole grid of blocks) of fewer iterations runs serially: waking
#: the thread pool costs microseconds, more than a small tile takes on one core
MIN_PARALLEL_EXTENT = 4096


def _nest_points(loop: Any) -> float:
    """Iterations of a perfect nest of T.Parallel loops (inf when an extent is symbolic)."""
    points = 1.0
    while isinstance(loop, tirx.For) and loop.kind == _PARALLEL:
        if not isinstance(loop.extent, tirx.IntImm):
            return float("inf")
        points *= loop.extent.value
        loop = loop.body
    return points


def _static_points(stmt: Any) -> float:
    """Statements a block runs, counting each loop's iterations (inf when an extent is
    symbolic): the work estimate that decides whether its grid is worth the thread pool."""
    if isinstance(stmt, tirx.SeqStmt):
        return sum(_static_points(s) for s in stmt.seq)
    if isinstance(stmt, tirx.For):
        if not isinstance(stmt.extent, tirx.IntImm):
            return float("inf")
        return stmt.extent.value * _static_points(stmt.body)
    if isinstance(stmt, tirx.IfThenElse):
        other = _static_points(stmt.else_case) if stmt.else_case is not None else 0.0
        return max(_static_points(stmt.then_case), other)
    body = getattr(stmt, "body", None)
    return _static_points(body) if isinstance(body, tirx.Stmt) else 1.0


def _keep_outermost_parallel(stmt: Any) -> Any:
    """Serialize every parallel loop nested inside another parallel loop, and small ones."""

    def visit(node: Any) -> Any:
        if isinstance(node, tirx.For) and node.kind == _PARALLEL:
            small = "tilelang.parallel" in node.annotations and _nest_points(node) < MIN_PARALLEL_EXTENT
            return tirx.For(node.loop_var, node.min, node.extent, _SERIAL if small else _PARALLEL,
                            _serialize_parallel(node.body), annotations=node.annotations, span=node.span)
        return None

    def on_stmt(node: Any) -> Any:
        out = visit(node)
        return node if out is None else out

    return tvm_ffi.structural_map(stmt, (tirx.For, on_stmt), order="pre")


#: buffers each thread has its own copy of on the CPU (a fragment is whole in every thread)
_THREAD_PRIVATE = ("local", "local.fragment", "local.var")


def _once_per_block(body: Any, threads: list[tuple[Any, Any]]) -> Any:
    """``body`` (a block that reads its thread index, so each of its threads runs it, in
    phases) with every statement of a T.Parallel nest that updates memory the threads share
    (a store to a shared or global buffer, an atomic) run by the block's first thread only.

    On a GPU a T.Parallel nest spreads its iterations over the block's threads, so each
    iteration's update happens once. Here every thread runs the whole nest (it needs the
    nest's fragment values in its own copy), which repeated each update once per thread: a
    sum by T.atomic_add or a reducer (T.reducer_update) came out multiplied by the thread
    count. The first thread runs before the others in each phase, so what it stores is in
    place for their reads, as it was when every thread stored it; statements that use the
    thread index keep running on every thread."""
    thread_vars = [var for var, _ in threads]
    first = tirx.EQ(linear_thread(threads), tirx.const(0, threads[0][0].ty))

    def shared_update(stmt: Any) -> bool:
        if any(uses_var(stmt, var) for var in thread_vars):
            return False
        if isinstance(stmt, tirx.BufferStore) and stmt.buffer.scope() not in _THREAD_PRIVATE:
            return True
        return isinstance(stmt, (tirx.BufferStore, tirx.Evaluate)) and uses_atomics(stmt)

    def guard(stmt: Any) -> Any:
        return tirx.IfThenElse(first, stmt, None) if shared_update(stmt) else stmt

    def on_for(loop: Any) -> Any:
        if loop.kind != _PARALLEL:
            return None
        return tvm_ffi.structural_map(loop, [(tirx.BufferStore, guard), (tirx.Evaluate, guard)], order="post")

    return tvm_ffi.structural_map(body, (tirx.For, lambda loop: on_for(loop) or loop), order="pre")


def _drop_barriers(body: Any) -> Any:
    def on_eval(stmt: Any) -> Any:
        barrier = is_block_barrier(stmt) or is_named_barrier(stmt.value)
        return tirx.Evaluate(tirx.const(0, "int32")) if barrier else stmt

    return tvm_ffi.structural_map(body, (tirx.Evaluate, on_eval), order="post")


def _lower_launch(stmt: Any, kernel: str, serial: bool) -> Any:
    chain, body = _launch_chain(stmt)
    blocks = [(t, v, e) for t, v, e in chain if t.startswith("blockIdx")]
    threads = [(t, v, e) for t, v, e in chain if t.startswith("threadIdx")]
    if len(blocks) + len(threads) != len(chain):
        raise LanguageError(f"kernel {kernel!r}: unexpected launch attribute in {[c[0] for c in chain]}")
    # threads run in sequence; a kernel that reads its thread index gets serial loops over
    # them, split at its barriers into phases (barrier_phases.py)
    read = [(var, extent) for _, var, extent in threads if uses_var(body, var)]
    if not read:  # the block runs as one sequence: a barrier (T.sync_threads) orders nothing
        body = _drop_barriers(body)
    else:
        body = _once_per_block(body, read)
        body = run_in_phases(kernel, lower_thread_allreduce(kernel, body, read), read)
    total = None
    for _, _, extent in blocks:
        total = extent if total is None else total * extent
    # a grid whose blocks do less work than one T.Parallel nest worth the pool runs serially
    blocks_static = total.value if isinstance(total, tirx.IntImm) else float("inf")
    work = blocks_static * max(_static_points(body), 1.0)
    parallel_blocks = not serial and blocks_static > 1 and work >= MIN_PARALLEL_EXTENT
    if parallel_blocks:
        body = _serialize_parallel(body)
    if not blocks:
        return body
    fused = tirx.Var("block", blocks[0][1].ty)
    stride = None
    binds = []
    for _, var, extent in blocks:
        index = fused if stride is None else tirx.floordiv(fused, stride)
        value = tirx.floormod(index, extent) if len(blocks) > 1 else index
        binds.append(tirx.Bind(var, value))
        stride = extent if stride is None else stride * extent
    body = tirx.SeqStmt([*binds, body])
    return tirx.For(fused, 0, total, _PARALLEL if parallel_blocks else _SERIAL, body)


def _lower_func(func: Any, mod: Any, ctx: Any) -> Any:
    kernel = str(func.attrs.get("global_symbol", "main")) if func.attrs else "main"
    serial = pass_config("tl.disable_parallel", False) or uses_atomics(func.body)

    errors: list[LanguageError] = []

    def on_attr(stmt: Any) -> Any:
        # a T.Kernel with threads but no grid cannot be written; a bare launch_thread of a
        # thread axis is lowered as a launch too
        if stmt.attr_key != "thread_extent" or errors:
            return stmt
        try:
            return _lower_launch(stmt, kernel, serial)
        except LanguageError as err:  # raised below, past the FFI, with its type
            errors.append(err)
            return stmt

    body = tvm_ffi.structural_map(func.body, (tirx.AttrStmt, on_attr), order="pre")
    if errors:
        raise errors[0]
    if serial:
        body = _serialize_parallel(body)
    else:
        body = _keep_outermost_parallel(body)
    return func.with_body(body)


def LowerKernelLaunchToLoops() -> Any:
    return prim_func_pass(_lower_func, "tl.cpu.LowerKernelLaunchToLoops")
