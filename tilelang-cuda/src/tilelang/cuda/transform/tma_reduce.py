"""LowerTmaReductions: a tile atomic add written with ``use_tma=True`` (upstream's
``T.atomic_add(dQ[b, rows, h, :], dq_shared, use_tma=True)``) as TMA bulk reductions
(sm_90; PTX ISA "cp.reduce.async.bulk.tensor"): the block's threads make their writes of
the shared tile visible to the async proxy and meet at a barrier, one thread adds the tile
to the global box (one instruction per box, the adds done in the L2), commits and waits
until the boxes have read the tile, and a barrier follows before the tile is written again.
The tensor map is encoded by the kernel's host code (tma.py's encoder), as T.tma_copy's.

A box's shared source must start on a 128-byte boundary, which shared-memory planning does
not promise; the kernel checks the tile's address (the same for every thread) and takes the
element atomics where it is not aligned. Where the request cannot be served by boxes at
all, the element atomics stay, with the same sums: below sm_90; without tensor maps (an
execution backend that launches without the kernel's host code); an element type the
instruction lacks (its adds are f16, bf16, f32, s32, u32, u64); a memory order beyond
relaxed; a value that is not a whole row-major shared tile of the destination's dtype (a
padded or swizzled tile); a destination that is not a dense 2-d to 5-d tensor with 16-byte
row strides; or an add some of the block's threads do not reach (under a condition on the
thread index, or in a T.ws role), where a block barrier would never complete. The pass
config ``tl.disable_tma_lower`` (upstream's) keeps the element atomics too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tvm
import tvm_ffi
from tilelang.plugin import (
    ALIGNMENT_ATTR,
    ATOMIC_RMW_ELEMENT,
    ATOMIC_RMW_KINDS,
    ATOMIC_USE_TMA_ATTR,
    block_barrier,
    dtype_bytes,
    extern_call,
    pass_config,
    prim_func_pass,
    seq,
    substitute,
    uses_var,
)
from tvm import tirx
from tvm.ir import TensorLoad

from .explicit_sync import ROLE_ATTR, op_name
from .tma import BOX_MAX, DISABLE_TMA_CONFIG, encode_tensor_map

#: element types of cp.reduce.async.bulk.tensor's .add (the tensor map's element type)
REDUCE_ADD_DTYPES = ("float16", "bfloat16", "float32", "int32", "uint32", "uint64")
SMEM_ALIGNMENT = 128  # a box's shared address (CUDA C++ Programming Guide, "Tensor Memory Access")
_ADD = ATOMIC_RMW_KINDS.index("add")
_THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")


@dataclass(frozen=True)
class _Tile:
    """The atomic nest's tile: ``rows`` x ``cols`` elements of global ``dst`` at ``corner``
    along axes (row_axis, col_axis), read from shared ``src`` from element ``offset`` on."""

    dst: Any
    corner: list[Any]
    row_axis: int
    col_axis: int
    rows: int
    cols: int
    src: Any
    offset: Any


def _nest(loop: Any) -> tuple[list[Any], list[int], Any] | None:
    """(loop variables, static extents, the statement inside) of a perfect For nest."""
    loop_vars, extents, stmt = [], [], loop
    while isinstance(stmt, tirx.For):
        if not isinstance(stmt.extent, tirx.IntImm) or not (isinstance(stmt.min, tirx.IntImm) and stmt.min.value == 0):
            return None
        loop_vars.append(stmt.loop_var)
        extents.append(int(stmt.extent.value))
        stmt = stmt.body
    return loop_vars, extents, stmt


def _axes(indices: list[Any], loop_vars: list[Any], analyzer: Any) -> tuple[list[int], list[Any]] | None:
    """For each loop variable, the one axis whose index is (something free of the loop
    variables) + that variable; and every index with the variables at 0. None otherwise."""
    zero = [(v, tirx.IntImm(v.ty.dtype, 0)) for v in loop_vars]
    corner = [analyzer.simplify(substitute(i, zero)) for i in indices]
    axes = []
    for var in loop_vars:
        found = [a for a, index in enumerate(indices) if uses_var(index, var)]
        if len(found) != 1 or not analyzer.can_prove_equal(indices[found[0]] - corner[found[0]], var):
            return None
        axes.append(found[0])
    if any(uses_var(c, v) for c in corner for v in loop_vars):
        return None
    return axes, corner


def _tile(nest: Any, analyzer: Any) -> _Tile | None:
    """The tile a use_tma atomic nest adds, when boxes can add it; else None."""
    parts = _nest(nest)
    if parts is None:
        return None
    loop_vars, extents, leaf = parts
    if isinstance(leaf, tirx.IfThenElse) and leaf.else_case is None:  # the in-bounds guard: boxes clip
        leaf = leaf.then_case
    call = leaf.value if isinstance(leaf, tirx.Evaluate) else None
    if call is None or op_name(call) != ATOMIC_RMW_ELEMENT or len(loop_vars) != 2:
        return None
    kind, target, value, order = call.args
    if not (isinstance(kind, tirx.IntImm) and kind.value == _ADD and isinstance(order, tirx.IntImm) and order.value == 0):
        return None
    if not (isinstance(target, TensorLoad) and isinstance(value, TensorLoad)):
        return None
    dst, src = target.source, value.source
    if str(dst.dtype) not in REDUCE_ADD_DTYPES or str(src.dtype) != str(dst.dtype) or \
            not src.scope().startswith("shared") or dst.scope() != "global":
        return None
    d, s = _axes(list(target.indices), loop_vars, analyzer), _axes(list(value.indices), loop_vars, analyzer)
    if d is None or s is None:
        return None
    (d_axes, corner), (s_axes, s_corner) = d, s
    rows, cols = extents
    shape = [int(e.value) if isinstance(e, tirx.IntImm) else None for e in src.shape]
    rank = len(dst.shape)
    if not (d_axes[0] < d_axes[1] and 2 <= rank <= 5 and not list(dst.strides) and not list(src.strides)):
        return None
    if s_axes != [len(shape) - 2, len(shape) - 1] or shape[-2:] != [rows, cols] or None in shape or \
            not all(analyzer.can_prove_equal(c, 0) for c in s_corner[-2:]):
        return None  # not a whole row-major tile of the shared buffer (padded, swizzled or a part)
    elem = dtype_bytes(dst.dtype)
    if cols > BOX_MAX or (cols * elem) % 16:
        return None
    stride = tirx.IntImm("int64", elem)
    for extent in reversed(list(dst.shape)[1:]):  # the tensor map's byte strides: multiples of 16
        stride = stride * tirx.Cast("int64", extent)
        if not analyzer.can_prove_equal(tirx.floormod(stride, 16), 0):
            return None
    offset = 0
    for index, extent in zip(s_corner, shape):
        offset = offset * extent + index
    return _Tile(dst, corner, d_axes[0], d_axes[1], rows, cols, src, offset)


def _unflatten(offset: Any, shape: list[Any]) -> list[Any]:
    """The indices of element ``offset`` of a row-major buffer of ``shape``."""
    indices = []
    for extent in reversed(list(shape)):
        indices.append(tirx.floormod(offset, extent))
        offset = tirx.floordiv(offset, extent)
    return indices[::-1]


def _thread_vars(body: Any) -> dict[str, Any]:
    """The kernel's thread indices by tag (threadIdx.x, .y, .z)."""
    found: dict[str, Any] = {}

    def on_attr(attr: Any) -> None:
        if attr.attr_key == "thread_extent" and attr.node.thread_tag in _THREAD_TAGS:
            found.setdefault(attr.node.thread_tag, attr.node.var)

    tvm_ffi.structural_walk(body, (tirx.AttrStmt, on_attr))
    return found


def _unreached(body: Any, threads: list[Any]) -> list[Any]:
    """The use_tma nests some of the block's threads do not reach: under a condition on a
    thread index, or inside a T.ws role."""
    found: list[Any] = []

    def nests(stmt: Any) -> None:
        tvm_ffi.structural_walk(stmt, (tirx.For, lambda f: found.append(f) if ATOMIC_USE_TMA_ATTR in f.annotations
                                       else None))

    def on_if(stmt: Any) -> None:
        if any(uses_var(stmt.condition, t) for t in threads) or \
                "tl_thread_" in str(stmt.condition):
            nests(stmt.then_case)
            if stmt.else_case is not None:
                nests(stmt.else_case)

    tvm_ffi.structural_walk(body, (tirx.IfThenElse, on_if))
    tvm_ffi.structural_walk(body, (tirx.AttrStmt, lambda a: nests(a.body) if a.attr_key == ROLE_ATTR else None))
    return found


def _run(func: Any, tensor_maps: bool) -> Any:
    requested: list[Any] = []
    tvm_ffi.structural_walk(func.body, (tirx.For, lambda f: requested.append(f) if ATOMIC_USE_TMA_ATTR in f.annotations
                                        else None))
    if not tensor_maps or not requested or pass_config(DISABLE_TMA_CONFIG):
        return func
    analyzer = tvm.sym.analyzer.Analyzer()
    threads = _thread_vars(func.body)
    unreached = _unreached(func.body, list(threads.values()))
    maps: dict[tuple, Any] = {}
    host: list[Any] = []
    zero = tirx.IntImm("int32", 0)
    elected = tirx.EQ(tirx.call_extern("int32", "tl_thread_x"), zero)
    for axis in ("y", "z"):
        if f"threadIdx.{axis}" in threads:
            elected = tirx.And(elected, tirx.EQ(tirx.call_extern("int32", f"tl_thread_{axis}"), zero))

    def tensor_map(tile: _Tile, per_box: int) -> Any:
        key = (tile.dst, tile.row_axis, tile.col_axis, per_box, tile.cols)
        for (buffer, *rest), var in maps.items():
            if buffer.same_as(tile.dst) and tuple(rest) == key[1:]:
                return var
        same = sum(1 for buffer, *_ in maps if buffer.same_as(tile.dst))
        var = tirx.Var(f"{tile.dst.name}_reduce_map{f'_{same}' if same else ''}",
                       tvm.ir.PointerType(tirx.TensorMapType()))
        maps[key] = var
        host.extend(encode_tensor_map(var, tile.dst, (tile.row_axis, per_box), (tile.col_axis, tile.cols)))
        return var

    def on_for(loop: Any) -> Any:
        if ATOMIC_USE_TMA_ATTR not in loop.annotations or any(loop.same_as(u) for u in unreached):
            return loop
        tile = _tile(loop, analyzer)
        if tile is None:
            return loop
        # one box where the rows fit one, else boxes whose shared sources stay 128-byte aligned
        per_box = next((r for r in range(min(tile.rows, BOX_MAX), 0, -1) if r == tile.rows or (
            tile.rows % r == 0 and (r * tile.cols * dtype_bytes(tile.dst.dtype)) % SMEM_ALIGNMENT == 0)), None)
        if per_box is None:
            return loop
        tmap = tensor_map(tile, per_box)
        rank = len(tile.dst.shape)
        boxes = []
        for j in range(tile.rows // per_box):
            coords = list(tile.corner)
            coords[tile.row_axis] = coords[tile.row_axis] + j * per_box
            smem = tile.src.access_ptr("r", offset=tile.offset + j * per_box * tile.cols, extent=per_box * tile.cols)
            boxes.append(extern_call(f"tl_tma_store_add_{rank}d", smem, tirx.address_of(tmap),
                                     *[tirx.Cast("int32", c) for c in reversed(coords)]))
        # the tile's address (an address_of, which ThreadSync and shared-memory merging take
        # for no access of the tile): every thread has the same, so the block takes one path
        first = tirx.address_of(tirx.BufferLoad(tile.src, _unflatten(tile.offset, tile.src.shape)))
        aligned = tirx.NE(tirx.call_extern("int32", "tl_tma_smem_aligned", first), zero)
        bulk = seq([block_barrier(),
                    tirx.IfThenElse(elected, seq([*boxes, extern_call("tl_tma_store_commit_and_wait_read")]), None),
                    block_barrier()])
        plain = tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, loop.body,
                         annotations={k: v for k, v in loop.annotations.items() if k != ATOMIC_USE_TMA_ATTR})
        return seq([extern_call("tl_fence_proxy_async"), tirx.IfThenElse(aligned, bulk, plain)])

    body = tvm_ffi.structural_map(func.body, (tirx.For, on_for), order="post")
    if not maps:
        return func
    func = func.with_body(seq([*host, body]))
    current = func.attrs.get(ALIGNMENT_ATTR) if func.attrs else None
    return func.with_attr(ALIGNMENT_ATTR, max(16, int(current or 0)))  # TMA: 16-byte aligned tensors


def LowerTmaReductions(tensor_maps: bool) -> Any:
    """``tensor_maps``: the kernel's host code runs before its launch and encodes them (the
    pipeline adds this pass from sm_90 on)."""
    return prim_func_pass(lambda func, mod, ctx: _run(func, tensor_maps), "tl.cuda.LowerTmaReductions",
                          per_kernel=True)


__all__ = ["REDUCE_ADD_DTYPES", "LowerTmaReductions"]
