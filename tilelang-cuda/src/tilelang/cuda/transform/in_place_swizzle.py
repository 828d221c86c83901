"""Tiles kept as declared, swizzled in place, for the tensor-core pass.

A tile the kernel addresses itself (upstream's FlashMLA fills its KV ring with
``T.ptx_cp_async`` at addresses it computes) or reads through slices keeps its declared
shape (``SharedTile.raw``). With rows of a multiple of 128 bytes (FlashMLA's 1152), the
eight rows an ldmatrix reads at one column all fall in the same banks: on the H200, 88% of
``example_mla_decode_ws``'s shared-memory wavefronts were bank conflicts (ncu).

Swizzling in place keeps the shape and the size: within every 128-byte segment of a row,
16-byte chunk ``c`` is stored at chunk ``c ^ (row % 8)``. The eight rows of an ldmatrix
then read eight different chunks of their segments, so eight different groups of banks.
A 16-byte chunk stays whole, so everything that touches the tile can follow:

* ldmatrix addresses (``SharedTile.indices``),
* plain loads and stores of the tile, and T.copy into or out of it (lowered by the pass
  itself, each element at its new place),
* the kernel's own vector accesses through a view of the tile's storage (what
  ``T.ptx_cp_async`` becomes): a vector of at most one chunk at an offset the pass can
  prove is a whole chunk moves to its chunk's new place.

A tile qualifies only when every reference to it (or to its storage) is one of those;
anything else (an address passed to a call, a tile op other than T.copy or a GEMM on tensor
cores -- a GEMM left to the shared SIMT lowering reads the declared places --, a vector
not provably within one chunk) leaves it as declared. Mixed into the pass's kernel state;
uses its ``func``, ``analyzer``, ``tiles``, ``accumulators`` and ``_find``, and keeps the
views of swizzled tiles in ``in_place_views``.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tilelang.plugin import dtype_bytes, static_ints
from tvm import tirx

from .buffer_uses import buffer_uses
from .epilogue import others_keep_swizzle_alignment
from .explicit_sync import TMA_COPY, op_name
from .tma_copy import IN_PLACE_SWIZZLE_ATTR

SEGMENT_BYTES = 128  # the 32 banks of 4 bytes
CHUNK_BYTES = 16  # an ldmatrix row, a cp.async of 16 bytes
CHUNKS = SEGMENT_BYTES // CHUNK_BYTES


def swizzled_column(row: Any, col: Any, elems_per_chunk: int) -> Any:
    """Where column ``col`` of row ``row`` lives in a tile swizzled in place."""
    chunk = tirx.floordiv(col, elems_per_chunk)
    within = tirx.floormod(chunk, CHUNKS)
    moved = tirx.bitwise_xor(within, tirx.floormod(row, CHUNKS))
    return (chunk - within + moved) * elems_per_chunk + tirx.floormod(col, elems_per_chunk)


class InPlaceSwizzle:
    """Chooses and applies the in-place swizzle (see the module docstring)."""

    def _views_of(self, buffer: Any) -> list[tuple[Any, Any]]:
        """(view, its storage expression) of every buffer declared over ``buffer``'s storage
        (T.ptx_cp_async's flat views: a DeclBuffer whose data is ``tirx.buffer_data(buffer)``)."""
        found: list[tuple[Any, Any]] = []

        def visit(node: Any) -> None:
            data = node.data
            if isinstance(data, tvm.ir.Call) and str(getattr(data.op, "name", "")) == "tirx.buffer_data" and \
                    data.args[0].same_as(buffer) and not node.buffer.same_as(buffer):
                found.append((node.buffer, data))

        tvm_ffi.structural_walk(self.func.body, (tirx.DeclBuffer, visit))
        return found

    def _chunk_vector(self, index: Any, chunk: int) -> bool:
        """A view access the swizzle can move: one element, or a vector of at most one chunk
        that starts on a chunk."""
        if isinstance(index, tirx.Ramp):
            lanes = int(index.lanes) if isinstance(index.lanes, int) else int(index.lanes.value)
            return lanes <= chunk and isinstance(index.stride, tirx.IntImm) and index.stride.value == 1 and \
                self.analyzer.can_prove(tirx.floormod(index.base, chunk) == 0)
        return True

    def can_swizzle_in_place(self, tile: Any) -> bool:
        """``tile`` (raw) is touched only in ways that can follow the swizzle."""
        buffer = tile.old
        shape = static_ints(buffer.shape)
        elem = dtype_bytes(buffer.dtype)
        if shape is None or len(shape) < 2 or elem != 2 or (shape[-1] * elem) % SEGMENT_BYTES:
            return False
        chunk = CHUNK_BYTES // elem
        declared = self._views_of(buffer)

        def follows(use: Any) -> bool:
            if use.kind == "region" and use.op == TMA_COPY:
                return use.position == 1 and self._tma_box_swizzles(tile, use.node)
            if use.kind == "region" and use.op == "gemm":  # an operand of a GEMM on tensor cores
                # (a GEMM left to the shared SIMT lowering reads the tile at its declared places)
                return use.buffer.same_as(buffer) and use.position < 2 and \
                    self._find(use.call.args[2].source, self.accumulators) is not None
            if use.kind == "region":  # the tile's own T.copy, lowered here
                return use.buffer.same_as(buffer) and use.op == "copy"
            if use.kind == "address":  # the storage named anywhere but as a view's data: passed on
                return any(data.same_as(use.node) for _, data in declared)
            return use.buffer.same_as(buffer) or self._chunk_vector(use.node.indices[-1], chunk)

        return all(follows(u) for u in buffer_uses(self.func.body, [buffer, *(v for v, _ in declared)]))

    def _tma_box_swizzles(self, tile: Any, region: Any) -> bool:
        """A T.tma_copy into ``region`` can write the tile swizzled in place: with rows of
        exactly 128 bytes, TMA's 128-byte swizzle moves chunk c of a box's row r to
        c ^ (r % 8), as this swizzle does, provided the box starts on 1 KiB of shared
        address (the hardware swizzles address bits). So: whole rows, in whole groups of 8,
        of a tile whose every stage is whole KiB and that starts on 1 KiB (every other
        shared allocation of the block is whole KiB: tl_check_swizzle_base checks it when
        the kernel runs), and a host that encodes the tensor map."""
        shape = static_ints(tile.old.shape)
        extents = static_ints([r.extent for r in region.region])
        if not self.tensor_maps or extents is None or shape[-1] * dtype_bytes(tile.old.dtype) != SEGMENT_BYTES:
            return False
        if shape[-2] % CHUNKS or extents[-2:] != shape[-2:] or any(e != 1 for e in extents[:-2]):
            return False
        if not all(isinstance(r.min, tirx.IntImm) and r.min.value == 0 for r in region.region[-2:]):
            return False
        padded = [t.old for t in self.tiles.values() if not (t.raw or t.stages or t.core)]  # at their padded rows
        return others_keep_swizzle_alignment(self._shared_allocations(), [tile.old], padded)

    def mark_in_place_tma(self, stmt: Any) -> Any:
        """A T.tma_copy into a tile swizzled in place, marked for LowerTmaCopies to write
        with TMA's 128-byte swizzle (_tma_box_swizzles)."""
        if op_name(stmt.value) != TMA_COPY:
            return stmt
        tile = self._find(stmt.value.args[1].source, self.tiles)
        if tile is None or not tile.in_place:
            return stmt
        return tirx.AttrStmt(tile.old.data, IN_PLACE_SWIZZLE_ATTR, tirx.IntImm("int32", SEGMENT_BYTES), stmt)

    def in_place_indices(self, tile: Any, indices: list[Any]) -> list[Any]:
        """A swizzled tile's indices of a logical element (lead..., row, col)."""
        chunk = CHUNK_BYTES // dtype_bytes(tile.old.dtype)
        return [*indices[:-1], swizzled_column(indices[-2], indices[-1], chunk)]

    def in_place_view_index(self, tile: Any, index: Any) -> Any:
        """A view's flat index (a scalar, or a vector within one chunk) at its new place."""
        shape = static_ints(tile.old.shape)
        chunk = CHUNK_BYTES // dtype_bytes(tile.old.dtype)
        base = index.base if isinstance(index, tirx.Ramp) else index
        cols, rows = shape[-1], shape[-2]
        row = tirx.floormod(tirx.floordiv(base, cols), rows)
        col = tirx.floormod(base, cols)
        moved = self.analyzer.simplify(base - col + swizzled_column(row, col, chunk))
        if isinstance(index, tirx.Ramp):
            return tirx.Ramp(moved, index.stride, index.lanes)
        return moved

    def tile_of_view(self, buffer: Any) -> Any:
        """The swizzled tile whose storage ``buffer`` (a view) names, or None."""
        if self.in_place_views is None:
            self.in_place_views = [(view, tile) for tile in self.tiles.values() if tile.in_place
                                   for view, _ in self._views_of(tile.old)]
        return next((tile for view, tile in self.in_place_views if view.same_as(buffer)), None)


__all__ = ["InPlaceSwizzle", "swizzled_column"]
