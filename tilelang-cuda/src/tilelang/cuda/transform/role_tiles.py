"""The user's own warp roles (``T.ws``, thread-range ifs) in the tensor-core pass: wgmma on
the tiles they fill, and one register array for the accumulators of different roles.

A warp-specialized kernel schedules itself: a producer role fills shared tiles with
``T.tma_copy`` and arms mbarriers, consumer roles wait on them and run ``T.gemm``. Upstream's
examples/warp_specialize GEMMs write it so, with a tile (``A_shared``) or a ring of them
(``A_shared[ko % 2, :, :]``). Such tiles can take wgmma's swizzled layout, because a TMA
box with the same swizzle mode writes exactly that layout (tma.py): the copy stays one
instruction per column block, and the GEMM reads the tile through descriptors.

A tile qualifies when the kernel touches it only as a whole: T.tma_copy writes it, GEMMs
read it (a ring ``A_shared[ko % 2, :, :]`` is a 2-d tile per stage by then:
explicit_sync._split_stages). The kernel's mbarriers order the boxes and the GEMM (TMA and
wgmma both work through the async proxy), so the GEMM adds no barrier of its own. A whole
tile that T.copy alone fills takes wgmma too (wgmma.py: lowered into the layout, fenced,
with a barrier of the role). Any other access (a plain load or store, a slice, an address)
keeps the tile as declared and the kernel on mma.sync.

Accumulators that only disjoint roles touch (upstream's copy_gemm_0_1 gives each of its two
consumer warpgroups a C of its own, allocated at the top of the kernel) share one register
array: each thread holds its own role's C in it. Registers are allocated per thread for
the whole kernel, so two arrays would cost every thread both (ptxas cannot see that a
thread takes one branch alone): 128 accumulator registers instead of 64 there.

Mixed into the pass's kernel state; uses its ``func``, ``tid``, ``block_threads``,
``analyzer``, ``host_prologue``, ``tiles``, ``accumulators`` and ``_find``, and keeps the
tensor maps it made in ``role_maps``.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tilelang.plugin import extern_call, is_full_region, seq, walk_thread_ranges
from tvm import tirx
from tvm.ir import TensorLoad
from tvm_ffi.structural import WalkResult

from .buffer_uses import buffer_uses
from .explicit_sync import TMA_COPY, op_name
from .mma_layout import SwizzledLayout
from .tma import BOX_MAX, MAX_RANK, TensorMapLoad, wide_axes


class RoleTiles:
    """The user-scheduled half of the wgmma choice (see the module docstring)."""

    def tma_copies_into(self, buffer: Any) -> list[Any]:
        """The (global, shared, barrier) arguments of every T.tma_copy into ``buffer``."""
        found: list[Any] = []

        def visit(node: Any) -> None:
            if op_name(node.value) == TMA_COPY and node.value.args[1].source.same_as(buffer):
                found.append(node.value.args)

        tvm_ffi.structural_walk(self.func.body, (tirx.Evaluate, visit))
        return found

    def filled_by_tma_alone(self, buffer: Any) -> bool:
        """The kernel touches the 2-d tile ``buffer`` only as a whole: T.tma_copy writes
        it, GEMMs read it."""
        uses = buffer_uses(self.func.body, [buffer])
        return len(buffer.shape) == 2 and any(u.op == TMA_COPY for u in uses) and all(
            u.kind == "region" and is_full_region(u.node) and
            (u.op == "gemm" and u.position < 2 or u.op == TMA_COPY and u.position == 1) for u in uses)

    def boxes_fit(self, buffer: Any, layout: SwizzledLayout) -> bool:
        """Every T.tma_copy into ``buffer`` reads a dense 2-d to 4-d global tensor, its rows
        and columns those of the tile, in boxes of the swizzled layout."""
        if layout.rows > BOX_MAX or layout.width // layout.dtype_bytes > BOX_MAX:
            return False
        for src, dst, _ in self.tma_copies_into(buffer):
            g = src.source
            axes = wide_axes(src)
            if not 2 <= len(g.shape) <= MAX_RANK or list(g.strides) or len(axes) != 2 or \
                    str(g.dtype) != str(buffer.dtype):
                return False
            extents = [self.analyzer.simplify(src.region[a].extent) for a in axes]
            if [getattr(e, "value", None) for e in extents] != [int(d.value) for d in buffer.shape]:
                return False
        return True

    def lower_tma_copy(self, stmt: Any) -> Any:
        """A T.tma_copy into a swizzled tile: the elected thread makes the
        barrier expect the tile's bytes (no arrival: the role's threads arrive themselves,
        as tma_copy.py's copies do) and issues one box per column block. The tensor map
        is encoded once by the host code, swizzled as the tile."""
        if op_name(stmt.value) != TMA_COPY:
            return stmt
        src, dst, barrier = stmt.value.args
        tile = self._find(dst.source, self.tiles)
        if tile is None or not tile.tma_only:
            return stmt
        load = next((m for g, t, m in self.role_maps if g.same_as(src.source) and t is tile), None)
        if load is None:
            axes = wide_axes(src)
            same = [g for g, _, _ in self.role_maps if g.same_as(src.source)]
            suffix = f"_{len(same)}" if same else ""
            var = tirx.Var(f"{src.source.name}_swizzled_map{suffix}", tvm.ir.PointerType(tirx.TensorMapType()))
            load = TensorMapLoad(var, tile, axes[0], axes[1], len(src.source.shape))
            self.role_maps.append((src.source, tile, load))
            self.host_prologue.extend(load.encode(src.source))
        return seq([extern_call("tl_mbarrier_expect_tx_no_arrive", barrier, load.bytes),
                    extern_call("tl_check_swizzle_base", tile.new.access_ptr("r", offset=0, extent=1)),
                    load.issue([r.min for r in src.region], 0, barrier)])

    def accumulator_groups(self) -> list[list[Any]]:
        """The accumulators (Accumulator records) as groups that share one register array:
        every access of each one lies in a role (a thread range) disjoint from the others'
        in its group, and all of them are allocated at the kernel's top level (outside
        loops and branches, so one allocation serves the group). A group of one otherwise."""
        reach: dict[int, set[Any]] = {}  # accumulator handle -> the thread ranges reaching its accesses
        allocated_in_block: set[int] = set()

        def accumulator(node: Any) -> Any:
            buffer = None
            if isinstance(node, tirx.BufferStore):
                buffer = node.buffer
            elif isinstance(node, (TensorLoad, tvm.ir.TensorRegion)):
                buffer = node.source
            elif isinstance(node, tirx.AllocBuffer):
                buffer = node.buffer
            return self._find(buffer, self.accumulators) if isinstance(buffer, tirx.Buffer) else None

        def visit(node: Any, threads: Any) -> None:
            acc = accumulator(node)
            if acc is not None and not isinstance(node, tirx.AllocBuffer):
                reach.setdefault(acc.old.__chandle__(), set()).add(threads)

        walk_thread_ranges(self.func.body, self.tid, self.block_threads, visit)

        def top_level(node: Any) -> Any:  # allocations outside every loop and branch
            if isinstance(node, (tirx.For, tirx.IfThenElse, tirx.While)):
                return WalkResult.SKIP
            acc = accumulator(node)
            if acc is not None and isinstance(node, tirx.AllocBuffer):
                allocated_in_block.add(acc.old.__chandle__())
            return WalkResult.ADVANCE

        tvm_ffi.structural_walk(self.func.body, top_level, order="pre")
        groups: list[list[Any]] = []
        homes: list[list[tuple[int, int]] | None] = []  # each group's roles (None: a group of one)
        for acc in self.accumulators.values():
            ranges = reach.get(acc.old.__chandle__(), set())
            home = next(iter(ranges)) if len(ranges) == 1 and None not in ranges else None
            if home == (0, self.block_threads) or acc.old.__chandle__() not in allocated_in_block:
                home = None
            for group, group_homes in zip(groups, homes):
                if home is not None and group_homes is not None and str(group[0].old.dtype) == str(acc.old.dtype) \
                        and all(home[1] <= lo or hi <= home[0] for lo, hi in group_homes):
                    group.append(acc)
                    group_homes.append(home)
                    break
            else:
                groups.append([acc])
                homes.append([home] if home is not None else None)
        return groups


__all__ = ["RoleTiles"]
