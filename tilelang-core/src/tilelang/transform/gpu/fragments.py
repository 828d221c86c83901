"""PlaceFragments: where each tile allocated with T.alloc_fragment lives on the GPU.

A fragment is a tile the block's threads hold together. It can stay in registers when
every access to it is made by a T.Parallel nest over exactly the fragment's shape, at the
nest's own indices (an elementwise update, the accumulator of a GEMM, a tile copy):
PartitionParallelLoops deals the points of all such nests to the threads the same way
(thread t owns points t, t + T, ...), so the element a thread touches in one nest is its
own in every other — the fragment's layout — and it keeps them in a per-thread array.
A fragment that is read across that layout (a row reduction reads whole rows) goes to
shared memory instead, where any mapping is correct and ThreadSync places the barriers.
Tensor-core layouts replace this rule in the performance work.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx
from tvm_ffi.structural import WalkResult

from ...backend.pass_pipeline import prim_func_pass
from ...language.ops import with_compiler_shared
from .hoist_shared_reads import Uniformity
from .ir_util import buffer_accesses

FRAGMENT_SCOPE = "local.fragment"


def _accesses(node: Any, buffer: Any) -> list[list[Any]]:
    return [indices for b, indices, _ in buffer_accesses(node) if b.same_as(buffer)]


def parallel_nest(loop: Any) -> tuple[list[Any], Any]:
    """The perfect nest of parallel loops starting at ``loop``, and its body."""
    nest, inner = [loop], loop.body
    while isinstance(inner, tirx.For) and inner.kind == tirx.ForKind.PARALLEL:
        nest.append(inner)
        inner = inner.body
    return nest, inner


def is_identity(indices: list[Any], loops: list[Any]) -> bool:
    """``indices`` are exactly the nest's loop variables (``0 + i`` counts)."""
    if len(indices) != len(loops):
        return False
    for index, loop in zip(indices, loops):
        if isinstance(index, tirx.Add) and isinstance(index.a, tirx.IntImm) and index.a.value == 0:
            index = index.b
        if not (isinstance(index, tirx.Var) and index.same_as(loop.loop_var)):
            return False
    return True


def _same_extents(loops: list[Any], shape: Any) -> bool:
    return len(loops) == len(shape) and all(
        isinstance(l.extent, tirx.IntImm) and isinstance(d, tirx.IntImm) and l.extent.value == d.value
        for l, d in zip(loops, shape))


def fits_registers(body: Any, buffer: Any) -> bool:
    return bool(_accesses(body, buffer)) and own_nests_but_unit_axes(body, buffer)


def own_nests_but_unit_axes(body: Any, buffer: Any) -> bool:
    """:func:`accessed_by_own_nests`, where a nest may also leave out the fragment's axes of
    extent 1, indexing them at 0 (T.copy's nest into a ``(1, N)`` fragment runs over the N
    columns alone): its points are the fragment's, in the same order, so they are dealt to
    the same threads."""
    return accessed_by_own_nests(body, buffer, unit_axes=True)


def _own(indices: list[Any], loops: list[Any], shape: Any, unit_axes: bool) -> bool:
    if _same_extents(loops, shape) and is_identity(indices, loops):
        return True
    if not unit_axes:
        return False
    wide = [a for a, d in enumerate(shape) if not (isinstance(d, tirx.IntImm) and d.value == 1)]
    if len(wide) == len(shape) or len(indices) != len(shape) or \
            any(not (isinstance(indices[a], tirx.IntImm) and indices[a].value == 0) for a in range(len(shape))
                if a not in wide):
        return False
    return _same_extents(loops, [shape[a] for a in wide]) and is_identity([indices[a] for a in wide], loops)


def accessed_by_own_nests(body: Any, buffer: Any, alone: bool = False, *, unit_axes: bool = False) -> bool:
    """Every element access of ``buffer`` is made by a T.Parallel nest over exactly its
    shape, at the nest's own indices (``alone``: and no such nest touches another
    fragment; ``unit_axes``: see :func:`own_nests_but_unit_axes`). True when there are none
    (only tile ops use it)."""
    nests: list[tuple[list[Any], Any]] = []

    def visit(node: Any) -> Any:
        if isinstance(node, tirx.For) and node.kind == tirx.ForKind.PARALLEL:
            nests.append(parallel_nest(node))
            return WalkResult.SKIP
        return WalkResult.ADVANCE

    tvm_ffi.structural_walk(body, visit, order="pre")
    total = len(_accesses(body, buffer))
    owned = 0
    for loops, inner in nests:
        accesses = buffer_accesses(inner)
        found = [indices for b, indices, _ in accesses if b.same_as(buffer)]
        if not found:
            continue
        if alone and any(b.scope() == FRAGMENT_SCOPE and not b.same_as(buffer) for b, _, _ in accesses):
            return False
        if not all(_own(i, loops, buffer.shape, unit_axes) for i in found):
            return False
        owned += len(found)
    return owned == total


def written_by_every_thread(body: Any, buffer: Any) -> bool:
    """Every store to ``buffer`` is a statement of the block's scalar code (no T.Parallel
    around it) at an index free of the thread, which each thread runs for itself: alike
    (upstream's ``rms = T.alloc_fragment(1)``, ``rms[0] = T.rsqrt(rms[0] / n + eps)``;
    under no condition on the thread) or with a value of its own (a producer's prefetched
    key rows, ``idx[r] = Indices[..., tx // 8]``, under a warp role's condition or not).
    Upstream keeps such a fragment as registers of every thread, each its own copy; in
    shared memory the threads would race on it (one thread's store landing before another's
    load of the same element). A store at the thread's own index, of one value under a
    condition on the thread, or of anything under a condition only one thread passes
    (``if tx == 0:``), is one thread's element for the others to read: shared."""
    uniformity = Uniformity(body)  # thread indices, and what is bound or stored from them

    def per_thread(node: Any) -> bool:
        return not uniformity.uniform(node)

    stores: list[Any] = []
    shared_use: list[Any] = []  # a store that makes the element one thread's, for the others to read

    def one_thread(cond: Any) -> bool:  # `tx == c`: the thread's value is the others' to read
        return isinstance(cond, tirx.EQ) and per_thread(cond.a) != per_thread(cond.b)

    def walk(node: Any, guarded: bool, single: bool) -> None:
        if isinstance(node, tirx.For) and node.kind == tirx.ForKind.PARALLEL:
            tvm_ffi.structural_walk(node, (tirx.BufferStore, lambda st: shared_use.append(st)
                                           if st.buffer.same_as(buffer) else None))
            return
        if isinstance(node, tirx.IfThenElse):
            inner = guarded or per_thread(node.condition)
            walk(node.then_case, inner, single or one_thread(node.condition))
            if node.else_case is not None:
                walk(node.else_case, inner, single)
            return
        if isinstance(node, tirx.BufferStore) and node.buffer.same_as(buffer):
            if single or any(per_thread(i) for i in node.indices):
                shared_use.append(node)  # one thread's element, or a thread's own: shared by intent
            elif per_thread(node.value):
                stores.append(node)  # each thread's own value in one element: its own copy
            else:
                (shared_use if guarded else stores).append(node)  # guarded: one thread's value
            return
        if isinstance(node, tirx.SeqStmt):
            for stmt in node.seq:
                walk(stmt, guarded, single)
        elif isinstance(getattr(node, "body", None), tirx.Stmt):
            walk(node.body, guarded, single)

    walk(body, False, False)
    return bool(stores) and not shared_use


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    moved: list[tuple[Any, Any]] = []

    def collect(node: Any) -> None:
        if isinstance(node, tirx.AllocBuffer) and node.buffer.scope() == FRAGMENT_SCOPE:
            old = node.buffer
            if fits_registers(func.body, old):
                return
            if written_by_every_thread(func.body, old):  # each thread's own copy, as upstream's registers
                moved.append((old, tirx.decl_buffer(old.shape, old.dtype, name=old.name, scope="local")))
            else:
                moved.append((old, tirx.decl_buffer(old.shape, old.dtype, name=old.name, scope="shared.dyn")))

    tvm_ffi.structural_walk(func.body, collect)
    if not moved:
        return func

    def on_buffer(buffer: Any) -> Any:
        for old, new in moved:
            if buffer.same_as(old):
                return new
        return buffer

    func = func.with_body(tvm_ffi.structural_map(func.body, (tirx.Buffer, on_buffer), order="post"))
    return with_compiler_shared(func, [old.name for old, new in moved if new.scope() == "shared.dyn"])


def PlaceFragments() -> Any:
    return prim_func_pass(_run, "tl.gpu.PlaceFragments")
