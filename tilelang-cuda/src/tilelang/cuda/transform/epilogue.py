"""Shared tiles of a GEMM's epilogue, for the tensor-core pass.

Upstream's kernels write C through a shared tile (``T.copy(C_local, C_shared);
T.copy(C_shared, C[...])``): full 16-byte rows to global memory. Two things follow here:

* **Padded rows.** Each thread writes pairs of C's columns (its accumulator layout) from 8
  rows at once; rows whose length is an even number of 16-byte chunks put those 8 rows in
  the same 4 banks (an 8-way conflict per store). The tile gets the padded row of the
  operand tiles (mma_layout.padded_row: an odd chunk count), which both copies follow.
* **Swizzled operands beside it.** wgmma's swizzled operand tiles need every stage on a
  1 KiB boundary of shared address; merging places buffers at sums of their sizes in the
  dynamic buffer (which starts on 1 KiB), so other buffers whose sizes are whole KiB keep
  that (and the kernel checks the boundary at run time: a trap, never a mis-swizzled tile).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tvm
import tvm_ffi
from tilelang.plugin import dtype_bytes, is_full_region, static_ints
from tvm import tirx
from tvm.ir import TensorLoad

from .mma_layout import padded_row

SHARED_SCOPES = ("shared", "shared.dyn")
SWIZZLE_BASE_BYTES = 1024  # the 128-byte swizzle repeats every 1 KiB of shared address


def epilogue_tiles(body: Any, ops: list[tuple[str, Any]], is_accumulator: Callable[[Any], bool]) -> list[Any]:
    """2-D shared tiles that a T.copy fills, whole, from an accumulator and that nothing
    but T.copy touches (no element access in a T.Parallel nest, no other tile op)."""
    found: list[Any] = []
    for name, args in ops:
        if name != "copy" or not is_accumulator(args[0].source):
            continue
        dst = args[1].source
        shape = static_ints(dst.shape)
        if dst.scope() not in SHARED_SCOPES or shape is None or len(shape) != 2 or not is_full_region(args[1]):
            continue
        uses = [n for n, a in ops if any(isinstance(r, tvm.ir.TensorRegion) and r.source.same_as(dst) for r in a)]
        if all(n == "copy" for n in uses) and not _element_accesses(body, dst) and \
                not any(b.same_as(dst) for b in found):
            found.append(dst)
    return found


def others_keep_swizzle_alignment(shared: list[Any], operands: list[Any], padded: list[Any]) -> bool:
    """Whether every buffer of ``shared`` but ``operands`` has a static size in whole KiB
    (``padded`` ones at their padded row)."""
    for buffer in shared:
        if any(b.same_as(buffer) for b in operands):
            continue
        shape = static_ints(buffer.shape)
        if shape is None:
            return False
        if any(b.same_as(buffer) for b in padded):
            shape = [*shape[:-1], padded_row(shape[-1], dtype_bytes(buffer.dtype))]
        size = dtype_bytes(buffer.dtype)
        for d in shape:
            size *= d
        if size % SWIZZLE_BASE_BYTES:
            return False
    return True


def _element_accesses(body: Any, buffer: Any) -> list[Any]:
    found: list[Any] = []

    def visit(node: Any) -> None:
        source = node.buffer if isinstance(node, tirx.BufferStore) else node.source
        if isinstance(source, tirx.Buffer) and source.same_as(buffer):
            found.append(node)

    tvm_ffi.structural_walk(body, [(tirx.BufferStore, visit), (TensorLoad, visit)])
    return found
