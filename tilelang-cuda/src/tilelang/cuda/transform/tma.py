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
from tilelang.plugin import dtype_bytes, extern_call, seq
from tvm import tirx

from .mma_layout import SwizzledLayout

DISABLE_TMA_CONFIG = "tl.disable_tma_lower"
BOX_MAX = 256  # a TMA box is at most 256 elements along every dimension
MAX_RANK = 4  # tl_device.h has tl_tma_load_{2,3,4}d
SWIZZLE = {32: 1, 64: 2, 128: 3}  # CUtensorMapSwizzle per swizzle width in bytes
L2_PROMOTION_128B = 2  # CU_TENSOR_MAP_L2_PROMOTION_L2_128B


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
        layout, rank = self.layout, self.rank
        shape = list(buffer.shape)
        dims = [tirx.Cast("uint64", d) for d in reversed(shape)]  # innermost first
        strides, stride = [], tirx.IntImm("uint64", dtype_bytes(buffer.dtype))
        for extent in reversed(shape[1:]):  # byte strides of every dimension but the innermost
            stride = stride * tirx.Cast("uint64", extent)
            strides.append(stride)
        box = [1] * rank
        box[rank - 1 - self.col_axis] = layout.width // layout.dtype_bytes
        box[rank - 1 - self.row_axis] = layout.rows
        encode = tirx.tensormap_encode_tiled(
            self.var, buffer.data, *dims, *strides, *[tirx.IntImm("uint32", b) for b in box],
            *[tirx.IntImm("uint32", 1)] * rank, descriptor_dtype=str(buffer.dtype), rank=rank,
            swizzle=SWIZZLE[layout.width], l2_promotion=L2_PROMOTION_128B)
        return [tirx.Bind(self.var, tirx.tvm_stack_alloca("tensormap", 1)), tirx.Evaluate(encode)]

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
