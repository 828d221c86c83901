"""The shared operands of a tensor-core GEMM, for the tensor-core pass: which regions
ldmatrix can read in place (a whole tile, or a slice such as upstream's FlashMLA passes),
where each of their elements is, and which tiles must keep the layout the kernel declared
(``SharedTile.raw``: the kernel names their storage by address itself)."""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tilelang.plugin import dtype_bytes, is_full_region, matrix_extents
from tvm import tirx

from .cp_async import SHARED_SCOPES, SharedTile
from .mma_layout import CHUNK_BYTES


def matrix_slice(region: Any, analyzer: Any) -> bool:
    """Whether a GEMM operand region is a matrix ldmatrix can read: the whole buffer, or a
    slice of a shared buffer (upstream's ``Q_shared[:, 0:256]``, ``KV_shared[stage, :,
    256:512]``) whose leading axes are single indices and whose rows start on 16 bytes."""
    if is_full_region(region):
        return True
    if matrix_extents(region) is None or region.source.scope() not in SHARED_SCOPES:
        return False
    chunk = CHUNK_BYTES // dtype_bytes(region.source.dtype)
    return analyzer.can_prove(tirx.floormod(region.region[-1].min, chunk) == 0) and \
        analyzer.can_prove(tirx.floormod(region.source.shape[-1], chunk) == 0)


def _in_tile(tile: SharedTile | None, region: Any, at: Any) -> Any:
    """(row, col) of a GEMM operand's matrix -> ``at(row, col, lead)`` in its tile (offset
    by the region's corner; a raw tile's leading indices are the region's)."""
    if tile is None:
        return None
    if not tile.raw:
        return lambda row, col: at(row, col, ())
    mins = [r.min for r in region.region]
    lead, row0, col0 = mins[:-2], mins[-2], mins[-1]
    return lambda row, col: at(row + row0, col + col0, lead)


def addresser(tile: SharedTile | None, region: Any) -> Any:
    """(row, col) of a GEMM operand's matrix -> the address in its tile (ldmatrix's)."""
    return _in_tile(tile, region, lambda row, col, lead: tile.address(row, col, lead=lead))


def element_reader(tile: SharedTile | None, region: Any) -> Any:
    """(row, col) of a GEMM operand's matrix -> a load of that element of its tile (for
    operands read an element at a time)."""
    return _in_tile(tile, region, lambda row, col, lead: tirx.BufferLoad(tile.new, tile.indices(row, col, lead=lead)))


def addressed_buffers(body: Any) -> list[Any]:
    """The buffers whose storage a kernel names by address (T.access_ptr, a view's data),
    which a new layout would not follow."""
    found: list[Any] = []
    tvm_ffi.structural_walk(body, (tvm.ir.Call, lambda c: found.append(c.args[0])
                                   if str(getattr(c.op, "name", "")) == "tirx.buffer_data" else None))
    return found
