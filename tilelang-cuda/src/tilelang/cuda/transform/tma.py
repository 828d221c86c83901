"""T.Pipelined copies on the Tensor Memory Accelerator (sm_90), for the tensor-core pass.

Where a pipelined loop's tiles feed wgmma in swizzled layouts, the copies need no thread
work at all: the swizzled layout is exactly what a TMA box writes with the same swizzle
mode (CUDA Driver API, cuTensorMapEncodeTiled: ``CU_TENSOR_MAP_SWIZZLE_{32,64,128}B``
permute the 16-byte chunks of each line by the line's address bits, as wgmma's swizzle
modes do), one box per ``width``-byte column block of the tile. So each stage becomes:
one thread arms the stage's mbarrier with the bytes the boxes deliver and issues them;
every thread waits on the barrier's phase. Boxes that reach outside the tensor are
zero-filled by the hardware, so edge tiles need no predicates.

The tensor maps are encoded by the generated host code before the launch (TVM's
``tirx.tensormap_encode_tiled``) and passed as ``__grid_constant__`` kernel parameters;
execution backends that launch kernels without that host code keep cp.async.
``tl.disable_tma_lower`` (upstream TileLang's pass config) keeps cp.async too.

A ring inside outer loops (T.Persistent's waves, upstream's hand-written wave loop) runs
on across their iterations when its producer warp can replay them (``producer_path``):
stage and parity come from a running count of the ring's iterations, so the producer
loads the next tile's stages while the consumers run this tile's epilogue. Where it
cannot (a condition on memory, WS disabled, a second ring), thread 0 issues and the
barriers are initialized again for each outer iteration.

Such a ring's producer also loads the wgmma operand tiles copied once per outer iteration
before the loop (flash attention's Q): a "tile" barrier pair, ``tile_full`` (armed with
the bytes) and ``tile_empty`` (every consumer thread arrives once the tile's last GEMM is
done, after the loop's drain). The producer issues the tile after the first ``stages``
iterations of the outer iteration's ring (those wait only for the previous outer
iteration's releases), once ``tile_empty`` says the previous tile is free; the consumers
wait for ``tile_full`` where the copy was. The tile then loads under the previous outer
iteration's last GEMM and epilogue, not after a barrier in the consumers' own time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import tvm
import tvm_ffi
from tilelang.plugin import (
    block_barrier,
    dtype_bytes,
    extern_call,
    seq,
    stamp_span,
    static_ints,
    substitute,
    unrolled,
)
from tvm import tirx
from tvm.ir import TensorLoad

from .mma_layout import SwizzledLayout

DISABLE_TMA_CONFIG = "tl.disable_tma_lower"
BOX_MAX = 256  # a TMA box is at most 256 elements along every dimension
MAX_RANK = 4  # tl_device.h has tl_tma_load_{2,3,4}d
SWIZZLE = {32: 1, 64: 2, 128: 3}  # CUtensorMapSwizzle per swizzle width in bytes
L2_PROMOTION_128B = 2  # CU_TENSOR_MAP_L2_PROMOTION_L2_128B


def encode_tensor_map(var: Any, buffer: Any, rows: tuple[int, int], cols: tuple[int, int],
                      swizzle: int | None = None, split: int | None = None) -> list[Any]:
    """Host statements that allocate the 128-byte tensor map ``var`` and encode it for the
    row-major ``buffer``, with boxes of ``rows[1]`` elements along global axis ``rows[0]``
    by ``cols[1]`` along axis ``cols[0]`` (1 along every other axis). ``split``: the
    innermost axis (``cols[0]``) is seen as (its extent / split, split), one more dimension,
    and a box spans ``cols[1] / split`` pieces of ``split`` elements: a row wider than a box
    dimension may be (256 elements) still lands as one dense row."""
    shape = list(buffer.shape)
    if split:
        shape = [*shape[:-1], tirx.floordiv(shape[-1], split), tirx.IntImm("int64", split)]
    rank = len(shape)
    dims = [tirx.Cast("uint64", d) for d in reversed(shape)]  # innermost first
    strides, stride = [], tirx.IntImm("uint64", dtype_bytes(buffer.dtype))
    for extent in reversed(shape[1:]):  # byte strides of every dimension but the innermost
        stride = stride * tirx.Cast("uint64", extent)
        strides.append(stride)
    box = [1] * rank
    if split:
        box[0], box[1] = split, cols[1] // split
    else:
        box[rank - 1 - cols[0]] = cols[1]
    box[rank - 1 - rows[0]] = rows[1]
    options = {"swizzle": swizzle} if swizzle is not None else {}
    encode = tirx.tensormap_encode_tiled(
        var, buffer.data, *dims, *strides, *[tirx.IntImm("uint32", b) for b in box],
        *[tirx.IntImm("uint32", 1)] * rank, descriptor_dtype=_element_type(buffer.dtype), rank=rank,
        l2_promotion=L2_PROMOTION_128B, **options)
    return [tirx.Bind(var, tirx.tvm_stack_alloca("tensormap", 1)), tirx.Evaluate(encode)]


def _element_type(dtype: Any) -> str:
    """The tensor map's element type: the tensor's own, but bytes for 8-bit floats (the
    driver's element types have none; a box copies their bytes as they are)."""
    return "uint8" if str(dtype).startswith("float8") else str(dtype)


@dataclass(frozen=True)
class TensorMapLoad:
    """The boxes that fill one staged tile from one global tensor, and the host code that
    encodes their tensor map."""

    var: Any  # the tensor map: a kernel parameter of type CUtensorMap
    tile: Any  # the SharedTile (staged, swizzled)
    row_axis: int  # the global axes the tile's rows and columns run along
    col_axis: int
    rank: int

    @property
    def layout(self) -> SwizzledLayout:
        return self.tile.core

    @property
    def bytes(self) -> int:
        return self.layout.size * self.layout.dtype_bytes

    def encode(self, buffer: Any) -> list[Any]:
        """Host statements: allocate the 128-byte map and encode it for ``buffer``."""
        layout = self.layout
        return encode_tensor_map(self.var, buffer, (self.row_axis, layout.rows),
                                 (self.col_axis, layout.width // layout.dtype_bytes), SWIZZLE[layout.width])

    def issue(self, corner: list[Any], stage: Any, barrier: Any) -> Any:
        """Every box of the tile whose top-left element is global ``corner``, into
        ``stage``: column block j lands ``rows x width`` bytes after block j - 1."""
        layout = self.layout
        per_line = layout.width // layout.dtype_bytes
        block = layout.rows * per_line
        calls = []
        for j in range(layout.cols // per_line):
            coords = list(corner)
            coords[self.col_axis] = coords[self.col_axis] + j * per_line
            # declared as a read, like cp.async: the stage ring orders these writes itself
            smem = self.tile.new.access_ptr("r", offset=stage * layout.size + j * block, extent=block)
            calls.append(extern_call(f"tl_tma_load_{self.rank}d", smem, tirx.address_of(self.var), barrier,
                                     *[tirx.Cast("int32", c) for c in reversed(coords)]))
        return seq(calls)


def wide_axes(region: Any) -> list[int]:
    """The axes along which ``region`` is more than one element wide (a tile's rows and
    columns, out of a global tensor of any rank)."""
    return [a for a, r in enumerate(region.region) if not (isinstance(r.extent, tirx.IntImm) and r.extent.value == 1)]


def tensor_map_load(src: Any, tile: Any) -> TensorMapLoad | None:
    """The TMA plan for copying global region ``src`` into the staged ``tile``, or None
    when the tile's layout or shape is not one TMA boxes can write."""
    axes = wide_axes(src)
    layout = tile.core
    g = src.source
    rank = len(g.shape)
    if not isinstance(layout, SwizzledLayout) or not 2 <= rank <= MAX_RANK or len(axes) != 2:
        return None
    if layout.rows > BOX_MAX or layout.width // layout.dtype_bytes > BOX_MAX or list(g.strides):
        return None
    name = f"{g.name}_tensor_map"
    var = tirx.Var(name, tvm.ir.PointerType(tirx.TensorMapType()))
    return TensorMapLoad(var, tile, axes[0], axes[1], rank)


BARRIER_BYTES = 1024  # static shared memory the barriers take (see barrier_buffer)


def barrier_buffer(stages: int) -> Any:
    """The ring's mbarriers: ``full`` of stage s at s, ``empty`` at stages + s (with
    operand groups, g * stages + s and (groups + g) * stages + s; then the tile pair), 64 bits
    each, in static shared memory padded to 1 KiB. The dynamic buffer holds the swizzled
    tiles alone and must start on a 1 KiB boundary (the 128-byte swizzle repeats every
    1 KiB of absolute shared address); CUDA places dynamic shared memory after the static
    allocations, so those are made a multiple of 1 KiB (and the kernel checks the boundary
    at run time: a trap, never a silently mis-swizzled tile)."""
    return tirx.decl_buffer((BARRIER_BYTES // 8,), "uint64", name="tma_barrier", scope="shared")


def barrier_address(barriers: Any, index: Any) -> Any:
    return tirx.address_of(tirx.BufferLoad(barriers, [index]))


DISABLE_WS_CONFIG = "tl.disable_warp_specialized"  # upstream TileLang's pass config
PRODUCER_ATTR = "tl.tma_producer"  # marks the producer warp's loop until SpecializeWarps moves it
PROLOGUE_ATTR = "tl.tma_prologue"  # the barriers' initialization, at the top of the block
PRODUCER_THREADS = 32  # one warp issues every box


@dataclass
class TmaRing:
    """One pipelined loop's stage ring: ``full[s]`` (armed by the issuing thread with the
    bytes its boxes deliver) and ``empty[s]`` (each consumer thread arrives once its wgmma
    reading the stage has completed), for s < stages.

    With ``groups`` (a warp-specialized ring under the intra-warpgroup overlap, whose first
    GEMM reads some tiles and a later GEMM the others: flash attention's K and V), each
    group has its own pairs, as FlashAttention-3's K and V pipelines do. K's stage is
    released as soon as S is done, V's after the P V that the overlap issues in the next
    iteration; with one pair for both, K waited for that P V too, and 2 stages left the
    producer no lead (H200, head dim 128: 0.66x SDPA with one pair, 0.99-1.01x with two,
    where 3 stages with one pair gave 0.96x)."""

    loads: list[TensorMapLoad]
    regions: list[Any]  # the global source region of each load
    loop: Any
    stages: int
    tid: Any
    threads: int  # the consumer threads: the block's threads as the kernel declares them
    # what a producer warp replays around the loop (producer_path), outermost first; with a
    # loop among it the ring runs on across the outer iterations (``carried``)
    path: list[Any] = field(default_factory=list)
    # (load, global region) of the tiles copied once per outer iteration before the loop,
    # which a carried ring's producer issues (see the module's docstring)
    tile_loads: list[tuple[TensorMapLoad, Any]] = field(default_factory=list)
    # a specialized ring's operand groups (cp_async._operand_groups): the group of each load
    # (0: read by the iteration's first GEMM, 1: by later ones), each with barriers of its
    # own; None: one barrier pair per stage for every load
    groups: list[int] | None = None
    # with groups: (index in the loop's statements of the last GEMM reading group 0, of the
    # first reading group 1); group 0 is released right after the first, group 1 waited
    # for right before the second
    split_at: tuple[int, int] | None = None
    # the span of each load's T.copy (its boxes take that line under tl.emit_line_directives)
    spans: list[Any] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.barriers = barrier_buffer(self.stages)
        # running iteration counts of the ring, one per role (each thread keeps its own)
        self.produced = tirx.decl_buffer((1,), "int32", name="tma_produced", scope="local")
        self.consumed = tirx.decl_buffer((1,), "int32", name="tma_consumed", scope="local")
        # and of the outer iterations whose tiles were issued / waited for
        self.tiles_produced = tirx.decl_buffer((1,), "int32", name="tma_tiles_produced", scope="local")
        self.tiles_consumed = tirx.decl_buffer((1,), "int32", name="tma_tiles_consumed", scope="local")

    @property
    def carried(self) -> bool:
        """The ring sits inside an outer loop: stage and parity come from the running count
        of iterations over every outer iteration, not from ``k`` (which restarts per tile
        and would desynchronize the phases unless the count per tile were a multiple of
        2 x stages)."""
        return any(isinstance(step, tirx.For) for step in self.path)

    @property
    def group_count(self) -> int:
        return max(self.groups) + 1 if self.groups else 1

    def full(self, stage: Any, group: int = 0) -> Any:
        return barrier_address(self.barriers, stage + group * self.stages)

    def empty(self, stage: Any, group: int = 0) -> Any:
        return barrier_address(self.barriers, stage + (self.group_count + group) * self.stages)

    @property
    def tile_full(self) -> Any:
        return barrier_address(self.barriers, 2 * self.group_count * self.stages)

    @property
    def tile_empty(self) -> Any:
        return barrier_address(self.barriers, 2 * self.group_count * self.stages + 1)

    def tile_wait(self) -> Any:
        """The consumers' wait for this outer iteration's tiles (where their copy was), and
        a warp barrier: the wait spins in a branch, after which ptxas cannot tell that a
        warp's lanes run together again; the row shuffles after it then got a second,
        divergent copy of the whole loop (BRA.DIV; FlashAttention at 0.86x SDPA instead
        of 0.93). The block barrier after the copy it replaces used to tell it."""
        count = tirx.BufferLoad(self.tiles_consumed, [0])
        return seq([extern_call("tl_mbarrier_wait", self.tile_full, tirx.truncmod(count, 2)),
                    extern_call("__syncwarp")])

    def _issue_tiles(self, count: Any) -> Any:
        """The producer's tiles of outer iteration ``count`` (its running count): once the
        consumers freed the previous one, armed with their bytes, issued."""
        free = tirx.IfThenElse(count > 0, extern_call("tl_mbarrier_wait", self.tile_empty,
                                                      tirx.truncmod(count - 1, 2)), None)
        total = sum(load.bytes for load, _ in self.tile_loads)
        boxes = [load.issue([r.min for r in region.region], 0, self.tile_full) for load, region in self.tile_loads]
        return seq([free, extern_call("tl_mbarrier_expect_tx", self.tile_full, total), *boxes])

    def stage(self, iteration: Any) -> Any:
        """The stage iteration ``iteration`` of the ring uses. A carried ring's iteration
        is a running count (never negative), which the simplifier cannot prove: truncated
        division spares the sign fix-ups of floor division."""
        if self.carried:
            return tirx.truncmod(iteration, self.stages)
        return tirx.floormod(iteration, self.stages)

    def parity(self, iteration: Any) -> Any:
        """The phase an mbarrier is in while iteration ``iteration``'s use of it runs."""
        if self.carried:
            return tirx.truncmod(tirx.truncdiv(iteration, self.stages), 2)
        return tirx.floormod(tirx.floordiv(iteration, self.stages), 2)

    def expressions(self) -> list[Any]:
        """What the issuing code reads: the trip count and every region bound."""
        regions = [*self.regions, *[region for _, region in self.tile_loads]]
        return [self.loop.extent, *[x for region in regions for r in region.region for x in (r.min, r.extent)]]

    def issue(self, k_value: Any, stage: Any, group: int | None = None) -> Any:
        """The boxes of iteration ``k_value`` into ``stage``: every load's, or ``group``'s."""
        k = self.loop.loop_var
        bar = self.full(stage, group or 0)
        spans = self.spans or [None] * len(self.loads)
        mine = [(load, region, span) for i, (load, region, span) in enumerate(zip(self.loads, self.regions, spans))
                if group is None or self.groups[i] == group]
        boxes = [stamp_span(load.issue([substitute(r.min, [(k, k_value)]) for r in region.region], stage, bar), span)
                 for load, region, span in mine]
        total = sum(load.bytes for load, _, _ in mine)
        return seq([extern_call("tl_mbarrier_expect_tx", bar, total), *boxes])

    def _init(self) -> Any:
        s = tirx.Var("s", "int32")
        inits = seq([extern_call("tl_mbarrier_init", self.full(s, g), 1) for g in range(self.group_count)] +
                    [extern_call("tl_mbarrier_init", self.empty(s, g), self.threads) for g in range(self.group_count)])
        tiles = [extern_call("tl_mbarrier_init", self.tile_full, 1),
                 extern_call("tl_mbarrier_init", self.tile_empty, self.threads)] if self.tile_loads else []
        return seq([unrolled(s, self.stages, inits), *tiles, extern_call("tl_mbarrier_init_fence")])

    def _checks(self) -> Any:
        """Thread 0 checks the tiles' 1 KiB alignment once, where the tiles are allocated."""
        return tirx.IfThenElse(self.tid == 0, seq([
            extern_call("tl_check_swizzle_base", load.tile.new.access_ptr("r", offset=0, extent=1))
            for load in [*self.loads, *[load for load, _ in self.tile_loads]]]), None)

    def prologue(self, specialized: bool) -> list[Any]:
        """Thread 0 initializes the barriers; a block barrier publishes them. Specialized:
        marked, so that SpecializeWarps keeps it ahead of the split into warp roles (the
        running counts start at 0 before it, in every thread)."""
        init = [tirx.IfThenElse(self.tid == 0, self._init(), None), block_barrier()]
        if specialized:
            counters = [self.produced, self.consumed, *([self.tiles_produced, self.tiles_consumed]
                                                        if self.tile_loads else [])]
            counts = [] if not self.carried else [
                *[tirx.AllocBuffer(c) for c in counters],
                *[tirx.BufferStore(c, tirx.IntImm("int32", 0), [0]) for c in counters]]
            return [*counts, tirx.AllocBuffer(self.barriers),
                    tirx.AttrStmt(tirx.IntImm("int32", 0), PROLOGUE_ATTR, self.threads, seq(init))]
        return [tirx.AllocBuffer(self.barriers), *init]

    def _consumer_loop(self, first_gemm: Any, rest: list[Any], at: int, refill: Any, base: Any = None) -> Any:
        """Each iteration waits for its stage, runs its GEMMs and, after the first GEMM's
        wait (at most one wgmma group stays in flight), releases the stage of the previous
        iteration (``refill`` follows: the single issuer's next boxes). The ring's
        iteration is ``base + k`` (``base``: the iterations of earlier outer iterations)."""
        k = self.loop.loop_var
        it = k if base is None else base + k
        previous = it - 1
        if self.groups:  # K (group 0) is free once S is done; V (1) at the next iteration's head
            last0, first1 = self.split_at
            rest = [*rest[:last0 + 1], extern_call("tl_mbarrier_arrive", self.empty(self.stage(it), 0)),
                    *rest[last0 + 1:first1],
                    extern_call("tl_mbarrier_wait", self.full(self.stage(it), 1), self.parity(it)), *rest[first1:]]
            head = tirx.IfThenElse(k > 0, extern_call("tl_mbarrier_arrive", self.empty(self.stage(previous), 1)),
                                   None)
            wait = extern_call("tl_mbarrier_wait", self.full(self.stage(it), 0), self.parity(it))
            return tirx.For(k, self.loop.min, self.loop.extent, tirx.ForKind.SERIAL, seq([wait, head, *rest]))
        release = seq([tirx.IfThenElse(k > 0, extern_call("tl_mbarrier_arrive",
                                                          self.empty(self.stage(previous))), None),
                       refill])
        gemm = first_gemm(release)
        if gemm is not None:
            rest = [*rest[:at], gemm, *rest[at + 1:]]
            release = None
        wait = extern_call("tl_mbarrier_wait", self.full(self.stage(it)), self.parity(it))
        return tirx.For(k, self.loop.min, self.loop.extent, tirx.ForKind.SERIAL, seq([wait, release, *rest]))

    def single_issuer(self, first_gemm: Any, rest: list[Any], at: int) -> Any:
        """Thread 0 issues: stages - 1 iterations ahead, refilling the stage of iteration
        k - 1 once every thread has released it."""
        k, n = self.loop.loop_var, self.loop.extent
        leader = self.tid == 0
        issued = [tirx.IfThenElse(tirx.And(leader, tirx.IntImm("int32", s) < n),
                                  self.issue(tirx.IntImm("int32", s), tirx.IntImm("int32", s)), None)
                  for s in range(self.stages - 1)]
        previous, nxt = k - 1, k + self.stages - 1
        refill = tirx.IfThenElse(tirx.And(leader, nxt < n), seq([
            tirx.IfThenElse(k > 0, extern_call("tl_mbarrier_wait", self.empty(self.stage(previous)),
                                               self.parity(previous)), None),
            self.issue(nxt, self.stage(nxt))]), None)
        main = self._consumer_loop(first_gemm, rest, at, refill)
        return seq([*self.prologue(specialized=False), self._checks(), *issued, main,
                    extern_call("tl_wgmma_wait", 0), block_barrier()])

    def specialized(self, first_gemm: Any, rest: list[Any], at: int) -> tuple[Any, Any]:
        """A producer warp of its own issues every iteration's boxes as soon as its stage
        is released (the first ``stages`` at once); the consumers only wait and release.
        The producer's loop is marked for SpecializeWarps, which gives it the warp.

        Carried (inside an outer loop): the producer replays the outer loops, bindings and
        conditions around the ring (``path``), so it runs ahead into the next outer
        iteration — the next tile's stages load while the consumers run this tile's
        epilogue. Both roles count the ring's iterations in a register of their own; the
        consumers release the last stage after the loop (its wgmma is done then), since the
        next outer iteration refills it.

        Not carried, the producer still replays the path's names, bindings and conditions:
        SpecializeWarps moves it out of the consumers' scope, where the names they assigned
        (``bz = bs // num_split`` before the loop: a local the consumers alone hold) and the
        conditions around the ring are not. With a condition on the path it too goes before
        the path's outermost condition (as carried: the simplifier must not prove the
        replayed guard from the consumers' own).

        Returns (what replaces the loop, the marked producer to place before the path's
        outermost loop or condition — None when it stays in the first)."""
        k, n = self.loop.loop_var, self.loop.extent
        pk = tirx.Var("k", "int32")
        base = tirx.Var("produced", "int32")
        it = base + pk if self.carried else pk
        steps = []
        for group in range(self.group_count) if self.groups else [None]:
            steps += [tirx.IfThenElse(it >= self.stages, extern_call(
                "tl_mbarrier_wait", self.empty(self.stage(it), group or 0), self.parity(it - self.stages)), None),
                substitute(self.issue(pk, self.stage(it), group), [(k, pk)])]
        producer = tirx.For(pk, self.loop.min, substitute(n, [(k, pk)]), tirx.ForKind.SERIAL, seq(steps))
        drain = extern_call("tl_wgmma_wait", 0)
        if not self.carried:
            marked = tirx.AttrStmt(tirx.IntImm("int32", 0), PRODUCER_ATTR, self.threads, replay(self.path, producer))
            main = self._consumer_loop(first_gemm, rest, at, None)
            if any(isinstance(step, tirx.IfThenElse) for step in self.path):
                return seq([self._checks(), main, drain, block_barrier()]), marked
            return seq([self._checks(), marked, main, drain, block_barrier()]), None
        tile_counts: list[Any] = []
        if self.tile_loads:  # issued after the first `stages` iterations (n >= 1: cp_async checks)
            count = tirx.Var("tiles", "int32")
            tiles_at = tirx.Min(tirx.IntImm("int32", self.stages), substitute(n, [(k, pk)])) - 1
            producer = tirx.For(pk, producer.min, producer.extent, tirx.ForKind.SERIAL, seq([
                producer.body, tirx.IfThenElse(pk == tiles_at, self._issue_tiles(count), None)]))
            producer = seq([tirx.Bind(count, tirx.BufferLoad(self.tiles_produced, [0])), producer,
                            tirx.BufferStore(self.tiles_produced, count + 1, [0])])
            tile_counts = [extern_call("tl_mbarrier_arrive", self.tile_empty),
                           tirx.BufferStore(self.tiles_consumed, tirx.BufferLoad(self.tiles_consumed, [0]) + 1, [0])]
        producer = seq([tirx.Bind(base, tirx.BufferLoad(self.produced, [0])), producer,
                        tirx.BufferStore(self.produced, base + n, [0])])
        # the replayed path goes outside the consumers' loops and conditions (cp_async puts
        # it before the path's outermost one): left where the ring is, the simplifier proved
        # the replayed guard from the consumers' own copy of it and dropped it (H200:
        # T.Persistent over more blocks than tiles, one wave; the idle blocks' producers
        # issued and then waited forever for releases)
        hoisted = tirx.AttrStmt(tirx.IntImm("int32", 0), PRODUCER_ATTR, self.threads, replay(self.path, producer))
        consumed = tirx.Var("consumed", "int32")
        for load in self.loads:  # the GEMMs read the stage of the running count too
            load.tile.base = consumed
        main = self._consumer_loop(first_gemm, rest, at, None, consumed)
        last = extern_call("tl_mbarrier_arrive", self.empty(self.stage(consumed + n - 1), self.group_count - 1))
        # after the drain every GEMM of this outer iteration is done: its tiles are free
        return seq([self._checks(), tirx.Bind(consumed, tirx.BufferLoad(self.consumed, [0])), main, drain,
                    tirx.IfThenElse(n > 0, last, None), *tile_counts,
                    tirx.BufferStore(self.consumed, consumed + n, [0]), block_barrier()]), hoisted


def free_vars(expr: Any) -> list[Any]:
    found: list[Any] = []
    tvm_ffi.structural_walk(expr, (tirx.Var, found.append))
    return found


@dataclass(frozen=True)
class ScalarStore:
    """A step of a producer path: a name the kernel assigns (``tile_id = ...`` in upstream's
    hand-written wave loop: a one-element local buffer), replayed as a binding."""

    buffer: Any
    value: Any


def scalar_store(stmt: Any) -> bool:
    """A store into a one-element local buffer: a name assigned in the kernel."""
    return isinstance(stmt, tirx.BufferStore) and stmt.buffer.scope() == "local" and \
        static_ints(stmt.buffer.shape) in ([1], [])


def replace_loads(expr: Any, values: list[tuple[Any, Any]]) -> Any:
    """``expr`` with each load of a buffer of ``values`` (buffer, value) replaced by that
    value: a name read as the variable or expression that stands for it."""
    def on_load(load: Any) -> Any:
        for buffer, value in values:
            if isinstance(load.source, tirx.Buffer) and load.source.same_as(buffer):
                return value
        return load

    return tvm_ffi.structural_map(expr, (TensorLoad, on_load), order="post")


def producer_path(body: Any, loop: Any, allowed: list[Any], expressions: list[Any]) -> list[Any] | None:
    """What lies between the block body and ``loop`` that a producer warp can replay on its
    own — serial loops, conditions (either branch), bindings and assigned names, outermost
    first — or None.

    Replayable means: ``loop`` is reached through sequences, attributes and those alone,
    and every loop bound, condition and assigned value on the way, and every expression in
    ``expressions`` (the ring's trip count and tile corners), depends only on ``allowed``
    variables (block indices, parameters), the path's own loop variables and names, and
    never on other memory; a name must be assigned nowhere else, or only after the path's
    outermost loop is over (a T.PersistentTileScheduler's state once its tile loop has
    run: nothing on the path sees those stores). Then the producer takes
    the same path as the consumers, and the two agree on every iteration of the ring;
    anything else (a condition on a value the consumers compute) could send them
    different ways and hang."""
    allowed = list(allowed)
    names: list[tuple[Any, Any]] = []  # assigned name (buffer) -> a variable standing for it
    after: list[Any] = []  # stores that run after the path has finished (the loop's last turn)

    def pure(expr: Any, memory: bool = False) -> bool:
        """``memory``: loads of parameters may stay (tile corners, as before outer loops)."""
        expr = replace_loads(expr, names)
        loads: list[Any] = []
        tvm_ffi.structural_walk(expr, (TensorLoad, loads.append))
        return (memory or not loads) and all(any(v.same_as(a) for a in allowed) for v in free_vars(expr))

    def find(stmt: Any, trail: list[Any]) -> list[Any] | None:
        if stmt.same_as(loop):
            return trail
        if isinstance(stmt, tirx.SeqStmt):
            before: list[Any] = []
            for i, child in enumerate(stmt):
                found = find(child, trail + before)
                if found is not None:
                    if not any(isinstance(step, tirx.For) for step in trail):
                        # run once the path is done: no loop of the path repeats them
                        for later in list(stmt)[i + 1:]:
                            tvm_ffi.structural_walk(later, (tirx.BufferStore, after.append))
                    return found
                if isinstance(child, tirx.Bind):
                    before.append(child)
                elif scalar_store(child):
                    before.append(ScalarStore(child.buffer, child.value))
            return None
        if isinstance(stmt, tirx.AttrStmt):
            return find(stmt.body, trail)
        if isinstance(stmt, tirx.For) and stmt.kind in (tirx.ForKind.SERIAL, tirx.ForKind.UNROLLED):
            return find(stmt.body, [*trail, stmt])
        if isinstance(stmt, tirx.IfThenElse):
            found = find(stmt.then_case, [*trail, stmt])
            if found is None and stmt.else_case is not None:
                found = find(stmt.else_case, [*trail, tirx.IfThenElse(tirx.Not(stmt.condition), stmt.else_case, None)])
            return found
        return None

    found = find(body, [])
    if found is None:
        return None
    stores: list[Any] = []
    tvm_ffi.structural_walk(body, (tirx.BufferStore, stores.append))
    for step in found:
        if isinstance(step, tirx.For):
            if not (pure(step.min) and pure(step.extent)):
                return None
            allowed.append(step.loop_var)
        elif isinstance(step, tirx.IfThenElse):
            if not pure(step.condition):
                return None
        elif isinstance(step, ScalarStore):
            on_path = sum(isinstance(s, ScalarStore) and s.buffer.same_as(step.buffer) for s in found)
            on_path += sum(s.buffer.same_as(step.buffer) for s in after)
            if not pure(step.value) or sum(s.buffer.same_as(step.buffer) for s in stores) != on_path:
                return None
            var = tirx.Var(step.buffer.name, step.buffer.dtype)
            names = [(b, v) for b, v in names if not b.same_as(step.buffer)] + [(step.buffer, var)]
            allowed.append(var)
        else:  # a binding
            if not pure(step.value):
                return None
            allowed.append(step.var)
    return found if all(pure(e, memory=True) for e in expressions) else None


def replay(path: list[Any], inner: Any) -> Any:
    """``inner`` inside copies of the loops, conditions and bindings of ``path`` (assigned
    names become bindings), with variables of their own (a variable is defined once in a
    function)."""
    renamed: list[tuple[Any, Any]] = []
    names: list[tuple[Any, Any]] = []

    def rewrite(node: Any) -> Any:
        return replace_loads(substitute(node, renamed), names)

    steps = []
    for step in path:
        if isinstance(step, tirx.For):
            var = tirx.Var(step.loop_var.name, step.loop_var.ty)
            steps.append(("for", var, rewrite(step.min), rewrite(step.extent), step.kind))
            renamed.append((step.loop_var, var))
        elif isinstance(step, tirx.IfThenElse):
            steps.append(("if", rewrite(step.condition)))
        elif isinstance(step, ScalarStore):
            var = tirx.Var(step.buffer.name, step.buffer.dtype)
            steps.append(("bind", var, rewrite(step.value)))
            names = [(b, v) for b, v in names if not b.same_as(step.buffer)] + [(step.buffer, var)]
        else:
            var = tirx.Var(step.var.name, step.var.ty)
            steps.append(("bind", var, rewrite(step.value)))
            renamed.append((step.var, var))
    stmt = rewrite(inner)
    for step in reversed(steps):
        if step[0] == "for":
            stmt = tirx.For(step[1], step[2], step[3], step[4], stmt)
        elif step[0] == "if":
            stmt = tirx.IfThenElse(step[1], stmt, None)
        else:
            stmt = seq([tirx.Bind(step[1], step[2]), stmt])
    return stmt
