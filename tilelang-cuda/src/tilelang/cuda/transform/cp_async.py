"""T.Pipelined as cp.async stage rings (sm_80+), for the tensor-core pass.

A ``T.Pipelined(n, num_stages=s)`` loop (s >= 2) whose body copies global tiles into
shared tiles that tensor-core GEMMs read (at its start, or later where the copy may move
there): each such tile gets s stages; the copies become 16-byte cp.async (zero-filling
out-of-range vectors), issued s - 1 iterations ahead (one fewer when wgmma groups stay in
flight), one commit group per iteration; each iteration waits for its group, then one
barrier both publishes the data and frees the stage the next copies overwrite (wgmma
readers: after a proxy fence).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tvm
import tvm_ffi
from tilelang.errors import CompileError
from tilelang.plugin import (
    block_barrier,
    dtype_bytes,
    extern_call,
    is_full_region,
    pass_config,
    seq,
    stamp_span,
    static_ints,
    substitute,
    tile_op_name,
    unrolled,
)
from tvm import tirx
from tvm.ir import TensorLoad
from tvm_ffi.structural import WalkResult

from .in_place_swizzle import swizzled_column
from .mma_layout import CHUNK_BYTES, CoreMatrixLayout, SwizzledLayout
from .overlap_policy import overlap_on, record_ring
from .tma import (
    DISABLE_TMA_CONFIG,
    DISABLE_WS_CONFIG,
    PROLOGUE_ATTR,
    TensorMapLoad,
    TmaRing,
    free_vars,
    producer_path,
    replace_loads,
    scalar_store,
    tensor_map_load,
    wide_axes,
)

SHARED_SCOPES = ("shared", "shared.dyn")
SMEM_PER_SM = 228 * 1024  # shared memory of one sm_80/sm_90 SM (blocks on it share it)


@dataclass
class SharedTile:
    """A shared tile read by tensor-core GEMMs: its padded (and maybe staged) buffer."""

    old: Any
    new: Any = None
    stages: int = 0
    loop: Any = None  # the pipelined loop that stages it
    mma_operand: bool = False  # read by a tensor-core GEMM (else only padded, on request)
    core: CoreMatrixLayout | SwizzledLayout | None = None  # wgmma operands, else padded rows
    base: Any = None  # a TMA ring running across outer iterations: its iterations before this loop
    # kept as the kernel declared it (row-major, any rank): the kernel addresses its storage
    # itself (T.access_ptr, a view), or a GEMM reads a slice of it (operands.matrix_slice)
    raw: bool = False
    tma_only: bool = False  # the user's T.tma_copy alone fills it, its mbarriers order it (role_tiles.py)
    in_place: bool = False  # raw, its 16-byte chunks swizzled within each row (in_place_swizzle.py)

    def stage(self) -> Any:
        if not self.stages:
            return None
        if self.base is not None:  # (tma.TmaRing.carried) a running count, never negative
            return tirx.truncmod(self.base + self.loop.loop_var, self.stages)
        return tirx.floormod(self.loop.loop_var, self.stages)

    def indices(self, row: Any, col: Any, stage: Any = None, start: bool = False, lead: Any = ()) -> list[Any]:
        """The new buffer's indices of the tile's element (row, col) (``start``: where a
        wgmma descriptor starts for it, before the hardware applies the swizzle; ``lead``:
        a raw tile's indices before its last two)."""
        if self.raw:
            if self.in_place:
                return [*lead, row, swizzled_column(row, col, CHUNK_BYTES // dtype_bytes(self.old.dtype))]
            return [*lead, row, col]
        where = [row, col]
        if self.core:
            where = [self.core.start(row, col) if start else self.core.offset(row, col)]
        return ([self.stage() if stage is None else stage] if self.stages else []) + where

    def element(self, row: Any, col: Any, stage: Any = None, start: bool = False, lead: Any = ()) -> Any:
        """The flat element offset of (row, col) in the new buffer (see ``indices``)."""
        shape = [int(d.value) for d in self.new.shape]
        offset = 0
        for index, extent in zip(self.indices(row, col, stage, start, lead), shape):
            offset = offset * extent + index
        return offset

    def address(self, row: Any, col: Any, access: str = "r", stage: Any = None, start: bool = False,
                lead: Any = ()) -> Any:
        """A pointer to 16 bytes at (row, col) of the current (or the given) stage, as
        tvm_access_ptr, which shared-memory planning and ThreadSync understand."""
        return self.new.access_ptr(access, offset=self.element(row, col, stage, start, lead),
                                   extent=CHUNK_BYTES // dtype_bytes(self.new.dtype))


class AsyncCopyPipelines:
    """The pipelining half of the tensor-core pass (mixed into its kernel state): finds the
    loops to pipeline during analysis and rewrites them. Uses the host's ``func``,
    ``tiles``, ``accumulators``, ``pipelined``, ``threads``, ``tid``, ``analyzer``,
    ``wgmma``, ``wgmma_pending``, ``_find``, ``var`` and ``_mma`` (the first GEMM of a stage issues the next copies
    behind its first fragment loads)."""

    def _find_pipelines(self) -> None:
        """Pipelined loops whose copies can become cp.async stages."""
        loops: list[Any] = []

        def visit(node: Any) -> None:
            if isinstance(node, tirx.For) and node.annotations and "num_stages" in node.annotations:
                loops.append(node)

        tvm_ffi.structural_walk(self.func.body, (tirx.For, visit))
        for loop in loops:
            stages = int(loop.annotations["num_stages"])
            if stages < 2 or not (isinstance(loop.min, tirx.IntImm) and loop.min.value == 0):
                continue
            producers, _ = self._split_body(loop)
            if not producers:
                continue
            staged = [self._find(p.value.args[1].source, self.tiles) for p in producers]
            if any(t is None or t.stages or not t.mma_operand or t.raw for t in staged):
                continue
            plans = [self._cp_async_plan(p.value.args[0], p.value.args[1]) for p in producers]
            if any(plan is None for plan in plans):
                continue
            if not all(self._only_inside(t.old, loop, p) for t, p in zip(staged, producers)):
                continue
            for tile in staged:
                tile.stages, tile.loop = stages, loop
            self.pipelined[loop] = stages
            for p, plan in zip(producers, plans):
                if plan:
                    self.checked_copies.append((p.value.args[1].source, plan))

    @staticmethod
    def _split_body(loop: Any) -> tuple[list[Any], list[Any]]:
        """(the T.copy statements of global tiles into shared tiles, the rest). Copies
        after other work count when they may move to the top of the iteration (as in
        flash-attention, whose V tile is copied after the first GEMM): nothing before
        them touches their shared tile, and the loop writes no global tensor they read.
        Otherwise no producers. Names assigned in the body before a copy (``start = k *
        bK``, as upstream's examples write: a one-element local buffer, or a binding) are
        inlined into the copy, which then moves with its bounds spelled out (the
        assignment stays for the statements that use it)."""
        body = list(loop.body) if isinstance(loop.body, tirx.SeqStmt) else [loop.body]
        written: list[Any] = []
        tvm_ffi.structural_walk(loop.body, (tirx.BufferStore, lambda s: written.append(s.buffer)
                                            if s.buffer.scope() == "global" else None))
        stored: list[Any] = []  # every buffer the body writes: values read from them vary
        tvm_ffi.structural_walk(loop.body, (tirx.BufferStore, lambda s: stored.append(s.buffer)))
        producers, rest, bound = [], [], []
        scalars: list[tuple[Any, Any]] = []  # (one-element local buffer, the value stored)
        for stmt in body:
            if isinstance(stmt, tirx.Bind):
                bound.append((stmt.var, substitute(stmt.value, bound) if bound else stmt.value))
            elif scalar_store(stmt):
                scalars = [(b, v) for b, v in scalars if not b.same_as(stmt.buffer)]
                value = replace_loads(stmt.value, scalars) if scalars else stmt.value
                if not _loads_of(value, stored):  # it reads only what the loop leaves alone
                    scalars.append((stmt.buffer, substitute(value, bound) if bound else value))
            is_copy = tile_op_name(stmt) == "copy" and stmt.value.args[0].source.scope() == "global" and \
                stmt.value.args[1].source.scope() in SHARED_SCOPES
            if is_copy and bound:
                stmt = substitute(stmt, bound)
            if is_copy and scalars:
                stmt = replace_loads(stmt, scalars)
            if is_copy and _loads_of(stmt, stored):
                # its tile's corner reads a name the iteration assigns (from a load that
                # varies): issued ahead, it would read the name before its assignment
                return [], body
            if is_copy and (not rest or AsyncCopyPipelines._may_hoist(stmt, rest, written)):
                producers.append(stmt)
            elif is_copy:
                return [], body
            else:
                rest.append(stmt)
        if any(tile_op_name(s) == "copy" and s.value.args[1].source.scope() in SHARED_SCOPES for s in rest):
            return [], body
        return producers, rest

    @staticmethod
    def _may_hoist(copy: Any, before: list[Any], written: list[Any]) -> bool:
        src, dst = copy.value.args[0].source, copy.value.args[1].source
        if any(b.same_as(src) for b in written):
            return False
        touched = []

        def visit(node: Any) -> None:
            buffer = node.buffer if isinstance(node, tirx.BufferStore) else node.source
            if isinstance(buffer, tirx.Buffer) and buffer.same_as(dst):
                touched.append(node)

        for stmt in before:
            tvm_ffi.structural_walk(stmt, [(tirx.BufferStore, visit), (TensorLoad, visit),
                                           (tvm.ir.TensorRegion, visit)])
        return not touched

    def _cp_async_plan(self, src: Any, dst: Any) -> list[Any] | None:
        """Whether 16-byte vectors of the tile are whole vectors of the global tensor,
        aligned: None where not, else the conditions that must hold when the kernel runs
        (none where the shapes prove it). A row of run-time length (T.dynamic) is whole
        vectors only when that length is a multiple of the vector: the copy then checks
        it each time, as upstream's vectorized copies do, and copies elements otherwise."""
        if not is_full_region(dst) or static_ints(dst.source.shape) is None:
            return None
        g = src.source
        vec = CHUNK_BYTES // dtype_bytes(g.dtype)
        if str(g.dtype) != str(dst.source.dtype) or dtype_bytes(g.dtype) * vec != CHUNK_BYTES:
            return None
        axes = wide_axes(src)
        tile = static_ints([src.region[a].extent for a in axes])
        if tile is None or tile != static_ints(dst.source.shape) or not axes or axes[-1] != len(g.shape) - 1:
            return None
        corner = self.analyzer.modular_set(src.region[-1].min)
        if tile[-1] % vec or corner.coeff % vec or corner.base % vec:
            return None
        whole = tirx.floormod(g.shape[-1], vec) == 0
        if self.analyzer.can_prove(whole):
            return []
        symbolic = []
        tvm_ffi.structural_walk(g.shape[-1], (tirx.Var, symbolic.append))
        return [whole] if symbolic else None

    def _checked(self, dst: Any) -> list[Any]:
        """The run-time conditions of the copies into ``dst`` (see _cp_async_plan)."""
        return next((plan for buffer, plan in self.checked_copies if buffer.same_as(dst)), [])

    def _only_inside(self, buffer: Any, loop: Any, producer: Any) -> bool:
        """Every access of ``buffer`` is inside ``loop``, the producer is its only writer,
        and the other statements read it as tensor-core GEMM operands or plain loads."""

        def touches(n: Any) -> bool:
            if isinstance(n, tirx.BufferStore):
                return n.buffer.same_as(buffer)
            if isinstance(n, (TensorLoad, tvm.ir.TensorRegion)):
                return isinstance(n.source, tirx.Buffer) and n.source.same_as(buffer)
            return False

        outside = []

        def visit(node: Any) -> Any:
            if isinstance(node, tirx.For) and node.same_as(loop):
                return WalkResult.SKIP
            if touches(node):
                outside.append(node)
            return WalkResult.ADVANCE

        tvm_ffi.structural_walk(self.func.body, visit, order="pre")
        if outside:
            return False
        _, rest = self._split_body(loop)
        for stmt in rest:
            name = tile_op_name(stmt)
            if name is None:
                writes = []
                tvm_ffi.structural_walk(stmt, (tirx.BufferStore, lambda n: writes.append(n) if touches(n) else None))
                if writes:
                    return False
                continue
            args = stmt.value.args
            if not any(touches(a) for a in args if isinstance(a, tvm.ir.TensorRegion)):
                continue
            mma = name == "gemm" and self._find(args[2].source, self.accumulators) is not None
            if not mma or touches(args[2]):
                return False
        return True

    # -- pipelining ----------------------------------------------------------------------
    def _on_pipelined(self, loop: Any) -> Any:
        stages = self._find(loop, self.pipelined)
        if stages is None:
            return loop
        producers, rest = self._split_body(loop)
        loads = self._tensor_map_loads(producers, rest)
        if loads is not None:
            return self._tma_pipeline(loop, stages, producers, rest, loads)
        n, k = loop.extent, loop.loop_var
        # copies run ahead by stages - 1 iterations; with wgmma groups left in flight
        # across iterations, one stage fewer (the stage being overwritten must be one
        # whose wgmma every thread has waited for before this iteration's barrier)
        ahead = stages - 1 - (self.wgmma_pending if self.wgmma else 0)
        prologue = []
        for s in range(ahead):
            issue = self._issue(producers, k, n, tirx.IntImm("int32", s), s)
            prologue += [tirx.IfThenElse(tirx.IntImm("int32", s) < n, issue, None), extern_call("tl_cp_async_commit")]
        nxt = k + ahead
        issue = self._issue(producers, k, n, nxt, tirx.floormod(nxt, stages))
        issue = seq([tirx.IfThenElse(nxt < n, issue, None), extern_call("tl_cp_async_commit")])
        at, first = _first_gemm(rest)
        acc = self._find(first.value.args[2].source, self.accumulators) if first is not None else None
        if acc is not None:  # the copies go out behind the first fragment loads
            rest = [*rest[:at], stamp_span(self._mma(acc, first.value.args, after_first_load=issue), first.span),
                    *rest[at + 1:]]
            issue = None
        # wgmma reads shared memory through the async proxy: the copies' writes are made
        # visible to it (by each writer, before the barrier that publishes them)
        fence = extern_call("tl_fence_proxy_async") if self.wgmma else None
        body = [extern_call("tl_cp_async_wait", ahead - 1), fence, block_barrier(), issue, *rest]
        main = tirx.For(k, loop.min, n, tirx.ForKind.SERIAL, seq(body), span=loop.span)
        self.needs_alignment = True
        drain = extern_call("tl_wgmma_wait", 0) if self.wgmma else None
        return seq([*prologue, main, extern_call("tl_cp_async_wait", 0), drain, block_barrier()])

    def _tensor_map_loads(self, producers: list[Any], rest: list[Any]) -> list[TensorMapLoad] | None:
        """TMA plans for every producer of a wgmma pipeline, or None (cp.async)."""
        if not (self.wgmma and self.tensor_maps) or pass_config(DISABLE_TMA_CONFIG):
            return None
        # the ring releases a stage after the first GEMM's wait; with a group left in
        # flight that GEMM must come first, and every other reader of a staged tile must
        # be a GEMM too (plain loads read through the generic proxy, which TMA's writes
        # would race without a proxy fence)
        if self.wgmma_pending and _first_gemm(rest)[1] is None:
            return None
        if self._plain_reads(rest, [self._find(p.value.args[1].source, self.tiles).old for p in producers]):
            return None
        if any(self._checked(p.value.args[1].source) for p in producers):
            return None  # (a tensor map's strides must be whole 16 bytes when it is encoded)
        loads = []
        for p in producers:
            src, dst = p.value.args[0], p.value.args[1]
            load = tensor_map_load(src, self._find(dst.source, self.tiles))
            if load is None:
                return None
            loads.append(load)
        return loads

    def _tma_pipeline(self, loop: Any, stages: int, producers: list[Any], rest: list[Any],
                      loads: list[TensorMapLoad]) -> Any:
        """The stage ring on TMA boxes and mbarriers (tma.py): warp-specialized when the
        loop sits at the top of the block, else issued by thread 0 between GEMMs."""
        at, first = _first_gemm(rest)
        acc = self._find(first.value.args[2].source, self.accumulators) if first is not None else None
        ring = TmaRing(loads, [p.value.args[0] for p in producers], loop, stages, self.tid, self.threads,
                       spans=[p.span for p in producers])
        for load, p in zip(loads, producers):
            self.host_prologue += load.encode(p.value.args[0].source)
        self.needs_alignment = True
        if self._may_specialize(loop, ring):
            self._load_tiles_in_producer(loop, ring)
            self._operand_groups(ring, rest)
            record_ring(stages, ring.groups is not None)
            self.block_prologue += ring.prologue(specialized=True)
            consumers, producer = ring.specialized(
                lambda release: stamp_span(self._wgmma(acc, first.value.args, after_wait=release), first.span)
                if acc is not None else None, rest, at)
            if producer is not None:  # carried: it replays the path to the ring, from just before it
                anchor = next(s for s in ring.path if isinstance(s, (tirx.For, tirx.IfThenElse)))
                self.hoisted.append((anchor, producer))
            return consumers
        return ring.single_issuer(lambda release: stamp_span(self._wgmma(acc, first.value.args, after_wait=release),
                                                             first.span) if acc is not None else None, rest, at)

    def _load_tiles_in_producer(self, loop: Any, ring: TmaRing) -> None:
        """A carried ring's producer takes over the copies of wgmma operand tiles made once
        per outer iteration before its loop (flash attention's Q; tma.py's docstring): each
        copy from global memory that comes before the loop in the same statement list, into
        a tile that only that copy writes and only GEMMs read, whose region the producer can
        replay. ``_on_op`` puts the consumers' wait where the copy was."""
        if not ring.carried or not self.analyzer.can_prove(loop.extent >= 1):
            return
        parent = _parent_seq(self.func.body, loop)
        copies = []
        for stmt in parent or []:
            if stmt.same_as(loop):
                break
            if tile_op_name(stmt) != "copy":
                continue
            src, dst = stmt.value.args[0], stmt.value.args[1]
            tile = self._find(dst.source, self.tiles)
            if src.source.scope() != "global" or tile is None or tile.stages or not tile.mma_operand or \
                    not is_full_region(dst) or not self._written_once_read_by_gemms(tile.old, stmt):
                continue
            load = tensor_map_load(src, tile)
            if load is not None:
                copies.append((stmt, load))
        if not copies:
            return
        ring.tile_loads = [(load, stmt.value.args[0]) for stmt, load in copies]
        if producer_path(self.func.body, loop, self._replayable(loop), ring.expressions()) is None:
            ring.tile_loads = []  # a tile corner the producer cannot compute: the consumers copy
            return
        for stmt, load in copies:
            self.host_prologue += load.encode(stmt.value.args[0].source)
            self.tile_copies.append([stmt, ring, False])

    def _operand_groups(self, ring: TmaRing, rest: list[Any]) -> None:
        """Barriers per operand (FlashAttention-3's K and V pipelines): when the loop's first
        GEMM reads some of the staged tiles and a later GEMM the others (S = Q K^T, then
        O += P V), the two groups get full and empty barriers of their own. K's stage is
        then free as soon as S is done, not after the next iteration's P V (which, with the
        overlap, comes in the middle of the next iteration), so 2 stages keep the producer
        as far ahead as 3 did. Only where every GEMM waits for its own wgmma groups, and
        with that overlap on: without it P V is done within its iteration, the joint stage
        is free at the next head anyway, and the extra barrier operations cost the 9-warp
        block (168 registers a thread) 92 bytes of spills (ptxas -v, head dim 128)."""
        if self.wgmma_pending or len(ring.loads) < 2 or not overlap_on():
            return
        readers = []  # (index in rest, the loads its operands read)
        for i, stmt in enumerate(rest):
            if tile_op_name(stmt) == "gemm":
                operands = [a.source for a in stmt.value.args[:2] if isinstance(a, tvm.ir.TensorRegion)]
                read = [j for j, load in enumerate(ring.loads) if any(o.same_as(load.tile.old) for o in operands)]
                if read:
                    readers.append((i, read))
        first: dict[int, int] = {}
        for i, read in readers:
            for j in read:
                first.setdefault(j, i)
        if not readers or len(first) != len(ring.loads):
            return
        groups = [0 if first[j] == readers[0][0] else 1 for j in range(len(ring.loads))]
        if 1 not in groups:
            return
        last0 = max(i for i, read in readers if any(groups[j] == 0 for j in read))
        first1 = min(i for i, read in readers if any(groups[j] == 1 for j in read))
        if last0 < first1:
            ring.groups, ring.split_at = groups, (last0, first1)

    def _written_once_read_by_gemms(self, buffer: Any, copy: Any) -> bool:
        """Whether ``copy`` is the only statement that writes ``buffer`` and tensor-core
        GEMMs (as an operand) are the only ones that read it."""
        ok = [True]

        def mine(region: Any) -> bool:
            return isinstance(region, tvm.ir.TensorRegion) and region.source.same_as(buffer)

        def visit(node: Any) -> Any:
            name = tile_op_name(node) if isinstance(node, tirx.Evaluate) else None
            if name is not None:
                args = node.value.args
                if node.same_as(copy) or not any(mine(a) for a in args):
                    return WalkResult.SKIP
                gemm = name == "gemm" and self._find(args[2].source, self.accumulators) is not None
                ok[0] = ok[0] and gemm and not mine(args[2])
                return WalkResult.SKIP
            if isinstance(node, tirx.BufferStore) and node.buffer.same_as(buffer) or \
                    isinstance(node, TensorLoad) and isinstance(node.source, tirx.Buffer) and node.source.same_as(buffer):
                ok[0] = False
            return WalkResult.ADVANCE

        tvm_ffi.structural_walk(self.func.body, visit, order="pre")
        return ok[0]

    def _tile_wait(self, stmt: Any) -> Any:
        """The consumers' wait for a tile that a carried ring's producer loads instead of
        this copy (``_load_tiles_in_producer``), or None."""
        for entry in self.tile_copies:
            if entry[0].same_as(stmt):
                entry[2] = True
                return entry[1].tile_wait()
        return None

    def _hoist_producers(self, body: Any) -> Any:
        """Each carried ring's producer (tma.TmaRing.specialized) goes right before the
        outermost statement of the path it replays (so after the tiles' allocations), out
        of the consumers' loops and conditions. Located by what a rebuilt statement keeps:
        a loop's variable, a condition's expression."""
        for anchor, marker in self.hoisted:
            done: list[Any] = []

            def on_stmt(stmt: Any, anchor: Any = anchor, marker: Any = marker, done: list[Any] = done) -> Any:
                if done or type(stmt) is not type(anchor) or not _same_anchor(stmt, anchor):
                    return stmt
                done.append(stmt)
                return seq([marker, stmt])

            body = tvm_ffi.structural_map(body, [(tirx.For, on_stmt), (tirx.IfThenElse, on_stmt)], order="post")
            if not done:
                raise CompileError(f"kernel {self.kernel!r}: the TMA producer's path to its ring was lost "
                                   "(set the pass config tl.disable_warp_specialized to avoid it)")
        return body

    def _may_specialize(self, loop: Any, ring: TmaRing) -> bool:
        """A producer warp can run the loop on its own when its trip count and tile
        corners depend on nothing but the block index and the kernel's parameters, and so
        do the loops, conditions and bindings around it, which the producer replays
        (tma.producer_path)."""
        # one producer warp per kernel (SpecializeWarps): a later ring keeps a single issuer
        if pass_config(DISABLE_WS_CONFIG) or any(_is_ring_prologue(s) for s in self.block_prologue):
            return False
        # attention-like kernels (a row family) hold two blocks per SM where shared memory
        # allows, and the producer warp's registers can cost one of them (H200, flash-
        # attention, head dim 64, 128 x 128 tiles: 414 TFLOP/s specialized, 512 not);
        # GEMMs gained in every configuration measured
        if self.rows and self.smem_per_block and 2 * self.smem_per_block <= SMEM_PER_SM:
            return False
        # inside outer loops/conditions (T.Persistent): the producer replays them (tma.py)
        path = producer_path(self.func.body, loop, self._replayable(loop), ring.expressions())
        if path is None:
            return False
        ring.path = path
        return True

    def _replayable(self, loop: Any) -> list[Any]:
        """The variables a producer warp has of its own: block indices, the loop's variable,
        the parameters and the symbolic dimensions of tensor parameters."""
        allowed = [*self.block_vars, loop.loop_var, *self.func.params]
        for param in self.func.params:
            allowed += [v for d in getattr(param.ty, "shape", ()) for v in free_vars(d)]
        return allowed

    @staticmethod
    def _plain_reads(stmts: list[Any], buffers: list[Any]) -> bool:
        """Whether anything but a T.gemm in ``stmts`` reads one of ``buffers``."""
        found = []

        def visit(node: Any) -> Any:
            if tile_op_name(node) == "gemm":
                return WalkResult.SKIP
            source = node.source if isinstance(node, (TensorLoad, tvm.ir.TensorRegion)) else None
            if isinstance(source, tirx.Buffer) and any(source.same_as(b) for b in buffers):
                found.append(node)
            return WalkResult.ADVANCE

        for stmt in stmts:
            tvm_ffi.structural_walk(stmt, visit, order="pre")
        return bool(found)

    def _issue(self, producers: list[Any], k: Any, n: Any, k_value: Any, stage: Any) -> Any:
        return seq([stamp_span(self._cp_async(p.value.args[0], p.value.args[1], k, n, k_value, stage), p.span)
                    for p in producers])

    def _partial_copy(self, g: Any, index: list[Any], axes: list[int], smem: Any, vec: int, running: Any) -> Any:
        """The vector at ``index`` of ``g`` when rows are not whole vectors: the elements
        left in its row (none past the tensor's edge), synchronously, zeros after them
        (tl_copy_16_partial). Its shared address is declared a read, as cp.async's is: the
        ring's wait and barrier publish these stores too (and on wgmma its proxy fence)."""
        with self.analyzer.constraint_scope(running):
            rows_in = [i < d for a, (i, d) in enumerate(zip(index, g.shape))
                       if a != axes[1] and not self.analyzer.can_prove(i < d)]
        left = tirx.max(tirx.min(g.shape[axes[1]] - index[axes[1]], vec), 0) * dtype_bytes(g.dtype)
        count = tirx.Select(_all(rows_in), left, tirx.IntImm("int32", 0)) if rows_in else left
        safe = [tirx.Select(count > 0, i, tirx.IntImm("int32", 0)) for i in index]
        return extern_call("tl_copy_16_partial", smem, tirx.address_of(tirx.BufferLoad(g, safe)), count,
                           dtype_bytes(g.dtype))

    def _cp_async(self, src: Any, dst: Any, k: Any, n: Any, k_value: Any, stage: Any) -> Any:
        """One tile, global -> stage ``stage`` of its shared buffer, for iteration
        ``k_value``: 16-byte vectors dealt round-robin over the threads."""
        tile = self._find(dst.source, self.tiles)
        g = src.source
        vec = CHUNK_BYTES // dtype_bytes(g.dtype)
        axes = wide_axes(src)
        rows, cols = (int(d.value) for d in dst.source.shape)
        per_row = cols // vec
        vectors = rows * per_row
        it = self.var("v")
        iterations = (vectors + self.threads - 1) // self.threads
        self.analyzer.bind(it, tvm.ir.Range.from_min_extent(0, iterations))
        q = it * self.threads + self.tid
        # consecutive threads write consecutive 16 bytes of shared memory
        r, c = tile.core.vector(q) if tile.core else (tirx.floordiv(q, per_row), tirx.floormod(q, per_row) * vec)
        mins = [substitute(x.min, [(k, k_value)]) for x in src.region]
        index = list(mins)
        index[axes[0]], index[axes[1]] = mins[axes[0]] + r, mins[axes[1]] + c
        with self.analyzer.constraint_scope(k_value < n):
            conds = [i < d for i, d in zip(index, g.shape) if not self.analyzer.can_prove(i < d)]
        # declared as a read: the pipeline orders these writes with its own wait + barrier
        # (the stage written is never the one being read), which ThreadSync cannot prove
        smem = tile.address(r, c, "r", stage)
        if conds:
            ok = conds[0]
            for cond in conds[1:]:
                ok = tirx.And(ok, cond)
            safe = [tirx.Select(ok, i, tirx.IntImm("int32", 0)) for i in index]
            gmem = tirx.address_of(tirx.BufferLoad(g, safe))
            copy = extern_call("tl_cp_async_16", smem, gmem, tirx.Select(ok, tirx.IntImm("int32", CHUNK_BYTES),
                                                                     tirx.IntImm("int32", 0)))
        else:
            copy = extern_call("tl_cp_async_16", smem, tirx.address_of(tirx.BufferLoad(g, index)), CHUNK_BYTES)
        checked = self._checked(dst.source)
        if checked:  # rows of run-time length: whole vectors only when it is a multiple of one
            copy = tirx.IfThenElse(_all(checked), copy, self._partial_copy(g, index, axes, smem, vec, k_value < n))
        if vectors % self.threads:
            copy = tirx.IfThenElse(q < vectors, copy, None)
        return unrolled(it, iterations, copy)


def _all(conds: list[Any]) -> Any:
    ok = conds[0]
    for cond in conds[1:]:
        ok = tirx.And(ok, cond)
    return ok


def _is_ring_prologue(stmt: Any) -> bool:
    return isinstance(stmt, tirx.AttrStmt) and stmt.attr_key == PROLOGUE_ATTR


def _loads_of(node: Any, buffers: list[Any]) -> bool:
    """Whether ``node`` loads from one of ``buffers``."""
    found: list[Any] = []
    tvm_ffi.structural_walk(node, (TensorLoad, lambda load: found.append(load) if any(
        load.source.same_as(b) for b in buffers) else None))
    return bool(found)


def _first_gemm(stmts: list[Any]) -> tuple[int, Any]:
    """(index, statement) of the first T.gemm of ``stmts`` when only assignments (names,
    bindings) come before it, else (0, None)."""
    for i, stmt in enumerate(stmts):
        if tile_op_name(stmt) == "gemm":
            return i, stmt
        local = isinstance(stmt, tirx.AllocBuffer) and stmt.buffer.scope() == "local"
        if not (local or scalar_store(stmt) or isinstance(stmt, tirx.Bind)):
            break
    return 0, None


def _parent_seq(body: Any, child: Any) -> Any:
    """The statement list that holds ``child`` directly, or None."""
    found: list[Any] = []

    def visit(node: Any) -> None:
        if not found and any(c.same_as(child) for c in node):
            found.append(node)

    tvm_ffi.structural_walk(body, (tirx.SeqStmt, visit))
    return found[0] if found else None


def _same_anchor(stmt: Any, anchor: Any) -> bool:
    if isinstance(anchor, tirx.For):
        return stmt.loop_var.same_as(anchor.loop_var)
    return stmt.condition.same_as(anchor.condition)
