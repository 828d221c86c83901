"""Tiles for any loop nest of spatial and reduction axes — not upstream's roller.

A ``TileProblem`` is what the search reads of a computation: the extents of its spatial
axes (the output's) and reduction axes, and for each buffer it reads or writes, which axes
index each of its dimensions. The footprint of a tile on a buffer is, per dimension, the
span its axes cover (``sum(tile - 1) + 1``, unit strides assumed), multiplied out.

The search enumerates power-of-two block tiles over the spatial axes, a reduction step over
the innermost reduction axis, elements per thread and threads per block (threads that do
not fit the spatial tile split the reduction), keeps those that fit the device (staged
inputs in shared memory / the L2 of a core, registers, threads per SM) and ranks them:

    traffic of a block  = bytes of each read footprint over the whole reduction + output tile
    work of a block     = points of the tile * reduction length
    time of a block     = max(traffic / bytes_per_clock, work / fma_per_clock) + overhead
    time of the kernel  = waves * blocks_per_sm * time of a block (+ a share not hidden
                          when a block's threads idle on a split reduction)

with waves = ceil(blocks / (SMs * blocks_per_sm)) (the device's rates per SM or core,
``TileDevice``; 80 SMs for a description without a device), divided by the share of the
SM's threads the resident blocks occupy (GPU). It ranks tiles, it does not predict time: measure the candidates
(``tilelang.autotune``). On a CPU (a warp of one) a block is one thread-pool task: no
threads, and its vector width is the SIMD width.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import product
from typing import Any

from ..hint import Hint
from .matmul import dtype_bytes

_MAX_BLOCK_POINTS = 4096  # output points per block
_MAX_POINTS_PER_THREAD = 32  # accumulators a thread keeps in registers
_THREADS = (32, 64, 128, 256, 512)
_BUSY_THREADS = 1024  # threads per SM that keep its warp schedulers issuing (GPU)
NOMINAL_SMS = 80  # a description without a device (no SM count): rank for a GPU of this size


@dataclass(frozen=True)
class Access:
    """One buffer a computation reads or writes: ``dims[d]`` are the axes (indices into
    spatial + reduction axes) that index its dimension ``d``."""

    name: str
    dtype: str
    dims: tuple[tuple[int, ...], ...]

    @property
    def bytes(self) -> int:
        return dtype_bytes(self.dtype)

    def footprint(self, tile: list[int]) -> int:
        """Elements of this buffer a tile (one extent per axis) touches."""
        return math.prod(sum(tile[a] - 1 for a in axes) + 1 for axes in self.dims)


@dataclass(frozen=True)
class TileProblem:
    """A loop nest: spatial extents (the output's axes, outermost first), reduction extents,
    the buffers read and written."""

    spatial: tuple[int, ...]
    reduce: tuple[int, ...] = ()
    reads: tuple[Access, ...] = ()
    writes: tuple[Access, ...] = ()
    name: str = "main"
    tags: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def axes(self) -> int:
        return len(self.spatial) + len(self.reduce)


def _powers(limit: int, cap: int) -> list[int]:
    top = min(cap, 1 << max(0, limit - 1).bit_length())
    return [1 << i for i in range(top.bit_length())]


def _block_tiles(spatial: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Power-of-two tiles, the innermost axis widest: every tile up to 4096 points, outer
    axes at most 64 wide."""
    choices = [_powers(e, 64) for e in spatial[:-1]] + [_powers(spatial[-1], 1024)] if spatial else [[]]
    return [t for t in product(*choices) if math.prod(t) <= _MAX_BLOCK_POINTS]


def _split_threads(tile: tuple[int, ...], step: int, count: int) -> list[int] | None:
    """``count`` threads over the tile, innermost axis first (``step`` elements each along it);
    None when they do not divide it."""
    threads, left = [1] * len(tile), count
    for axis in reversed(range(len(tile))):
        room = tile[axis] // (step if axis == len(tile) - 1 else 1)
        if room == 0:
            return None
        take = math.gcd(room, left)
        threads[axis], left = take, left // take
    return threads if left == 1 else None


def default_hints(problem: TileProblem, arch: Any, topk: int = 10) -> list[Hint]:
    """Up to ``topk`` configurations for ``problem`` on ``arch``, best first."""
    spatial, reduce = problem.spatial, problem.reduce
    out_bytes = max((w.bytes for w in problem.writes), default=4)
    in_bytes = max((r.bytes for r in problem.reads), default=out_bytes)
    vector = max(1, min(arch.vector_bytes // in_bytes, 8 if arch.warp_size > 1 else 64))
    reduce_length = math.prod(reduce)
    sms = arch.compute_max_core or NOMINAL_SMS
    cpu = arch.warp_size == 1
    rsteps = _powers(reduce[-1], 256) if reduce else [1]
    hints = []
    for tile in _block_tiles(spatial):
        points = math.prod(tile)
        blocks = math.prod(math.ceil(e / t) for e, t in zip(spatial, tile))
        for rstep in rsteps:
            rtile = [*([1] * (len(reduce) - 1)), rstep] if reduce else []
            step_tile = [*tile, *rtile]
            staged = sum(r.footprint(step_tile) * r.bytes for r in problem.reads)
            if staged * (1 if cpu else 2) > arch.smem_cap:
                continue
            full = [*tile, *reduce]
            traffic = sum(r.footprint(full) * r.bytes for r in problem.reads) + points * out_bytes
            work = points * max(1, reduce_length)
            block_time = max(traffic / arch.bytes_per_clock, work / arch.fma_per_clock) + arch.block_overhead_clocks
            for threads, step in _thread_shapes(tile, rstep, bool(reduce), vector, cpu):
                total = math.prod(threads[0]) * math.prod(threads[1] or [1])
                per_thread = points // math.prod(threads[0])
                if per_thread > _MAX_POINTS_PER_THREAD and not cpu:
                    continue
                per_sm = max(1, min(arch.max_threads_per_sm // total, arch.smem_cap // max(staged, 1), 32))
                resident = min(per_sm, math.ceil(blocks / sms))  # blocks an SM runs at once
                waves = math.ceil(blocks / (sms * resident))
                # a split reduction combines partial sums: one round per halving
                combine = math.log2(threads[1][0]) * points / arch.fma_per_clock if threads[1] else 0.0
                # fewer threads than the SM's schedulers keep busy hide less latency
                occupancy = 1.0 if cpu else min(1.0, resident * total / _BUSY_THREADS)
                cost = waves * resident * (block_time + combine) / max(occupancy, 1 / 32)
                hints.append(Hint(
                    block=list(tile), thread=threads[0], rstep=rtile, reduce_thread=threads[1],
                    step=[*([1] * (len(tile) - 1)), step], smem_bytes=staged, cost=cost,
                    vectorize={a.name: min(vector, step if a in problem.writes else vector)
                               for a in (*problem.reads, *problem.writes)},
                    block_reduction_depth=threads[1][0] if threads[1] else None, arch=arch))
    # ties: more points per block (fewer, larger blocks), wider accesses, longer reduction
    # steps, then fewer threads
    hints.sort(key=lambda h: (h.cost, -math.prod(h.block), -h.step[-1] if h.step else 0,
                              -(h.rstep[-1] if h.rstep else 0), h.threads))
    return _distinct(hints, topk)


def _thread_shapes(tile: tuple[int, ...], rstep: int, has_reduce: bool, vector: int,
                   cpu: bool) -> list[tuple[tuple[list[int], list[int]], int]]:
    """((threads per spatial axis, threads splitting the reduction), elements per thread on
    the innermost axis) choices for one tile."""
    if cpu:
        step = min(vector, tile[-1]) if tile else 1
        return [(([1] * len(tile), []), step)]
    shapes = []
    for total, step in product(_THREADS, (1, 2, 4, 8)):
        if tile and step > tile[-1]:
            continue
        spatial_threads = min(total, math.prod(tile) // step)
        if spatial_threads == 0:
            continue
        split = total // spatial_threads
        if split > 1 and (not has_reduce or rstep % split or split * spatial_threads != total):
            continue
        threads = _split_threads(tile, step, spatial_threads)
        if threads is not None:
            shapes.append(((threads, [split] if split > 1 else []), step))
    return shapes


def _distinct(hints: list[Hint], topk: int) -> list[Hint]:
    seen, out = set(), []
    for hint in hints:
        key = (tuple(hint.block), tuple(hint.rstep), tuple(hint.thread), tuple(hint.reduce_thread), tuple(hint.step))
        if key not in seen:
            seen.add(key)
            out.append(hint)
        if len(out) == topk:
            break
    return out
