"""LowerTmaCopies: upstream's ``T.tma_copy`` (global tile -> shared tile, completing on an
mbarrier) as TMA boxes, after the tensor-core pass has laid the tiles out.

The elected thread (explicit_sync.py put each copy under its role's first thread) makes the
barrier expect the boxes' bytes (``mbarrier.expect_tx``, no arrival: the role's threads
arrive themselves) and issues the boxes (``cp.async.bulk.tensor``) from a tensor map the
host code encodes before the launch (CUDA Driver API, cuTensorMapEncodeTiled, unswizzled).
The tensor-core pass pads a GEMM operand's rows (ldmatrix bank conflicts); such a tile is
written with boxes as wide as its padded row: the extra columns land in the padding, which
nothing reads, and past the tensor's edge the hardware fills zeros.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tvm
import tvm_ffi
from tilelang.errors import CompileError
from tilelang.plugin import (
    ALIGNMENT_ATTR,
    dtype_bytes,
    extern_call,
    prim_func_pass,
    seq,
    substitute,
    tl_op_names_in,
)
from tvm import tirx

from .explicit_sync import TMA_COPY, is_zero, kernel_name, op_name
from .mma_layout import padded_row
from .tma import BOX_MAX, SWIZZLE, encode_tensor_map, wide_axes

# on a T.tma_copy: its tile is swizzled in place (in_place_swizzle.py), rows of this many bytes
IN_PLACE_SWIZZLE_ATTR = "tl.tma_swizzle_in_place"
# function attribute: names of the shared tiles whose rows the tensor-core pass padded
PADDED_TILES_ATTR = "tl.padded_tiles"
TMA_RANKS = (2, 3, 4)  # tl_device.h has tl_tma_load_{2,3,4}d (and 5d, for a row split in pieces)


@dataclass(frozen=True)
class _Box:
    """The tensor map of one global tensor for boxes of ``rows`` x ``width`` elements along
    global axes (row_axis, col_axis)."""

    var: Any
    tensor: Any
    row_axis: int
    col_axis: int
    rows: int
    width: int
    split: int | None = None  # the innermost axis in pieces of this many elements (tma.encode_tensor_map)
    swizzle: int | None = None  # TMA's swizzle of this many bytes (a tile swizzled in place), else none

    def encode(self) -> list[Any]:
        """Host statements: the map of this tensor (tma.py's encoder)."""
        return encode_tensor_map(self.var, self.tensor, (self.row_axis, self.rows), (self.col_axis, self.width),
                                 SWIZZLE[self.swizzle] if self.swizzle else None, split=self.split)


class _TmaCopies:
    def __init__(self, kernel: str, body: Any, padded: frozenset[str] = frozenset()) -> None:
        self.kernel = kernel
        self.padded = padded
        self.maps: list[_Box] = []
        self.analyzer = tvm.sym.analyzer.Analyzer()
        self.bound: list[tuple[Any, Any]] = []  # the kernel's scalar bindings (H1 = H0 + 64)
        tvm_ffi.structural_walk(body, (tirx.Bind, lambda b: self.bound.append((b.var, b.value))))

    def simplify(self, expr: Any) -> Any:
        """``expr`` with the kernel's bindings substituted (innermost first), simplified."""
        for var, value in reversed(self.bound):
            expr = substitute(expr, [(var, value)])
        return self.analyzer.simplify(expr)

    def fail(self, why: str) -> CompileError:
        return CompileError(f"kernel {self.kernel!r}: T.tma_copy {why}")

    def box(self, g: Any, row_axis: int, col_axis: int, rows: int, width: int, split: int | None = None,
            swizzle: int | None = None) -> _Box:
        for m in self.maps:
            if m.tensor.same_as(g) and (m.row_axis, m.col_axis, m.rows, m.width, m.split, m.swizzle) == \
                    (row_axis, col_axis, rows, width, split, swizzle):
                return m
        suffix = f"_{len([m for m in self.maps if m.tensor.same_as(g)])}" if \
            any(m.tensor.same_as(g) for m in self.maps) else ""
        var = tirx.Var(f"{g.name}_tensor_map{suffix}", tvm.ir.PointerType(tirx.TensorMapType()))
        self.maps.append(_Box(var, g, row_axis, col_axis, rows, width, split, swizzle))
        return self.maps[-1]

    def _split(self, g: Any, col_axis: int, col0: Any, width: int) -> int | None:
        """The widest piece (at most a box dimension, whole 16-byte units) that divides a
        row of ``width`` elements, the global rows and the first column, for a row too wide
        for one box dimension; None where there is none."""
        elem = dtype_bytes(g.dtype)
        if col_axis != len(g.shape) - 1:  # one more axis: at most 5-d, as lower() allows 4
            return None
        for piece in range(min(width, BOX_MAX), 0, -1):
            if width % piece or (piece * elem) % 16:
                continue
            if self.analyzer.can_prove(tirx.floormod(g.shape[-1], piece) == 0) and \
                    self.analyzer.can_prove(tirx.floormod(col0, piece) == 0):
                return piece
        return None

    def lower(self, src: Any, dst: Any, barrier: Any, swizzle: int | None = None) -> Any:
        """``swizzle``: the tile is swizzled in place over rows of this many bytes, which its
        boxes write with TMA's swizzle of that width (in_place_swizzle.py chose it)."""
        g, s = src.source, dst.source
        rank = len(g.shape)
        if rank not in TMA_RANKS or list(g.strides):
            raise self.fail(f"reads {g.name}, a {rank}-d tensor{' with strides' if list(g.strides) else ''}: TMA "
                            "boxes here read dense 2-d to 4-d tensors")
        axes = wide_axes(src)
        shape = [int(d.value) if isinstance(d, tirx.IntImm) else None for d in s.shape]
        if len(shape) == 1 and len(dst.region) > 1:  # re-laid out as wgmma core matrices
            raise self.fail(f"into {s.name}, a tile the tensor-core pass laid out for wgmma: TMA boxes here write "
                            "row-major tiles; set the pass config tl.disable_wgmma for this kernel")
        extents = [r.extent for r in dst.region]
        if len(axes) == 1 and axes[0] > 0:  # one row (upstream's A[pid, 0:K]): a tile of 1 x K
            axes = [axes[0] - 1, axes[0]]
        if len(axes) != 2 or None in shape or \
                any(not isinstance(r.extent, tirx.IntImm) or r.extent.value != 1 for r in dst.region[:-2]):
            raise self.fail(f"into {s.name}: the copy must be a 2-d tile (a slice of rows x columns of the global "
                            "tensor into the last two dimensions of the shared one) or one row of it")
        rows, cols = (int(extents[-2].value) if len(extents) > 1 else 1), int(extents[-1].value)
        src_extents = [self.simplify(src.region[a].extent) for a in axes]  # upstream's H0:H1, H1 = H0 + 64
        if [int(getattr(e, "value", -1)) for e in src_extents] != [rows, cols]:
            raise self.fail(f"from {g.name} into {s.name}: the global tile's rows x columns must match the shared "
                            f"tile's ({rows} x {cols})")
        width = shape[-1]  # the shared row, padding included (the tensor-core pass may have padded it)
        elem = dtype_bytes(s.dtype)
        padded = s.name in self.padded and width == padded_row(cols, elem)
        whole_rows = is_zero(dst.region[-1].min) and (width == cols or padded)
        if not whole_rows:  # a column slice of the shared rows: each row is a box of its own
            return self.lower_columns(src, dst, barrier, swizzle, axes, shape, rows)
        split = None
        if width > BOX_MAX and cols == width and str(s.dtype) == str(g.dtype):
            split = self._split(g, axes[1], self.simplify(src.region[axes[1]].min), width)
        if str(s.dtype) != str(g.dtype) or (width * elem) % 16 or (width > BOX_MAX and split is None):
            raise self.fail(f"into {s.name}: a box row is {width} {s.dtype} elements; TMA needs the global and "
                            f"shared dtypes to agree and a row of a multiple of 16 bytes, at most {BOX_MAX} elements "
                            "(or, for a wider row of a tile that is not padded, the last axis of a dense global "
                            "tensor in pieces that divide it)")
        per_box = next(r for r in range(min(rows, BOX_MAX), 0, -1) if rows % r == 0 and (not swizzle or r % 8 == 0))
        if swizzle and (width * elem != swizzle or split):
            raise self.fail(f"into {s.name}: a tile swizzled in place takes rows of {swizzle} bytes")
        tmap = self.box(g, axes[0], axes[1], per_box, width, split, swizzle)
        return self.issue(src, dst, barrier, axes, shape, tmap, rows, width, split, swizzle)

    def lower_columns(self, src: Any, dst: Any, barrier: Any, swizzle: int | None, axes: list[int],
                      shape: list[int], rows: int) -> Any:
        """A tile that fills some columns of the shared rows (upstream's ``KV_shared[:, j * 64:
        (j + 1) * 64]``): one box per row, ``cols`` wide, each landing at its row's offset. The
        boxes' shared addresses are 128-byte aligned when the first one is (checked as it runs)
        and the shared row is a multiple of 128 bytes (checked here)."""
        g, s = src.source, dst.source
        cols, width = int(dst.region[-1].extent.value), shape[-1]
        elem = dtype_bytes(s.dtype)
        where = f"into {s.name}[..., {dst.region[-1].min}:{dst.region[-1].min} + {cols}] of rows of {width}"
        if swizzle:
            raise self.fail(f"{where}: a tile swizzled in place is written whole rows at a time")
        if str(s.dtype) != str(g.dtype) or (cols * elem) % 16 or cols > BOX_MAX or (width * elem) % 128:
            raise self.fail(f"{where} {s.dtype} elements: a box per row needs the global and shared dtypes to agree, "
                            f"a slice of a multiple of 16 bytes and at most {BOX_MAX} elements, and shared rows of a "
                            "multiple of 128 bytes (each box lands on a 128-byte boundary); copy whole rows, or use "
                            "T.copy")
        tmap = self.box(g, axes[0], axes[1], 1, cols)
        return self.issue(src, dst, barrier, axes, shape, tmap, rows, cols, None, None)

    def issue(self, src: Any, dst: Any, barrier: Any, axes: list[int], shape: list[int], tmap: _Box, rows: int,
              width: int, split: int | None, swizzle: int | None) -> Any:
        """The expect-tx of the tile's bytes and its boxes of ``tmap.rows`` rows x ``width``
        elements, box j at shared row ``j * tmap.rows`` of the tile."""
        s = dst.source
        row = shape[-1]  # elements from one shared row to the next
        per_box = tmap.rows
        base = 0
        for index, extent in zip([r.min for r in dst.region], shape):
            base = base * extent + index
        calls = [extern_call("tl_mbarrier_expect_tx_no_arrive", barrier, rows * width * dtype_bytes(s.dtype))]
        for j in range(rows // per_box):
            coords = [r.min for r in src.region]
            coords[axes[0]] = coords[axes[0]] + j * per_box
            # declared as a read: the kernel's own mbarriers order these writes, not ThreadSync
            smem = s.access_ptr("r", offset=base + j * per_box * row, extent=per_box * width)
            if j == 0:  # the swizzle's pattern follows the shared address: 1 KiB-aligned boxes
                calls.append(extern_call("tl_check_swizzle_base" if swizzle else "tl_check_tma_destination", smem))
            if split:  # the column as (piece, offset in it): the first column is a whole piece
                coords = [*coords[:-1], tirx.floordiv(coords[-1], split), tirx.IntImm("int32", 0)]
            calls.append(extern_call(f"tl_tma_load_{len(coords)}d", smem, tirx.address_of(tmap.var), barrier,
                                     *[tirx.Cast("int32", c) for c in reversed(coords)]))
        return seq(calls)


def _run_tma(func: Any, tensor_maps: bool) -> Any:
    if TMA_COPY not in tl_op_names_in(func.body):
        return func
    padded = frozenset(str(n) for n in (func.attrs.get(PADDED_TILES_ATTR, []) if func.attrs else []))
    copies = _TmaCopies(kernel_name(func), func.body, padded)
    if not tensor_maps:
        raise copies.fail("needs TMA tensor maps, which the kernel's host code encodes before the launch; this "
                          "execution backend launches kernels without that host code: compile with "
                          "execution_backend='tvm_ffi'")

    def on_eval(stmt: Any, swizzle: int | None = None) -> Any:
        if op_name(stmt.value) != TMA_COPY:
            return stmt
        src, dst, barrier = stmt.value.args
        return copies.lower(src, dst, barrier, swizzle)

    def on_attr(stmt: Any) -> Any:
        if stmt.attr_key != IN_PLACE_SWIZZLE_ATTR:
            return stmt
        return on_eval(stmt.body, int(stmt.value.value))

    body = tvm_ffi.structural_map(func.body, (tirx.AttrStmt, on_attr), order="post")
    body = tvm_ffi.structural_map(body, (tirx.Evaluate, on_eval), order="post")
    host = [s for m in copies.maps for s in m.encode()]
    func = func.with_body(seq([*host, body]))
    current = func.attrs.get(ALIGNMENT_ATTR) if func.attrs else None
    return func.with_attr(ALIGNMENT_ATTR, max(16, int(current or 0)))  # TMA: 16-byte aligned tensors


def LowerTmaCopies(tensor_maps: bool) -> Any:
    """``tensor_maps``: the kernel's host code runs before its launch and encodes them."""
    return prim_func_pass(lambda func, mod, ctx: _run_tma(func, tensor_maps), "tl.cuda.LowerTmaCopies",
                          per_kernel=True)


__all__ = ["LowerTmaCopies"]
