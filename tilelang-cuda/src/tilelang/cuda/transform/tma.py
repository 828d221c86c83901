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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tvm
import tvm_ffi
from tilelang.plugin import block_barrier, dtype_bytes, extern_call, seq, substitute, unrolled
from tvm import tirx

from .mma_layout import SwizzledLayout

DISABLE_TMA_CONFIG = "tl.disable_tma_lower"
BOX_MAX = 256  # a TMA box is at most 256 elements along every dimension
MAX_RANK = 4  # tl_device.h has tl_tma_load_{2,3,4}d
SWIZZLE = {32: 1, 64: 2, 128: 3}  # CUtensorMapSwizzle per swizzle width in bytes
L2_PROMOTION_128B = 2  # CU_TENSOR_MAP_L2_PROMOTION_L2_128B


def encode_tensor_map(var: Any, buffer: Any, rows: tuple[int, int], cols: tuple[int, int],
                      swizzle: int | None = None) -> list[Any]:
    """Host statements that allocate the 128-byte tensor map ``var`` and encode it for the
    row-major ``buffer``, with boxes of ``rows[1]`` elements along global axis ``rows[0]``
    by ``cols[1]`` along axis ``cols[0]`` (1 along every other axis)."""
    shape, rank = list(buffer.shape), len(buffer.shape)
    dims = [tirx.Cast("uint64", d) for d in reversed(shape)]  # innermost first
    strides, stride = [], tirx.IntImm("uint64", dtype_bytes(buffer.dtype))
    for extent in reversed(shape[1:]):  # byte strides of every dimension but the innermost
        stride = stride * tirx.Cast("uint64", extent)
        strides.append(stride)
    box = [1] * rank
    box[rank - 1 - cols[0]], box[rank - 1 - rows[0]] = cols[1], rows[1]
    options = {"swizzle": swizzle} if swizzle is not None else {}
    encode = tirx.tensormap_encode_tiled(
        var, buffer.data, *dims, *strides, *[tirx.IntImm("uint32", b) for b in box],
        *[tirx.IntImm("uint32", 1)] * rank, descriptor_dtype=str(buffer.dtype), rank=rank,
        l2_promotion=L2_PROMOTION_128B, **options)
    return [tirx.Bind(var, tirx.tvm_stack_alloca("tensormap", 1)), tirx.Evaluate(encode)]


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


def tensor_map_load(src: Any, tile: Any, axes: list[int]) -> TensorMapLoad | None:
    """The TMA plan for copying global region ``src`` into the staged ``tile``, or None
    when the tile's layout or shape is not one TMA boxes can write."""
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
    """The ring's mbarriers: ``full`` of stage s at s, ``empty`` at stages + s, 64 bits
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
    reading the stage has completed), for s < stages."""

    loads: list[TensorMapLoad]
    regions: list[Any]  # the global source region of each load
    loop: Any
    stages: int
    tid: Any
    threads: int  # the consumer threads: the block's threads as the kernel declares them

    def __post_init__(self) -> None:
        self.barriers = barrier_buffer(self.stages)

    def full(self, stage: Any) -> Any:
        return barrier_address(self.barriers, stage)

    def empty(self, stage: Any) -> Any:
        return barrier_address(self.barriers, stage + self.stages)

    def parity(self, iteration: Any) -> Any:
        """The phase an mbarrier is in while iteration ``iteration``'s use of it runs."""
        return tirx.floormod(tirx.floordiv(iteration, self.stages), 2)

    def expressions(self) -> list[Any]:
        """What the issuing code reads: the trip count and every region bound."""
        return [self.loop.extent, *[x for region in self.regions for r in region.region for x in (r.min, r.extent)]]

    def issue(self, k_value: Any, stage: Any) -> Any:
        k = self.loop.loop_var
        bar = self.full(stage)
        boxes = [load.issue([substitute(r.min, [(k, k_value)]) for r in region.region], stage, bar)
                 for load, region in zip(self.loads, self.regions)]
        total = sum(load.bytes for load in self.loads)
        return seq([extern_call("tl_mbarrier_expect_tx", bar, total), *boxes])

    def _init(self) -> Any:
        s = tirx.Var("s", "int32")
        inits = seq([extern_call("tl_mbarrier_init", self.full(s), 1),
                     extern_call("tl_mbarrier_init", self.empty(s), self.threads)])
        return seq([unrolled(s, self.stages, inits), extern_call("tl_mbarrier_init_fence")])

    def _checks(self) -> Any:
        """Thread 0 checks the tiles' 1 KiB alignment once, where the tiles are allocated."""
        return tirx.IfThenElse(self.tid == 0, seq([
            extern_call("tl_check_swizzle_base", load.tile.new.access_ptr("r", offset=0, extent=1))
            for load in self.loads]), None)

    def prologue(self, specialized: bool) -> list[Any]:
        """Thread 0 initializes the barriers; a block barrier publishes them. Specialized:
        marked, so that SpecializeWarps keeps it ahead of the split into warp roles."""
        init = [tirx.IfThenElse(self.tid == 0, self._init(), None), block_barrier()]
        if specialized:
            return [tirx.AllocBuffer(self.barriers),
                    tirx.AttrStmt(tirx.IntImm("int32", 0), PROLOGUE_ATTR, self.threads, seq(init))]
        return [tirx.AllocBuffer(self.barriers), *init]

    def _consumer_loop(self, first_gemm: Any, rest: list[Any], at: int, refill: Any) -> Any:
        """Each iteration waits for its stage, runs its GEMMs and, after the first GEMM's
        wait (at most one wgmma group stays in flight), releases the stage of the previous
        iteration (``refill`` follows: the single issuer's next boxes)."""
        k = self.loop.loop_var
        previous = k - 1
        release = seq([tirx.IfThenElse(k > 0, extern_call("tl_mbarrier_arrive",
                                                          self.empty(tirx.floormod(previous, self.stages))), None),
                       refill])
        gemm = first_gemm(release)
        if gemm is not None:
            rest = [*rest[:at], gemm, *rest[at + 1:]]
            release = None
        wait = extern_call("tl_mbarrier_wait", self.full(tirx.floormod(k, self.stages)), self.parity(k))
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
            tirx.IfThenElse(k > 0, extern_call("tl_mbarrier_wait", self.empty(tirx.floormod(previous, self.stages)),
                                               self.parity(previous)), None),
            self.issue(nxt, tirx.floormod(nxt, self.stages))]), None)
        main = self._consumer_loop(first_gemm, rest, at, refill)
        return seq([*self.prologue(specialized=False), self._checks(), *issued, main,
                    extern_call("tl_wgmma_wait", 0), block_barrier()])

    def specialized(self, first_gemm: Any, rest: list[Any], at: int) -> Any:
        """A producer warp of its own issues every iteration's boxes as soon as its stage
        is released (the first ``stages`` at once); the consumers only wait and release.
        The producer's loop is marked for SpecializeWarps, which gives it the warp."""
        k, n = self.loop.loop_var, self.loop.extent
        pk = tirx.Var("k", "int32")
        wait = tirx.IfThenElse(pk >= self.stages, extern_call(
            "tl_mbarrier_wait", self.empty(tirx.floormod(pk, self.stages)), self.parity(pk - self.stages)), None)
        issue = substitute(self.issue(pk, tirx.floormod(pk, self.stages)), [(k, pk)])
        producer = tirx.For(pk, self.loop.min, substitute(n, [(k, pk)]), tirx.ForKind.SERIAL, seq([wait, issue]))
        marked = tirx.AttrStmt(tirx.IntImm("int32", 0), PRODUCER_ATTR, self.threads, producer)
        main = self._consumer_loop(first_gemm, rest, at, None)
        return seq([self._checks(), marked, main, extern_call("tl_wgmma_wait", 0), block_barrier()])


def free_vars(expr: Any) -> list[Any]:
    found: list[Any] = []
    tvm_ffi.structural_walk(expr, (tirx.Var, found.append))
    return found


def top_level(body: Any, loop: Any) -> bool:
    """Whether ``loop`` is reached from ``body`` through sequences, attributes and
    allocations alone (no enclosing loop, condition or binding)."""
    if body.same_as(loop):
        return True
    if isinstance(body, tirx.SeqStmt):
        return any(top_level(s, loop) for s in body)
    if isinstance(body, tirx.AttrStmt):
        return top_level(body.body, loop)
    return False
