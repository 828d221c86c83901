"""PartitionParallelLoops: T.Parallel nests on a GPU (any vendor: the backend passes its
widest load/store in bytes).

A T.Parallel nest covers a whole tile; the block's threads share it. The nest's iteration
space (extents e_1..e_n, P = prod e_i points) is flattened, cut into vectors of v
consecutive points along the innermost axis, and the vectors are dealt round-robin to the
block's T threads (thread t takes vectors t, t + T, ...), so that consecutive threads
touch consecutive addresses (coalesced) and each thread issues v-wide loads and stores.

v is the widest of max_vector_bytes (the backend's; 16 on NVIDIA and AMD GPUs)/8/4/2/1
bytes-per-access that keeps every global/shared access of
the body aligned (checked with TVM's modular-set analysis on the flattened offsets) and
divides the innermost extent, halved until the vectors divide evenly among the threads
(256 floats over 128 threads go in pairs); the kernel then requires its tensors to be
aligned to that many bytes, which the pass records as the PrimFunc attribute
``tilelang.min_alignment`` so that launchers can check it before launch. Nests over 8-bit
floats stay scalar unless the backend says its target computes with them (``vector_fp8``).

A fragment PlaceFragments leaves in registers is dealt the same way in every nest over it,
in vectors of ``register_lanes`` points (up to the widest access; one where its shape does
not deal evenly so): thread t keeps vectors t, t + T, ... in a per-thread array, so the
nests over it load, store and compute whole vectors (their lanes one after another where
their other accesses are not aligned for it, or they index another per-thread array).
A nest that only converts the thread's own register elements (``B_local[i] = A_local[i]``
of another dtype) is then vectors of them too, which a target converts a pair at a time
(CUDA: transform/conversions.py in tilelang-cuda); fragments dealt point by point get the
same from ``register_vector_width``.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import tvm_ffi
from tvm import tirx
from tvm.ir import TensorLoad  # what T.Buffer[...] loads are in apache-tvm 0.27
from tvm.sym.analyzer import Analyzer
from tvm_ffi.structural import WalkResult

from ...backend.pass_pipeline import prim_func_pass
from ...errors import LanguageError, ManifestError
from .ir_util import substitute
from .vector_widths import (
    VectorRule,
    register_lanes,
    register_vector_width,
    vector_width,
)

_PARALLEL = tirx.ForKind.PARALLEL
_THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
ALIGNMENT_ATTR = "tilelang.min_alignment"


def _serialize(node: Any) -> Any:
    def on_for(loop: Any) -> Any:
        if loop.kind != _PARALLEL:
            return loop
        return tirx.For(loop.loop_var, loop.min, loop.extent, tirx.ForKind.SERIAL, loop.body)

    return tvm_ffi.structural_map(node, (tirx.For, on_for), order="post")


def _guard_side_effects(stmt: Any, guard: Any) -> Any:
    """Wrap every store to memory other threads can see, and every evaluated call (an
    atomic, say), in ``guard``; per-thread (local) stores stay unguarded."""

    def on_store(store: Any) -> Any:
        if store.buffer.scope().startswith("local"):
            return store
        return tirx.IfThenElse(guard, store, None)

    def on_evaluate(node: Any) -> Any:
        return tirx.IfThenElse(guard, node, None)

    return tvm_ffi.structural_map(stmt, [(tirx.BufferStore, on_store), (tirx.Evaluate, on_evaluate)],
                                  order="post")


class Register(NamedTuple):
    """A fragment PlaceFragments left in registers: ``old``, the thread's array ``new``, and
    the ``lanes`` consecutive points it holds of each vector dealt to it (register_lanes)."""

    old: Any
    new: Any
    lanes: int


def _to_registers(body: Any, registers: list[Register], k: Any, lane: Any = None, lanes: int = 1) -> Any:
    """Accesses of register fragments (PlaceFragments checked they are all at the nest's
    own indices) become accesses of the thread's element: the k-th, or with ``lanes`` the
    ``lane``-th of its k-th vector."""
    if not registers:
        return body
    index = k * lanes + lane if lanes > 1 else k

    def owned(buffer: Any) -> Any:
        for old, new, _ in registers:
            if buffer.same_as(old):
                return new
        return None

    def on_store(store: Any) -> Any:
        new = owned(store.buffer)
        return store if new is None else tirx.BufferStore(new, store.value, [index])

    def on_load(load: Any) -> Any:
        new = owned(load.source) if isinstance(load.source, tirx.Buffer) else None
        return load if new is None else tirx.BufferLoad(new, [index])

    return tvm_ffi.structural_map(body, [(tirx.BufferStore, on_store), (TensorLoad, on_load)], order="post")


def _partition(loops: list[Any], body: Any, tid: Any, threads: int, rule: VectorRule,
               registers: list[Register] = ()) -> tuple[Any, int]:
    """When the points do not divide evenly among the threads, the threads past the end
    recompute the last point (clamped indices, always in range) but store nothing: guarding
    only the stores keeps every loop and barrier unconditional, which ThreadSync needs
    (it cannot place a __syncthreads() inside a condition).

    A nest over register fragments dealt in vectors (``Register.lanes`` > 1: fragments of
    one shape have one width) deals its points the same way, whatever else it touches; its
    lanes are one vector access each where its other accesses allow, else one after another."""
    widths = {r.lanes for r in registers if _touches(body, [r.old])}
    if len(widths) > 1:  # fragments of one shape share a width: only a nest over fragments
        # of two homes (a branch's and the block's) could see two
        raise LanguageError(f"a T.Parallel nest touches register fragments dealt in vectors of {sorted(widths)} "
                            "points: stage one of them in shared memory (T.alloc_shared)")
    lanes = widths.pop() if widths else 1
    v, alignment = vector_width(loops, body, rule, lanes if lanes > 1 else None)
    vectorized = v > 1
    if lanes > 1:
        v = lanes
    extents = [loop.extent for loop in loops]
    points: Any = extents[0]
    for e in extents[1:]:
        points = points * e
    dtype = loops[0].loop_var.ty
    analyzer = Analyzer()

    def deal(width: int) -> tuple[Any, bool]:
        vectors = analyzer.simplify(tirx.floordiv(points, width)) if width > 1 else points
        if isinstance(vectors, tirx.IntImm):
            return vectors, int(vectors.value) % threads == 0
        return vectors, bool(analyzer.can_prove(tirx.floormod(vectors, threads) == 0))

    vectors, exact = deal(v)
    while v > 1 and not exact and lanes == 1:
        # guarded vector stores get scalarized into loops inside the guard, where
        # ThreadSync cannot place barriers: an uneven deal takes narrower vectors (every
        # divisor of an aligned width is aligned too: 256 floats over 128 threads go in
        # pairs), down to scalars
        v //= 2
        alignment = alignment // 2 if v > 1 else 0  # (the widest access's bytes: v times its element's)
        vectors, exact = deal(v)
    k = tirx.Var("k", dtype)
    lane = tirx.Var("vec", dtype)
    vector_index = k * threads + tid
    if not exact:
        vector_index = tirx.min(vector_index, vectors - 1)
    # a vector's lanes run along the innermost loop. Where its extent is a constant multiple
    # of v but not a power of two (a row of 192), the innermost index is the vector's place
    # in the row times v plus the lane: affine in the lane, which TVM's simplifier does not
    # see in (i * v + lane) % 192, and whose per-lane offsets through a swizzled layout CUDA
    # cannot print (an int32x8 XOR)
    inner = extents[-1]
    by_vector = v > 1 and isinstance(inner, tirx.IntImm) and int(inner.value) % v == 0 and \
        int(inner.value) & (int(inner.value) - 1) != 0
    flat = vector_index * v + lane if v > 1 and not by_vector else vector_index
    pairs, stride = [], None
    for loop, extent in reversed(list(zip(loops, extents))):
        if by_vector and stride is None:
            extent = tirx.IntImm(str(inner.ty.dtype), int(inner.value) // v)
        index = flat if stride is None else tirx.floordiv(flat, stride)
        value = index if loop is loops[0] else tirx.floormod(index, extent)
        if by_vector and stride is None:
            value = value * v + lane
        pairs.append((loop.loop_var, value))
        stride = extent if stride is None else stride * extent
    in_registers = _to_registers(body, list(registers), k, lane, lanes)
    # register arrays are only registers when every index is a constant: unroll
    loop_kind = tirx.ForKind.SERIAL if in_registers.same_as(body) else tirx.ForKind.UNROLLED
    stmt = substitute(_serialize(in_registers), pairs)
    if not exact:
        stmt = _guard_side_effects(stmt, k * threads + tid < vectors)
    if v > 1:
        stmt = tirx.For(lane, 0, v, tirx.ForKind.VECTORIZED if vectorized else tirx.ForKind.UNROLLED, stmt)
    iterations = analyzer.simplify(tirx.floordiv(vectors + (threads - 1), threads))
    if isinstance(iterations, tirx.IntImm) and iterations.value == 1:
        return substitute(stmt, [(k, tirx.IntImm(str(dtype), 0))]), alignment
    width = register_vector_width(stmt, k, [r.new for r in registers], iterations, rule) \
        if exact and lanes == 1 else 1
    if width > 1:  # k = outer * width + lane, the lanes one vector of each register array
        outer, lane = tirx.Var("k_outer", dtype), tirx.Var("k_lane", dtype)
        inner = tirx.For(lane, 0, width, tirx.ForKind.VECTORIZED, substitute(stmt, [(k, outer * width + lane)]))
        return tirx.For(outer, 0, iterations.value // width, tirx.ForKind.UNROLLED, inner), alignment
    return tirx.For(k, 0, iterations, loop_kind, stmt), alignment


def _register_fragments(body: Any, threads: int, homes: dict[int, tuple[int, int]],
                        rule: VectorRule) -> list[Register]:
    """Fragments PlaceFragments left in registers, each with its per-thread array: thread t
    holds vectors t, t + T, ... of the tile's points (``lanes`` consecutive points each,
    one for fragments whose shape does not deal evenly so), so ceil(points / T) elements;
    T is the block's threads, or those of the branch the fragment is allocated in
    (``homes``). Every nest over a fragment runs over its shape, its axes of extent 1 left
    out or not (PlaceFragments), so fragments of one such shape and home share a width."""
    found: list[tuple[Any, list[int], tuple[int, int]]] = []

    def visit(node: Any) -> None:
        if isinstance(node, tirx.AllocBuffer) and node.buffer.scope() == "local.fragment":
            old = node.buffer
            found.append((old, [int(d.value) for d in old.shape], homes.get(old.__chandle__(), (0, threads))))

    tvm_ffi.structural_walk(body, visit)
    keys = [(tuple(d for d in shape if d != 1), home) for _, shape, home in found]
    groups: dict[tuple[Any, ...], list[Any]] = {}
    for (old, _, _), key in zip(found, keys):
        groups.setdefault(key, []).append(old.dtype)
    registers = []
    for (old, shape, (lo, hi)), key in zip(found, keys):
        lanes = register_lanes(list(key[0]), groups[key], hi - lo, rule)
        points = math.prod(shape)
        per_thread = (points + (hi - lo) - 1) // (hi - lo)
        registers.append(Register(old, tirx.decl_buffer((per_thread,), old.dtype, name=old.name, scope="local"),
                                  lanes))
    return registers


def _complement(kept: tuple[int, int], lo: int, hi: int) -> tuple[int, int] | None:
    """The threads of [lo, hi) outside ``kept`` (an ``else``'s), when they are one range."""
    if kept[0] == lo:
        return (kept[1], hi) if kept[1] < hi else None
    if kept[1] == hi:
        return lo, kept[0]
    return None


def walk_thread_ranges(body: Any, tid: Any, threads: int, visit: Any) -> None:
    """Calls ``visit(node, threads)`` for every node of ``body``, in order, with the threads
    ``(lo, hi)`` of the block that reach it: a thread-range if's branch narrows them
    (``if tx < 128:`` to [0, 128), its else to [128, threads), an ``elif tx < 256`` in that
    else to [128, 256)), and an else whose threads are not one range passes None."""
    def walk(stmt: Any, reach: tuple[int, int] | None) -> None:
        def on_node(node: Any) -> Any:
            visit(node, reach)
            if not isinstance(node, tirx.IfThenElse) or reach is None or not isinstance(tid, tirx.Var):
                return WalkResult.ADVANCE
            kept = _thread_range(node.condition, tid, *reach)
            if kept is None or kept == reach:
                return WalkResult.ADVANCE
            walk(node.then_case, kept)
            if node.else_case is not None:
                walk(node.else_case, _complement(kept, *reach))
            return WalkResult.SKIP

        tvm_ffi.structural_walk(stmt, on_node, order="pre")

    walk(body, (0, threads))


def _fragment_homes(body: Any, tid: Any, threads: int) -> dict[int, tuple[int, int]]:
    """Fragment -> the threads [lo, hi) that alone hold it, for fragments of a branch that
    only part of the block takes (``if tx < 128: ... else: ...``): one allocated inside
    such a branch, or one allocated for the whole block that only that branch touches
    (upstream's warp-specialized kernels allocate the consumers' accumulators at the top)."""
    homes: dict[int, tuple[int, int]] = {}
    if not isinstance(tid, tirx.Var):
        return homes
    # a block-level fragment -> the thread ranges that use it (a store, a load, or the buffer
    # itself, a Var in TVM 0.27, as tvm_access_ptr and regions name it); allocations come
    # before their uses
    touched: dict[int, set[tuple[int, int]]] = {}

    def record(node: Any, lo: int, hi: int) -> None:
        """The block-level fragments ``node`` (all of it) uses, at the threads [lo, hi)."""
        def on_var(var: Any) -> None:
            if var.__chandle__() in touched:
                touched[var.__chandle__()].add((lo, hi))

        def on_access(access: Any) -> None:  # the walk does not enter an access's buffer
            buffer = access.buffer if isinstance(access, tirx.BufferStore) else access.source
            if isinstance(buffer, tirx.Buffer):
                on_var(buffer)

        tvm_ffi.structural_walk(node, [(tirx.BufferStore, on_access), (TensorLoad, on_access), (tirx.Var, on_var)])

    def walk(node: Any, lo: int, hi: int) -> None:
        if isinstance(node, tirx.SeqStmt):
            for stmt in node.seq:
                walk(stmt, lo, hi)
        elif isinstance(node, tirx.IfThenElse):
            record(node.condition, lo, hi)
            kept = _thread_range(node.condition, tid, lo, hi)
            if kept is None or kept == (lo, hi):
                walk(node.then_case, lo, hi)
                if node.else_case is not None:
                    walk(node.else_case, lo, hi)
                return
            walk(node.then_case, *kept)
            if node.else_case is not None:
                walk(node.else_case, *(_complement(kept, lo, hi) or (lo, hi)))
        elif isinstance(node, tirx.AllocBuffer):
            if node.buffer.scope() == "local.fragment":
                if (lo, hi) != (0, threads):
                    homes[node.buffer.__chandle__()] = (lo, hi)
                else:
                    touched[node.buffer.__chandle__()] = set()
        elif isinstance(node, (tirx.For, tirx.AttrStmt)) or \
                (isinstance(node, (tirx.LetStmt, tirx.DeclBuffer)) and isinstance(getattr(node, "body", None), tirx.Stmt)):
            # the node's own expressions here, its body by the same rules (a flat binding,
            # TVM 0.27's Bind, has no body: it is recorded whole below)
            for field in ("min", "extent", "value"):
                if isinstance(getattr(node, field, None), tirx.PrimExpr):
                    record(getattr(node, field), lo, hi)
            walk(node.body, lo, hi)
        else:  # any other statement, whole, at the threads that run it
            record(node, lo, hi)

    walk(body, 0, threads)
    for handle, ranges in touched.items():
        if len(ranges) == 1 and next(iter(ranges)) != (0, threads):
            homes[handle] = next(iter(ranges))
    return homes


def _thread_range(cond: Any, tid: Any, lo: int, hi: int) -> tuple[int, int] | None:
    """[lo', hi') when ``cond`` keeps only the threads of tid in that range (``tx < 128``,
    ``tx >= 64``, ``64 <= tx and tx < 192``; tid a single thread variable), else None."""
    if isinstance(cond, tirx.And):
        first = _thread_range(cond.a, tid, lo, hi)
        return None if first is None else _thread_range(cond.b, tid, *first)
    forms = {tirx.LT: lambda c: (lo, min(hi, c)), tirx.LE: lambda c: (lo, min(hi, c + 1)),
             tirx.GE: lambda c: (max(lo, c), hi), tirx.GT: lambda c: (max(lo, c + 1), hi)}
    flipped = {tirx.LT: tirx.GT, tirx.LE: tirx.GE, tirx.GE: tirx.LE, tirx.GT: tirx.LT}
    for node_type, bound in forms.items():
        if not isinstance(cond, node_type):
            continue
        if cond.a.same_as(tid) and isinstance(cond.b, tirx.IntImm):
            new_lo, new_hi = bound(int(cond.b.value))
        elif cond.b.same_as(tid) and isinstance(cond.a, tirx.IntImm):
            new_lo, new_hi = forms[flipped[node_type]](int(cond.a.value))
        else:
            return None
        return (new_lo, new_hi) if new_lo < new_hi else None
    return None


def _partition_within(body: Any, tid: Any, lo: int, hi: int, threads: int, kernel: str,
                      alignment: list[int], rule: VectorRule, registers: list[Register],
                      homes: dict[int, tuple[int, int]]) -> Any:
    """Partition the T.Parallel nests of ``body``, which threads lo..hi-1 of the block run.

    Upstream lets a kernel give part of a tile to part of the block (``if tx < 128:`` over
    a T.Parallel or a T.copy with 256 threads): the nest is then dealt to the threads that
    run it. Register fragments are dealt to the whole block (their per-thread arrays are
    sized so), so a nest that touches one inside such a condition is refused unless the
    threads that run it hold every point it touches."""
    active = hi - lo

    def on_if(stmt: Any) -> Any:
        # only a one-dimensional block's thread variable is recognised in a condition
        bounds = _thread_range(stmt.condition, tid, lo, hi) if isinstance(tid, tirx.Var) else None
        if bounds is None or bounds == (lo, hi):
            return stmt
        then = _partition_within(stmt.then_case, tid, *bounds, threads, kernel, alignment, rule, registers,
                                 homes)
        other = stmt.else_case
        if other is not None:  # the threads the condition leaves out
            rest = _complement(bounds, lo, hi)
            if rest is None and _has_parallel(other):
                raise LanguageError(
                    f"kernel {kernel!r}: the else branch of `if {stmt.condition}` runs on threads {lo}..{bounds[0] - 1} "
                    f"and {bounds[1]}..{hi - 1}, two ranges, which a T.Parallel in it cannot be dealt to; write the "
                    "condition so that each branch keeps one range of threads")
            other = _partition_within(other, tid, *(rest or (lo, hi)), threads, kernel, alignment, rule,
                                      registers, homes)
        return tirx.IfThenElse(stmt.condition, then, other)

    def on_for(loop: Any) -> Any:
        if loop.kind != _PARALLEL:
            return loop
        nest, inner = [loop], loop.body
        while isinstance(inner, tirx.For) and inner.kind == _PARALLEL:
            nest.append(inner)
            inner = inner.body
        touched = [r.old for r in registers if _touches(inner, [r.old])]
        local = bool(touched) and all(homes.get(old.__chandle__()) == (lo, hi) for old in touched)
        if active == threads:
            new, align = _partition(nest, inner, tid, threads, rule, registers)
        elif local:  # fragments of this branch: dealt over its threads, as they are sized
            new, align = _partition(nest, inner, tid - lo if lo else tid, active, rule, registers)
        elif touched:
            _check_register_nest(nest, threads, lo, hi, kernel)
            new, align = _partition(nest, inner, tid, threads, rule, registers)
        else:
            new, align = _partition(nest, inner, tid - lo if lo else tid, active, rule, registers)
        alignment.append(align)
        return new

    return tvm_ffi.structural_map(body, [(tirx.IfThenElse, on_if), (tirx.For, on_for)], order="pre")


def _has_parallel(body: Any) -> bool:
    found: list[Any] = []
    tvm_ffi.structural_walk(body, (tirx.For, lambda f: found.append(f) if f.kind == _PARALLEL else None))
    return bool(found)


def _touches(body: Any, buffers: list[Any]) -> bool:
    """Whether ``body`` stores to or loads from one of ``buffers``."""
    found = []

    def visit(node: Any) -> None:
        buffer = node.buffer if isinstance(node, tirx.BufferStore) else node.source
        if any(buffer.same_as(b) for b in buffers):
            found.append(node)

    tvm_ffi.structural_walk(body, [(tirx.BufferStore, visit), (TensorLoad, visit)])
    return bool(found)


def _check_register_nest(nest: list[Any], threads: int, lo: int, hi: int, kernel: str) -> None:
    points = 1
    for loop in nest:
        if not isinstance(loop.extent, tirx.IntImm):
            return
        points *= int(loop.extent.value)
    if lo == 0 and points <= hi:  # dealt one point per thread at most: threads < hi hold them all
        return
    raise LanguageError(
        f"kernel {kernel!r}: a T.Parallel over a register fragment inside a condition that keeps "
        f"threads {lo}..{hi - 1} of {threads}: the fragment's {points} points are spread over all "
        f"{threads} threads, so threads outside the condition would skip theirs; move the loop out "
        "of the condition, or stage the tile in shared memory (T.alloc_shared)")


def _rewrite_threads(stmt: Any, kernel: str, alignment: list[int], rule: VectorRule) -> Any:
    """stmt is the outermost threadIdx launch attribute of a kernel."""
    chain, body = [], stmt
    while isinstance(body, tirx.AttrStmt) and body.attr_key == "thread_extent" and \
            body.node.thread_tag in _THREAD_TAGS:
        chain.append(body)
        body = body.body
    tid: Any = None
    threads = 1
    for attr in chain:
        if not isinstance(attr.value, tirx.IntImm):
            raise LanguageError(f"kernel {kernel!r}: T.Kernel(threads=...) must be constants on a GPU")
        var = attr.node.var
        tid = var if tid is None else tid + var * threads
        threads *= int(attr.value.value)

    homes = _fragment_homes(body, tid, threads)
    registers = _register_fragments(body, threads, homes, rule)
    body = _partition_within(body, tid, 0, threads, threads, kernel, alignment, rule, registers, homes)
    if registers:
        def on_alloc(node: Any) -> Any:
            for old, new, _ in registers:
                if node.buffer.same_as(old):
                    return tirx.AllocBuffer(new)
            return node

        body = tvm_ffi.structural_map(body, (tirx.AllocBuffer, on_alloc), order="post")
    for attr in reversed(chain):
        body = tirx.AttrStmt(attr.node, attr.attr_key, attr.value, body)
    return body


def _run(func: Any, mod: Any, ctx: Any, rule: VectorRule) -> Any:
    kernel = str(func.attrs.get("global_symbol", "main")) if func.attrs else "main"
    alignment: list[int] = []

    def on_attr(stmt: Any) -> Any:
        if stmt.attr_key == "thread_extent" and stmt.node.thread_tag in _THREAD_TAGS:
            return _rewrite_threads(stmt, kernel, alignment, rule)
        return stmt

    body = tvm_ffi.structural_map(func.body, (tirx.AttrStmt, on_attr), order="pre")
    leftover = []
    tvm_ffi.structural_walk(body, (tirx.For, lambda f: leftover.append(f) if f.kind == _PARALLEL else None))
    if leftover:
        raise LanguageError(
            f"kernel {kernel!r}: T.Parallel outside a T.Kernel frame cannot run on a GPU; put the "
            "loop inside `with T.Kernel(...)`"
        )
    func = func.with_body(body)
    if alignment and max(alignment) > 0:
        current = func.attrs.get(ALIGNMENT_ATTR) if func.attrs else None  # set by earlier passes
        func = func.with_attr(ALIGNMENT_ATTR, max(max(alignment), int(current or 0)))
    return func


def PartitionParallelLoops(max_vector_bytes: int = 16, vector_fp8: bool = False) -> Any:
    """``max_vector_bytes``: the widest global/shared access the target has (16 on CUDA,
    ld.global.v4.b32; 16 on AMD GPUs too, global_load_dwordx4). ``vector_fp8``: the target
    has 8-bit float types of its own (CUDA from sm_89), so nests over them may be vectors."""
    if max_vector_bytes not in (1, 2, 4, 8, 16, 32):
        raise ManifestError(f"PartitionParallelLoops(max_vector_bytes={max_vector_bytes}) in a backend's "
                            "pipeline: use the target's widest access in bytes, a power of two up to 32")
    rule = VectorRule(max_vector_bytes, vector_fp8)
    return prim_func_pass(lambda func, mod, ctx: _run(func, mod, ctx, rule), "tl.gpu.PartitionParallelLoops")
