"""Occupancy for the tensor-core pass: how many blocks should share an SM (the launch
bounds' second number, which makes ptxas keep every thread within its share of the
registers) and whether mma.sync fragments are double-buffered. Mixed into the pass's kernel
state; uses its ``accumulators``, ``rows``, ``register_groups``, ``roles``, ``wgmma``,
``tensor_maps``, ``pipelined``, ``block_threads`` and ``_shared_buffers``, and sets
``min_blocks``, ``double_buffer`` and ``smem_per_block``."""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tilelang.plugin import dtype_bytes, pass_config, static_ints
from tvm import tirx

from .cp_async import SMEM_PER_SM
from .tma import PRODUCER_THREADS

MIN_BLOCKS_ATTR = "tirx.launch_bounds_min_blocks_per_sm"  # TVM prints __launch_bounds__(T, n)
SMEM_RESERVED_PER_BLOCK = 1024  # the driver reserves 1 KiB per resident block
REGISTERS_PER_SM = 65536
WGMMA_MIN_REGISTERS = 64
MIN_BLOCKS_CONFIG = "tl.min_blocks_per_sm"


class OccupancyPlan:
    """Plans the blocks per SM and writes them into the launch bounds (see the module docstring)."""

    def _plan_occupancy(self) -> None:
        """How many blocks should share an SM, and whether fragments are double-buffered.

        mma.sync keeps the accumulators and the A/B fragments in registers, so registers
        bound the warps an SM holds (ncu on the H200: 2 warps per scheduler leave the
        tensor pipe ~40% idle on fixed-latency waits). Plan for the most blocks (2-4) that
        shared memory allows and whose register budget (65536 / (blocks x threads)) fits
        the estimated need (accumulators + fragments + 16 for addresses and indices: ptxas
        spills the 64x64 warp tile's single-buffered schedule at 168 registers, so that
        estimate keeps it at two blocks); fragment double-buffering is dropped when that
        buys a block.
        ``tl.min_blocks_per_sm`` (a pass config) overrides the block count."""
        layouts = [acc.layout for acc in self.accumulators.values()]
        acc = max(l.per_thread for l in layouts)
        if self.rows or self.roles:  # a row family keeps all of its fragments live at once;
            # so does every thread the accumulators of every warp role that do not share an array
            acc = sum(max(a.layout.per_thread * dtype_bytes(a.old.dtype) // 4 for a in group)
                      for group in self.register_groups)
            acc += sum(r.per_thread for r in self.rows.values())
        # wgmma reads A and B from shared memory: no fragments; but ptxas wants at least
        # WGMMA_MIN_REGISTERS for a wgmma (it refused a 64 x 64 tile's at 56)
        frag = 0 if self.wgmma else max(l.mt * 4 + l.nt * 2 for l in layouts)
        # addresses and indices: 16 registers; a schedule of the user's own roles keeps more of
        # its own state live around the GEMM (ptxas: 94 for upstream's copy_gemm_0_1 with 64
        # accumulators; it spilled 1.3 KiB at 80)
        overhead = 32 if self.roles else 16
        if self.wgmma:
            acc = max(acc, WGMMA_MIN_REGISTERS - overhead)
        smem = 0
        for buffer in self._shared_buffers():
            shape = static_ints(buffer.shape)
            if shape is None:
                return
            size = dtype_bytes(buffer.dtype)
            for d in shape:
                size *= d
            smem += size + SMEM_RESERVED_PER_BLOCK
        self.smem_per_block = smem

        # a TMA ring may get a producer warp (warp_specialize.py): its registers count too
        threads = self.block_threads + (PRODUCER_THREADS if self.wgmma and self.tensor_maps and self.pipelined else 0)

        def budget(blocks: int) -> int:
            return min(255, REGISTERS_PER_SM // (blocks * threads)) // 8 * 8

        forced = pass_config(MIN_BLOCKS_CONFIG)
        candidates = [int(forced)] if forced else [4, 3, 2]
        for blocks in candidates:
            if not forced and blocks * smem > SMEM_PER_SM:
                continue
            if acc + 2 * frag + overhead <= budget(blocks):
                self.min_blocks, self.double_buffer = blocks, True
                return
            if acc + frag + overhead <= budget(blocks) or forced:
                self.min_blocks, self.double_buffer = blocks, False
                return

    def _launch_bounds(self, body: Any) -> Any:
        if not self.min_blocks or self.min_blocks < 2:
            return body

        def on_attr(stmt: Any) -> Any:
            if stmt.attr_key == "thread_extent" and stmt.node.thread_tag == "threadIdx.x":
                hint = tirx.AttrStmt(tirx.IntImm("int32", 0), MIN_BLOCKS_ATTR,
                                     tirx.IntImm("int32", self.min_blocks), stmt.body)
                return tirx.AttrStmt(stmt.node, stmt.attr_key, stmt.value, hint)
            return stmt

        return tvm_ffi.structural_map(body, (tirx.AttrStmt, on_attr), order="pre")


__all__ = ["MIN_BLOCKS_ATTR", "MIN_BLOCKS_CONFIG", "SMEM_RESERVED_PER_BLOCK", "OccupancyPlan"]
