"""Upstream's explicit warp-specialized language on sm_90: ``T.alloc_barrier``,
``T.mbarrier_*``, ``T.tma_copy``, ``T.ws``, ``T.set_max_nreg``, ``T.get_warp_group_idx``
(tilelang/language/barriers.py defines the ops and their meaning).

Three passes, each at the point of the pipeline where what it needs is known:

* ``LowerExplicitSync`` (first): a kernel that manages its own barriers or warp roles is
  the user's schedule, so its ``T.Pipelined`` loops become plain loops (the automatic
  cp.async/TMA rings and their producer warp would add barriers of their own). Barrier
  ops become ``tl_device.h`` calls (PTX ISA, "mbarrier"); each ``T.tma_copy`` is put under
  the condition that elects its role's first thread. When every ``T.gemm`` sits in a warp
  role of one size, the kernel is marked with that size (``ROLE_THREADS_ATTR``), which the
  tensor-core pass spreads accumulators over instead of the whole block.
* ``LowerTmaCopies`` (tma_copy.py, after the tensor-core pass, which may pad a GEMM
  operand's rows): each ``T.tma_copy`` becomes ``mbarrier.expect_tx`` plus TMA boxes.
* ``NameRoleBarriers`` (after the barrier passes): a block barrier inside a warp role
  would wait for threads that never reach it, so it becomes a named barrier over the
  role's threads (PTX ISA, "bar.sync": id 1 + the role's first warpgroup, 0 stays
  ``__syncthreads``); the role markers go.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tilelang.errors import CompileError
from tilelang.plugin import (
    NAMED_BARRIER_ARRIVE,
    block_barrier,
    complement_range,
    extern_call,
    kernels_of,
    prim_func_pass,
    seq,
    thread_range,
    tl_op_names_in,
    walk_thread_ranges,
)
from tvm import tirx
from tvm.ir import TensorLoad

from ..target import kernel_arch

# the ops of tilelang/language/barriers.py (plugins read core through tilelang.plugin alone)
BARRIER_INIT, TMA_COPY, WARP_ROLE = "tl.barrier_init", "tl.tma_copy", "tl.warp_role"
MBARRIER_WAIT, MBARRIER_ARRIVE = "tl.mbarrier_wait_parity", "tl.mbarrier_arrive"
MBARRIER_ARRIVE_CLUSTER = "tl.mbarrier_arrive_cluster"  # (barrier element, block rank): another block's
MBARRIER_EXPECT_TX, MBARRIER_ARRIVE_EXPECT_TX = "tl.mbarrier_expect_tx", "tl.mbarrier_arrive_expect_tx"
SET_MAX_NREG, WARP_GROUP_IDX = "tl.set_max_nreg", "tl.get_warp_group_idx"
FENCE_PROXY_ASYNC = "tl.fence_proxy_async"
EXPLICIT_OPS = frozenset({BARRIER_INIT, TMA_COPY, WARP_ROLE, MBARRIER_WAIT, MBARRIER_ARRIVE, MBARRIER_EXPECT_TX,
                          MBARRIER_ARRIVE_EXPECT_TX, SET_MAX_NREG, WARP_GROUP_IDX, MBARRIER_ARRIVE_CLUSTER,
                          FENCE_PROXY_ASYNC})
SPELLING = {BARRIER_INIT: "T.alloc_barrier", WARP_ROLE: "T.ws"}  # the rest: tl.<name> is T.<name>
ROLE_ATTR = "tl.warp_role"  # AttrStmt(node=first thread, key, value=end thread) after LowerExplicitSync
ROLE_THREADS_ATTR = "tl.warp_role_threads"  # PrimFunc attr: the threads a T.gemm's accumulator spreads over
WARP_GROUP = 128
BARRIER_SLOTS = 128  # the barrier arrays take a multiple of 1 KiB of static shared memory (see below)
MIN_SM = 90  # mbarrier.try_wait, expect_tx and cp.async.bulk.tensor: sm_90 and newer


def op_name(call: Any) -> str:
    return str(getattr(getattr(call, "op", None), "name", ""))


def kernel_name(func: Any) -> str:
    return str(func.attrs.get("global_symbol", "main")) if func.attrs else "main"


def _thread(func: Any, kernel: str) -> tuple[Any, int]:
    found: list[Any] = []
    tvm_ffi.structural_walk(func.body, (tirx.AttrStmt, lambda a: found.append(a) if a.attr_key == "thread_extent"
                                        and a.node.thread_tag.startswith("threadIdx") else None))
    launched = len(kernels_of(func.body))
    if launched > 1:
        raise CompileError(f"kernel {kernel!r}: barriers, T.tma_copy and T.ws are lowered for a function of one "
                           f"T.Kernel; this one launches {launched}: put the kernel that uses them in a "
                           "@T.prim_func of its own")
    if len(found) != 1 or found[0].node.thread_tag != "threadIdx.x" or not isinstance(found[0].value, tirx.IntImm):
        raise CompileError(f"kernel {kernel!r}: barriers, T.tma_copy and T.ws need a one-dimensional block of a "
                           "constant size (T.Kernel(..., threads=256))")
    return found[0].node.var, int(found[0].value.value)


def _check_arch(func: Any, kernel: str, used: set[str]) -> None:
    arch = kernel_arch(func)
    digits = arch[3:].rstrip("af") if arch.startswith("sm_") else ""
    if not digits.isdigit() or int(digits) < MIN_SM:
        ops = ", ".join(sorted({SPELLING.get(n, "T." + n[3:]) for n in used}))
        raise CompileError(f"kernel {kernel!r} uses {ops}: mbarrier phases, TMA boxes and warpgroup roles need "
                           f"sm_90 (Hopper) or newer, the target is {arch or 'unknown'}; compile for "
                           "{'kind': 'cuda', 'arch': 'sm_90'} or write the kernel with T.Pipelined and T.copy")


class _Barriers:
    """The kernel's barrier arrays (T.alloc_barrier) as consecutive slots of one static array,
    padded to a multiple of 1 KiB: CUDA places dynamic shared memory after the static
    allocations, and TMA boxes need their destination 128-byte aligned (the dynamic
    buffer's alignment holds only if the static part keeps it). One array, not one per
    T.alloc_barrier: FlashMLA's five would take 5 KiB that its tiles need."""

    def __init__(self, body: Any) -> None:
        arrays: list[Any] = []

        def on_eval(stmt: Any) -> None:
            if op_name(stmt.value) == BARRIER_INIT:
                source = stmt.value.args[0].source
                if not any(source.same_as(a) for a in arrays):
                    arrays.append(source)

        tvm_ffi.structural_walk(body, (tirx.Evaluate, on_eval))
        self.bases: list[tuple[Any, int]] = []
        total = 0
        for array in arrays:
            self.bases.append((array, total))
            total += int(array.shape[0].value)
        slots = -(-total // BARRIER_SLOTS) * BARRIER_SLOTS
        self.block = tirx.decl_buffer((slots,), "uint64", name="barriers", scope="shared") if arrays else None

    def address(self, load: Any) -> Any:
        base = next((b for array, b in self.bases if array.same_as(load.source)), None)
        if base is None:
            raise CompileError(f"{load.source.name!r} is used as a barrier but was not made by T.alloc_barrier")
        index = load.indices[0] if len(load.indices) else tirx.const(0, "int32")
        return tirx.address_of(tirx.BufferLoad(self.block, [index + base if base else index]))

    def allocated(self, body: Any) -> Any:
        """``body`` with the barrier arrays' allocations replaced by the one array's, first
        thing in the block."""
        if self.block is None:
            return body

        def on_alloc(node: Any) -> Any:
            return tirx.Evaluate(0) if any(node.buffer.same_as(a) for a, _ in self.bases) else node

        def on_attr(stmt: Any) -> Any:
            if stmt.attr_key == "thread_extent" and stmt.node.thread_tag == "threadIdx.x":
                return tirx.AttrStmt(stmt.node, stmt.attr_key, stmt.value, seq([tirx.AllocBuffer(self.block),
                                                                                 stmt.body]))
            return stmt

        body = tvm_ffi.structural_map(body, (tirx.AllocBuffer, on_alloc), order="post")
        return tvm_ffi.structural_map(body, (tirx.AttrStmt, on_attr), order="pre")


def _lower_ops(body: Any, tid: Any, lo: int, barriers: _Barriers, hi: int | None = None) -> Any:
    """Every explicit op of ``body`` (run by threads ``lo``..``hi`` - 1 of a role, or the
    block) as device calls; T.tma_copy elected and left for LowerTmaCopies. Inside a branch
    that only part of those threads take (``if tid >= 128:``, upstream's producer), the
    branch's first thread is the one elected: thread ``lo`` never runs it."""
    if hi is not None and isinstance(tid, tirx.Var):
        def on_if(stmt: Any) -> Any:
            kept = thread_range(stmt.condition, tid, lo, hi)
            if kept is None or kept == (lo, hi):
                return stmt
            other = stmt.else_case
            if other is not None:
                rest = complement_range(kept, lo, hi) or (lo, hi)
                other = _lower_ops(other, tid, rest[0], barriers, rest[1])
            return tirx.IfThenElse(stmt.condition, _lower_ops(stmt.then_case, tid, kept[0], barriers, kept[1]),
                                   other)

        # each branch lowered with its own first thread; what is left, with ``lo`` (the ops
        # lowered already are device calls or elected copies: not lowered twice)
        body = tvm_ffi.structural_map(body, (tirx.IfThenElse, on_if), order="pre")

    def on_eval(stmt: Any) -> Any:
        call, name = stmt.value, op_name(stmt.value)
        args = list(call.args) if name in EXPLICIT_OPS else []
        if name == BARRIER_INIT:
            region = args[0]
            slots = [tirx.BufferLoad(region.source, [tirx.const(i, "int32")]) for i in range(len(args) - 1)]
            inits = [extern_call("tl_mbarrier_init", barriers.address(s), c) for s, c in zip(slots, args[1:])]
            return seq([tirx.IfThenElse(tid == lo, seq([*inits, extern_call("tl_mbarrier_init_fence")]), None),
                        block_barrier()])
        if name == MBARRIER_WAIT:
            return extern_call("tl_mbarrier_wait", barriers.address(args[0]), args[1])
        if name == MBARRIER_ARRIVE:  # T.cp_async_barrier_noinc: after the thread's cp.async (async_copies.py)
            arrive = "tl_cp_async_mbarrier_arrive" if len(args) > 1 else "tl_mbarrier_arrive"
            return extern_call(arrive, barriers.address(args[0]))
        if name == MBARRIER_ARRIVE_CLUSTER:  # the barrier array sits at one address in every block
            return extern_call("tl_mbarrier_arrive_cluster", barriers.address(args[0]), args[1])
        if name == MBARRIER_EXPECT_TX:
            return extern_call("tl_mbarrier_expect_tx_no_arrive", barriers.address(args[0]), args[1])
        if name == MBARRIER_ARRIVE_EXPECT_TX:
            return extern_call("tl_mbarrier_expect_tx", barriers.address(args[0]), args[1])
        if name == FENCE_PROXY_ASYNC:
            return extern_call("tl_fence_proxy_async")
        if name == SET_MAX_NREG:
            return extern_call("tl_setmaxnreg_inc" if int(args[1].value) else "tl_setmaxnreg_dec", args[0])
        if name == TMA_COPY and isinstance(args[2], TensorLoad):  # elected once, by the innermost role
            elected = tvm.ir.Call(call.op, [*args[:2], barriers.address(args[2])], ret_ty="int32")
            if len(args) < 4:
                return tirx.IfThenElse(tid == lo, tirx.Evaluate(elected), None)
            # leader_scope_threads=n: the first thread of each n of the role's threads
            scope = int(args[3].value)
            if hi is not None and (hi - lo) % scope:
                raise CompileError(f"T.tma_copy(leader_scope_threads={scope}) in a role of {hi - lo} threads "
                                   f"({lo}..{hi - 1}): the scope must divide the role's threads")
            return tirx.IfThenElse(tirx.floormod(tid - lo, scope) == 0, tirx.Evaluate(elected), None)
        return stmt

    def on_call(call: Any) -> Any:
        return tirx.floordiv(tid, WARP_GROUP) if op_name(call) == WARP_GROUP_IDX else call

    return tvm_ffi.structural_map(body, [(tirx.Evaluate, on_eval), (tvm.ir.Call, on_call)], order="post")


def _gemms(body: Any) -> int:
    found: list[Any] = []
    tvm_ffi.structural_walk(body, (tvm.ir.Call, lambda c: found.append(c) if op_name(c) == "tl.gemm" else None))
    return len(found)


def is_zero(expr: Any) -> bool:
    return isinstance(expr, tirx.IntImm) and expr.value == 0


def _is_role(stmt: Any) -> bool:
    return isinstance(stmt, tirx.IfThenElse) and isinstance(stmt.then_case, tirx.AttrStmt) and \
        stmt.then_case.attr_key == ROLE_ATTR


def _touches_shared(stmt: Any) -> bool:
    """Whether ``stmt`` reads or writes a shared buffer (a tile op's region or an element)."""
    found: list[Any] = []

    def visit(node: Any) -> None:
        source = node.buffer if isinstance(node, tirx.BufferStore) else node.source
        if isinstance(source, tirx.Buffer) and source.scope().startswith("shared") and str(source.dtype) != "uint64":
            found.append(node)

    tvm_ffi.structural_walk(stmt, [(tirx.BufferStore, visit), (TensorLoad, visit), (tvm.ir.TensorRegion, visit)])
    return bool(found)


def _fence_block_work(body: Any) -> Any:
    """Next to warp roles, work of the whole block on shared memory is fenced by block
    barriers on both sides: the roles' own barriers become named ones (NameRoleBarriers),
    which order nothing across roles, so a tile the block writes must be complete before
    any role reads it, and no role may still read it when the block writes it again."""

    def on_seq(stmt: Any) -> Any:
        stmts = list(stmt)
        if not any(_is_role(s) for s in stmts):
            return stmt
        out: list[Any] = []
        for s in stmts:
            if not _is_role(s) and not isinstance(s, tirx.AllocBuffer) and _touches_shared(s):
                out += [block_barrier(), s, block_barrier()]
            else:
                out.append(s)
        return tirx.SeqStmt(out)

    return tvm_ffi.structural_map(body, (tirx.SeqStmt, on_seq), order="post")


def _stage_of(region: Any) -> Any:
    """The stage index e of a region ``buf[e, 0:R, 0:C]`` covering one whole 2-d stage of a
    3-d shared buffer, else None."""
    buf = region.source
    shape = [int(d.value) if isinstance(d, tirx.IntImm) else None for d in buf.shape]
    r = list(region.region)
    if len(shape) != 3 or None in shape or not buf.scope().startswith("shared") or \
            not (isinstance(r[0].extent, tirx.IntImm) and r[0].extent.value == 1):
        return None
    if not all(is_zero(x.min) and isinstance(x.extent, tirx.IntImm) and x.extent.value == n
               for x, n in zip(r[1:], shape[1:])):
        return None
    return r[0].min


def _split_stages(body: Any) -> Any:
    """Multi-stage tiles (upstream's ``A_shared[ko % 2, :, :]`` operands) as one 2-d tile per
    stage, each use choosing its tile by the stage index: the tensor-core pass takes whole
    2-d tiles (and lays each out for its GEMM), not slices of a 3-d buffer."""
    allocs: list[Any] = []
    tvm_ffi.structural_walk(body, (tirx.AllocBuffer, lambda a: allocs.append(a.buffer)
                                   if len(a.buffer.shape) == 3 and a.buffer.scope().startswith("shared") else None))
    uses: dict[Any, list[Any]] = {}  # buffer -> the stage of each use (None: not a stage slice)
    plain: list[Any] = []

    def visit(node: Any) -> None:
        if isinstance(node, tvm.ir.TensorRegion):
            uses.setdefault(node.source, []).append(_stage_of(node))
        elif isinstance(node, (tirx.BufferStore, TensorLoad)):
            plain.append(node.buffer if isinstance(node, tirx.BufferStore) else node.source)
        elif str(getattr(node.op, "name", "")) == "tirx.buffer_data":  # its storage by address (a view)
            plain.append(node.args[0])

    tvm_ffi.structural_walk(body, [(tvm.ir.TensorRegion, visit), (tirx.BufferStore, visit), (TensorLoad, visit),
                                   (tvm.ir.Call, visit)])
    split: list[tuple[Any, list[Any]]] = []
    for buf in allocs:
        stages = next((v for k, v in uses.items() if k.same_as(buf)), [])
        if not stages or any(stage is None for stage in stages) or any(p.same_as(buf) for p in plain if isinstance(p, tirx.Buffer)):
            continue
        n, rows, cols = (int(d.value) for d in buf.shape)
        split.append((buf, [tirx.decl_buffer((rows, cols), buf.dtype, name=f"{buf.name}_{i}", scope=buf.scope())
                            for i in range(n)]))
    if not split:
        return body

    def tiles_of(buf: Any) -> list[Any] | None:
        return next((tiles for old, tiles in split if old.same_as(buf)), None)

    def on_eval(stmt: Any) -> Any:
        regions: list[Any] = []
        tvm_ffi.structural_walk(stmt, (tvm.ir.TensorRegion, lambda r: regions.append(r)
                                       if tiles_of(r.source) is not None else None))
        if not regions:
            return stmt
        index = _stage_of(regions[0])
        count = len(tiles_of(regions[0].source))

        def at(i: int) -> Any:
            def on_region(r: Any) -> Any:
                tiles = tiles_of(r.source)
                if tiles is None:
                    return r
                return tirx.BufferRegion(tiles[i], [tvm.ir.Range.from_min_extent(0, d) for d in tiles[i].shape])
            return tvm_ffi.structural_map(stmt, (tvm.ir.TensorRegion, on_region), order="post")

        if any(not tvm_ffi.structural_equal(_stage_of(r), index) or len(tiles_of(r.source)) != count
               for r in regions):
            raise CompileError("a statement uses stages of multi-stage shared tiles at different stage indices "
                               f"({[str(_stage_of(r)) for r in regions]}); index every tile with the same stage")
        chosen = at(count - 1)
        for i in reversed(range(count - 1)):
            chosen = tirx.IfThenElse(index == i, at(i), chosen)
        return chosen

    def on_alloc(node: Any) -> Any:
        tiles = tiles_of(node.buffer)
        return node if tiles is None else seq([tirx.AllocBuffer(t) for t in tiles])

    body = tvm_ffi.structural_map(body, (tirx.Evaluate, on_eval), order="post")
    return tvm_ffi.structural_map(body, (tirx.AllocBuffer, on_alloc), order="post")


def _run_explicit(func: Any) -> Any:
    used = {n for n in tl_op_names_in(func.body) if n in EXPLICIT_OPS}
    if not used:
        return func
    kernel = kernel_name(func)
    _check_arch(func, kernel, used)
    tid, threads = _thread(func, kernel)
    barriers = _Barriers(func.body)
    roles: list[tuple[int, int, int]] = []  # (first thread, end thread, GEMMs inside)

    def on_attr(stmt: Any) -> Any:
        if stmt.attr_key != ROLE_ATTR or op_name(stmt.value) != WARP_ROLE:
            return stmt
        lo, hi = (int(a.value) for a in stmt.value.args)
        if hi > threads:
            raise CompileError(f"kernel {kernel!r}: T.ws names threads {lo}..{hi - 1}, the block has {threads}")
        body = _lower_ops(stmt.body, tid, lo, barriers, hi)
        roles.append((lo, hi, _gemms(body)))
        return tirx.AttrStmt(tirx.IntImm("int32", lo), ROLE_ATTR, tirx.IntImm("int32", hi), body)

    def plain_loop(loop: Any) -> Any:  # the user's schedule: no automatic stage ring
        if not loop.annotations or "num_stages" not in loop.annotations:
            return loop
        return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, loop.body)

    body = _split_stages(tvm_ffi.structural_map(func.body, (tirx.For, plain_loop), order="post"))
    body = tvm_ffi.structural_map(body, (tirx.AttrStmt, on_attr), order="post")
    body = _fence_block_work(_lower_ops(body, tid, 0, barriers, threads))  # what no role holds: the whole block
    in_roles = sum(n for _, _, n in roles)
    sizes = {hi - lo for lo, hi, n in roles if n}
    if roles and in_roles != _gemms(body):
        raise CompileError(f"kernel {kernel!r}: a T.gemm outside every T.ws block of a warp-specialized kernel; "
                           "put each T.gemm inside the T.ws block of the warpgroups that own its accumulator")
    if len(sizes) > 1 or any(lo % (hi - lo) for lo, hi, n in roles if n):
        raise CompileError(f"kernel {kernel!r}: T.gemm runs in warp roles of {sorted(sizes)} threads; every role "
                           "holding a T.gemm must have the same number of warpgroups and start at a multiple of it")

    func = func.with_body(barriers.allocated(body))
    if sizes and sizes != {threads}:
        func = func.with_attr(ROLE_THREADS_ATTR, tirx.IntImm("int32", sizes.pop()))
    return func


def LowerExplicitSync() -> Any:
    return prim_func_pass(lambda func, mod, ctx: _run_explicit(func), "tl.cuda.LowerExplicitSync")


def _run_roles(func: Any) -> Any:
    found: list[Any] = []
    tvm_ffi.structural_walk(func.body, (tirx.AttrStmt, lambda a: found.append(a) if a.attr_key == ROLE_ATTR else None))
    if not found:
        return func
    _, threads = _thread(func, kernel_name(func))

    def on_attr(stmt: Any) -> Any:
        if stmt.attr_key != ROLE_ATTR:
            return stmt
        lo, hi = int(stmt.node.value), int(stmt.value.value)
        if (lo, hi) == (0, threads):
            return stmt.body

        def named(inner: Any) -> Any:
            call = inner.value
            if op_name(call) == "tirx.tvm_storage_sync" and len(call.args) == 1 and \
                    str(call.args[0].value).startswith("shared"):
                return extern_call("tl_named_barrier_sync", 1 + lo // WARP_GROUP, hi - lo)
            return inner

        return tvm_ffi.structural_map(stmt.body, (tirx.Evaluate, named), order="post")

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.AttrStmt, on_attr), order="post"))


def NameRoleBarriers() -> Any:
    return prim_func_pass(lambda func, mod, ctx: _run_roles(func), "tl.cuda.NameRoleBarriers", per_kernel=True)


def _named(call: Any) -> bool:
    """T.sync_threads(barrier_id[, arrive_count]): core's ``tvm_storage_sync("shared", id, count)``."""
    return op_name(call) == "tirx.tvm_storage_sync" and len(call.args) > 1


def _run_named(func: Any) -> Any:
    found: list[Any] = []
    tvm_ffi.structural_walk(func.body, (tvm.ir.Call, lambda c: found.append(c) if _named(c)
                                        or op_name(c) == NAMED_BARRIER_ARRIVE else None))
    if not found:
        return func
    extents: list[Any] = []
    tvm_ffi.structural_walk(func.body, (tirx.AttrStmt, lambda a: extents.append(a.value) if a.attr_key == "thread_extent"
                                        and a.node.thread_tag.startswith("threadIdx") else None))
    block = 1
    for extent in extents:
        block *= int(extent.value) if isinstance(extent, tirx.IntImm) else 0

    def on_eval(stmt: Any) -> Any:
        call = stmt.value
        if op_name(call) == NAMED_BARRIER_ARRIVE:  # T.named_barrier_arrive(id, count)
            return extern_call("tl_named_barrier_arrive", call.args[0], call.args[1])
        if not _named(call):
            return stmt
        count = call.args[2] if len(call.args) > 2 else None
        if count is None and not block:
            raise CompileError(f"kernel {kernel_name(func)!r}: T.sync_threads(barrier_id) without arrive_count "
                               "needs a block of a constant size; pass arrive_count")
        return extern_call("tl_named_barrier_sync", call.args[1], block if count is None else count)

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.Evaluate, on_eval), order="post"))


def LowerNamedBarriers() -> Any:
    """``T.sync_threads(barrier_id, arrive_count)`` (``tvm_storage_sync("shared", id,
    count)``) as PTX ``bar.sync id, count`` (PTX ISA, "bar.sync"); without a count, every
    thread of the block. ``T.named_barrier_arrive(id, count)`` as ``bar.arrive id, count``. It runs after TVM's ThreadSync, which takes the call for a barrier
    (as upstream's does) and so adds no block-wide one inside the threads that meet there.
    Barrier 0 is ``__syncthreads()``'s; this backend's own schedules use 1-3 (warp roles,
    consumers, pingpong turns), so a kernel that names those shares them."""
    return prim_func_pass(lambda func, mod, ctx: _run_named(func), "tl.cuda.LowerNamedBarriers",
                          per_kernel=True)


def role_threads(func: Any) -> int | None:
    """The threads a T.gemm's accumulator spreads over, when T.ws roles hold every GEMM."""
    value = func.attrs.get(ROLE_THREADS_ATTR) if func.attrs else None
    return None if value is None else int(value)


def branch_role_threads(body: Any, tid: Any, threads: int) -> int | None:
    """The threads of the branches that hold the kernel's T.gemm calls, when those are warp
    roles written as ifs (``if tx < 128: ... elif tx < 256: ...``, upstream's warp
    specialization without T.ws): every GEMM inside a branch of the same number of whole
    warps, starting at a multiple of it. Each such branch's C then spreads over its own warps
    (thread ``t`` is warp ``t // 32 % (size // 32)`` of its role), as for T.ws roles. None:
    no GEMM is in part of the block. 0: the GEMMs are not in such roles, and spread over the
    block's warps, C would leave warps that never run them its share: the caller keeps them
    off tensor cores."""
    if not isinstance(tid, tirx.Var):
        return None
    ranges: list[tuple[int, int] | None] = []

    def visit(node: Any, reach: tuple[int, int] | None) -> None:
        if isinstance(node, tirx.Evaluate) and op_name(node.value) == "tl.gemm":
            ranges.append(reach)

    walk_thread_ranges(body, tid, threads, visit)
    if all(r == (0, threads) for r in ranges):
        return None
    sizes = {r[1] - r[0] for r in ranges if r is not None}
    if None in ranges or len(sizes) != 1:
        return 0
    size = sizes.pop()
    if size % 32 or any(r[0] % size for r in ranges):  # whole warps
        return 0
    return size


__all__ = ["TMA_COPY", "LowerExplicitSync", "LowerNamedBarriers", "NameRoleBarriers", "branch_role_threads",
           "role_threads"]
