"""Tile operations: ``T.alloc_fragment``, ``T.copy``, ``T.fill``/``T.clear``, ``T.gemm``,
``T.reduce_*``, ``T.cumsum``, ``T.transpose`` and ``T.Pipelined``, spelled as upstream TileLang spells them.

Each operation is one registered ``tl.*`` op in the IR whose operands are buffer regions
(``ir.TensorRegion``): the backend's pipeline lowers it (the shared ``LowerTileOps`` pass
turns it into T.Parallel nests; a backend may first select instructions of its own for
some of them). An op that no pass lowered is reported before codegen.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx
from tvm.ir import Range, TensorLoad, TensorRegion
from tvm.script.ir_builder import tirx as _ib

from ..errors import LanguageError
from .ops import TILE_OPS
from .variables import LocalVar


def alloc_fragment(shape: Any, dtype: str = "float32", scope: str = "local.fragment") -> Any:
    """A tile held by the block's threads together (registers on the GPU, distributed by
    the backend's layout; a block-local array on the CPU)."""
    return _ib.alloc_buffer(shape, dtype, scope=scope)


# In TVM 0.27 `tirx.Buffer` is `tvm.ir.Var` itself: `isinstance(x, tirx.Buffer)` holds for a
# scalar variable too (a kernel parameter `mask: T.int32`); `tirx.is_buffer_var` asks whether
# the variable is a buffer.


def _full(buffer: Any) -> TensorRegion:
    return tirx.BufferRegion(buffer, [Range.from_min_extent(0, d) for d in buffer.shape])


def _region(value: Any, extents: list[Any] | None, what: str) -> TensorRegion:
    """A buffer, a slice ``A[0:64, k:k+32]`` or a corner ``A[by * 64, k * 32]`` -> a region.
    A corner takes its extents from the other operand (aligned to the trailing axes)."""
    if isinstance(value, TensorRegion):
        return value
    if isinstance(value, LocalVar):  # T.alloc_var: its one-element buffer (T.clear(x))
        return _full(value.buffer)
    if tirx.is_buffer_var(value):
        return _full(value)
    if isinstance(value, TensorLoad) and isinstance(value.source, tirx.Buffer):
        if extents is None:
            raise LanguageError(f"{what}: both operands are single elements; one must be a tile "
                                "(a buffer or a slice) to give the copy its shape")
        indices = list(value.indices)
        if len(extents) > len(indices):
            raise LanguageError(f"{what}: a {len(extents)}-d tile does not fit the "
                                f"{len(indices)}-d corner {value}")
        lead = [1] * (len(indices) - len(extents))
        return tirx.BufferRegion(value.source, [Range.from_min_extent(i, e)
                                                for i, e in zip(indices, lead + list(extents))])
    raise LanguageError(f"{what}: expected a buffer, a slice such as A[0:64, 0:32] or a corner "
                        f"such as A[by * 64, k * 32], got {type(value).__name__}")


def _extents(value: Any) -> list[Any] | None:
    if isinstance(value, TensorRegion):
        return [r.extent for r in value.region]
    if tirx.is_buffer_var(value):
        return list(value.shape)
    return None


def _emit(op: str, *args: Any) -> None:
    call = tvm.ir.Call(tvm.ir.Op.get(op), list(args), ret_ty="int32")
    _ib.evaluate(call)


def _const(value: Any, dtype: str) -> Any:
    return tirx.const(value, dtype) if isinstance(value, (int, float, bool)) else value


#: how a backend should move a tile; upstream's hints, which no backend here needs to be told
COPY_INSTRUCTIONS = (None, "tma", "cp_async", "sync")


def copy(src: Any, dst: Any, *, coalesced_width: int | None = None, disable_tma: bool = False,
         eviction_policy: str | None = None, prefer_instruction: str | None = None,
         annotations: dict | None = None, loop_layout: Any = None) -> None:
    """Copy a tile between global, shared and fragment storage; the parts of a tile that
    fall outside a global tensor read as zero and are not written.

    Upstream's keyword hints are accepted and change no result: ``disable_tma`` (no backend
    here copies through TMA), ``coalesced_width`` and ``loop_layout`` (the backend chooses
    the vector width and the thread mapping), ``eviction_policy``, ``prefer_instruction``
    and ``annotations``."""
    del coalesced_width, disable_tma, eviction_policy, annotations, loop_layout
    if prefer_instruction not in COPY_INSTRUCTIONS:
        raise LanguageError(f"T.copy: prefer_instruction={prefer_instruction!r} is not one of "
                            f"{COPY_INSTRUCTIONS[1:]}")
    src_ext, dst_ext = _extents(src), _extents(dst)
    if src_ext is None and dst_ext is None and isinstance(src, TensorLoad) and isinstance(dst, TensorLoad):
        # two single elements (upstream's T.copy(A[i], B[i])): one element stored
        _ib.buffer_store(dst.source, tirx.Cast(str(dst.source.dtype), src) if str(src.dtype) != str(dst.source.dtype)
                         else src, list(dst.indices))
        return
    _emit(TILE_OPS["copy"], _region(src, dst_ext, "T.copy source"), _region(dst, src_ext, "T.copy destination"))


def async_copy(src: Any, dst: Any, **hints: Any) -> None:
    """Upstream's ``T.async_copy``: a global tile into a shared one by cp.async, waited for
    with ``T.ptx_wait_group`` (upstream: the same code as ``T.copy``). The copies a kernel
    writes itself are synchronous in this TileLang (see ``T.ptx_commit_group``): this is
    ``T.copy``, landed before the next statement, which every wait then finds done; the
    CUDA backend still makes such copies asynchronous in a T.Pipelined loop. Other
    directions are refused, as upstream refuses them. ``hints``: T.copy's keywords."""
    if _extents(src) is None and _extents(dst) is None and isinstance(src, TensorLoad) and isinstance(dst, TensorLoad):
        ones = [1] * len(dst.indices)  # two single elements (upstream's T.async_copy(A[0], S[0])): one element
        route = not_global_to_shared(_region(src, ones, "T.async_copy source"), _region(dst, ones, "T.async_copy"))
    else:
        route = not_global_to_shared(*copy_regions(src, dst, "T.async_copy"))
    if route is not None:
        raise LanguageError(f"T.async_copy only supports global->shared/shared.dyn copies; got {route}: use T.copy")
    copy(src, dst, **hints)


def copy_regions(src: Any, dst: Any, what: str) -> tuple[TensorRegion, TensorRegion]:
    """The (source, destination) regions of the tile copy ``what`` (a corner takes its
    extents from the other operand)."""
    return _region(src, _extents(dst), f"{what} source"), _region(dst, _extents(src), f"{what} destination")


def not_global_to_shared(src: TensorRegion, dst: TensorRegion) -> str | None:
    """None for a copy from global memory into shared memory, else the copy in words
    (``S0 (shared.dyn) -> S1 (shared.dyn)``) for the error that refuses it."""
    if src.source.scope() == "global" and dst.source.scope().startswith("shared"):
        return None
    return f"{src.source.name} ({src.source.scope()}) -> {dst.source.name} ({dst.source.scope()})"


def fill(dst: Any, value: Any) -> None:
    # an element (upstream's ``T.fill(counter[0], 0)``) is a one-element tile
    ones = [1] * len(dst.indices) if isinstance(dst, TensorLoad) else None
    region = _region(dst, ones, "T.fill")
    _emit(TILE_OPS["fill"], region, _const(value, str(region.source.dtype)))
    from .reducer import opened_by_fill

    opened_by_fill(region.source)


def clear(dst: Any) -> None:
    fill(dst, 0)


def gemm(A: Any, B: Any, C: Any, transpose_A: bool = False, transpose_B: bool = False,
         policy: Any = None, clear_accum: bool = False, k_pack: int = 1, wg_wait: int = 0) -> None:
    """C (+)= op(A) @ op(B) on tiles. ``policy``, ``k_pack`` and ``wg_wait`` are accepted
    for source compatibility; how the backend maps the product onto threads is its choice.
    ``clear_accum`` may be a condition known only when the kernel runs (``j == 0`` of a
    ``T.unroll`` loop: upstream's FlashMLA): C is then cleared where it holds, and the
    product accumulates."""
    del policy, k_pack, wg_wait
    try:
        clear_accum = int(clear_accum)
    except TypeError:  # an expression: ``j == 0``
        with _ib.If(clear_accum), _ib.Then():
            clear(C)
        clear_accum = 0
    _emit(TILE_OPS["gemm"], _region(A, None, "T.gemm A"), _region(B, None, "T.gemm B"),
          _region(C, None, "T.gemm C"), tirx.const(int(transpose_A), "int32"),
          tirx.const(int(transpose_B), "int32"), tirx.const(clear_accum, "int32"))


def wgmma_gemm(A: Any, B: Any, C: Any, transpose_A: bool = False, transpose_B: bool = False,
               policy: Any = None, clear_accum: bool = False, annotations: Any = None) -> None:
    """Upstream's Hopper GEMM that returns before the product is done, for kernels that
    order it themselves with ``T.wait_wgmma(n)``. Here it is ``T.gemm``: the product is done
    when the next statement runs (on sm_90 the CUDA backend issues wgmma and waits for it;
    inside warp roles it runs on mma.sync), which is what any wait after it asks for, so
    results are upstream's; the overlap the kernel scheduled by hand is not kept."""
    del annotations
    gemm(A, B, C, transpose_A, transpose_B, policy, clear_accum)


#: (new kinds go at the end: the IR names a kind by its index)
REDUCE_KINDS = ("max", "min", "sum", "abssum", "absmax", "bitand", "bitor", "bitxor",
                "max_nan", "min_nan", "absmax_nan")
BITWISE_REDUCE_KINDS = ("bitand", "bitor", "bitxor")
#: the kinds ``nan_propagate=True`` turns max, min and absmax into (any NaN makes the result NaN)
NAN_PROPAGATING = {"max": "max_nan", "min": "min_nan", "absmax": "absmax_nan"}
#: the kinds ``T.reduce`` is spelled with
SPELLED_REDUCE_KINDS = tuple(kind for kind in REDUCE_KINDS if kind not in NAN_PROPAGATING.values())


def _reduce_kind(kind: str, batch: int, nan_propagate: bool, dtype: str) -> str:
    """The kind the IR records, after upstream's tuning keywords. ``batch`` (outputs per warp
    all-reduce) only groups barriers, so any valid value gives the same result here. By
    default max/min return the non-NaN operand (upstream's default, CUDA's fmax/__hmax);
    ``nan_propagate=True`` makes a NaN anywhere in a row the row's result, as upstream's
    __hmax_nan does for float16/bfloat16 (here for every floating type and backend). A sum
    propagates NaN anyway, and integers have none: there the keyword changes nothing."""
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        raise LanguageError(f"T.reduce_{kind}: batch must be >= 1 (an int), got {batch!r}")
    if nan_propagate and kind in NAN_PROPAGATING and dtype.startswith(("float", "bfloat")):
        return NAN_PROPAGATING[kind]
    return kind


def reduce(src: Any, dst: Any, kind: str, dim: int = -1, clear: bool = True, batch: int = 1,
           nan_propagate: bool = False, annotations: Any = None) -> None:
    del annotations  # upstream's per-target lowering hints
    if kind not in SPELLED_REDUCE_KINDS:
        raise LanguageError(f"T.reduce: kind {kind!r} is not one of {SPELLED_REDUCE_KINDS}")
    src_region = _region(src, None, f"T.reduce_{kind} source")
    if kind in BITWISE_REDUCE_KINDS:
        for region in (src_region, _region(dst, None, f"T.reduce_{kind} destination")):
            dtype = str(region.source.dtype)
            if not dtype.startswith(("int", "uint", "bool")):
                raise LanguageError(f"T.reduce_{kind}: combines bits, so needs integer tiles; "
                                    f"{str(region.source.name)!r} holds {dtype}")
    rank = len(src_region.region)
    axis = dim + rank if dim < 0 else dim
    if not 0 <= axis < rank:
        raise LanguageError(f"T.reduce_{kind}: dim {dim} is out of range for a {rank}-d tile")
    kind = _reduce_kind(kind, batch, nan_propagate, str(src_region.source.dtype))
    _emit(TILE_OPS["reduce"], src_region, _region(dst, None, f"T.reduce_{kind} destination"),
          tirx.const(REDUCE_KINDS.index(kind), "int32"), tirx.const(axis, "int32"),
          tirx.const(int(clear), "int32"))


def reduce_max(src: Any, dst: Any, dim: int = -1, clear: bool = True, batch: int = 1,
               nan_propagate: bool = False, annotations: Any = None) -> None:
    reduce(src, dst, "max", dim, clear, batch, nan_propagate)


def reduce_min(src: Any, dst: Any, dim: int = -1, clear: bool = True, batch: int = 1,
               nan_propagate: bool = False, annotations: Any = None) -> None:
    reduce(src, dst, "min", dim, clear, batch, nan_propagate)


def reduce_sum(src: Any, dst: Any, dim: int = -1, clear: bool = True, batch: int = 1,
               nan_propagate: bool = False, annotations: Any = None) -> None:
    reduce(src, dst, "sum", dim, clear, batch, nan_propagate)


def reduce_abssum(src: Any, dst: Any, dim: int = -1, clear: bool = True, batch: int = 1,
                  nan_propagate: bool = False, annotations: Any = None) -> None:
    reduce(src, dst, "abssum", dim, clear, batch, nan_propagate)


def reduce_absmax(src: Any, dst: Any, dim: int = -1, clear: bool = True, batch: int = 1,
                  nan_propagate: bool = False, annotations: Any = None) -> None:
    reduce(src, dst, "absmax", dim, clear, batch, nan_propagate)


def reduce_bitand(src: Any, dst: Any, dim: int = -1, clear: bool = True, batch: int = 1,
                  nan_propagate: bool = False, annotations: Any = None) -> None:
    """Bitwise AND along ``dim`` (integer tiles; ``clear`` starts from all ones)."""
    reduce(src, dst, "bitand", dim, clear, batch, nan_propagate)


def reduce_bitor(src: Any, dst: Any, dim: int = -1, clear: bool = True, batch: int = 1,
                 nan_propagate: bool = False, annotations: Any = None) -> None:
    """Bitwise OR along ``dim`` (integer tiles; ``clear`` starts from 0)."""
    reduce(src, dst, "bitor", dim, clear, batch, nan_propagate)


def reduce_bitxor(src: Any, dst: Any, dim: int = -1, clear: bool = True, batch: int = 1,
                  nan_propagate: bool = False, annotations: Any = None) -> None:
    """Bitwise XOR along ``dim`` (integer tiles; ``clear`` starts from 0)."""
    reduce(src, dst, "bitxor", dim, clear, batch, nan_propagate)


#: (new kinds go at the end: the IR names a kind by its index)
SCAN_KINDS = ("sum", "max", "min")


def _scan(src: Any, dst: Any, dim: int, reverse: bool, kind: str) -> None:
    name = f"T.cum{kind}"
    src_region = _region(src, None, f"{name} source")
    dst_region = src_region if dst is None else _region(dst, None, f"{name} destination")
    rank = len(src_region.region)
    axis = dim + rank if dim < 0 else dim
    if not 0 <= axis < rank:
        raise LanguageError(f"{name}: dim {dim} is out of range for a {rank}-d tile")
    _emit(TILE_OPS["cumsum"], src_region, dst_region, tirx.const(axis, "int32"),
          tirx.const(int(reverse), "int32"), tirx.const(SCAN_KINDS.index(kind), "int32"))


def cumsum(src: Any, dst: Any = None, dim: int = 0, reverse: bool = False, annotations: Any = None) -> None:
    """Inclusive prefix sum along ``dim`` (in place when ``dst`` is omitted)."""
    _scan(src, dst, dim, reverse, "sum")


def cummax(src: Any, dst: Any = None, dim: int = 0, reverse: bool = False, annotations: Any = None) -> None:
    """Inclusive running maximum along ``dim`` (in place when ``dst`` is omitted)."""
    _scan(src, dst, dim, reverse, "max")


def cummin(src: Any, dst: Any = None, dim: int = 0, reverse: bool = False, annotations: Any = None) -> None:
    """Inclusive running minimum along ``dim`` (in place when ``dst`` is omitted)."""
    _scan(src, dst, dim, reverse, "min")


def transpose(src: Any, dst: Any, annotations: Any = None) -> None:
    """``dst[..., j, i] = src[..., i, j]``: swap the last two axes of a tile (buffers or
    slices of equal rank, at least 2-d). Elements read from outside a global tensor are
    zero; elements that would land outside one are not written."""
    del annotations
    src_region, dst_region = _region(src, None, "T.transpose source"), _region(dst, None, "T.transpose destination")
    ranks = len(src_region.region), len(dst_region.region)
    if ranks[0] != ranks[1] or ranks[0] < 2:
        raise LanguageError(f"T.transpose: source and destination must have one rank of at least 2, got "
                            f"{ranks[0]}-d {str(src_region.source.name)!r} and {ranks[1]}-d "
                            f"{str(dst_region.source.name)!r}")
    _emit(TILE_OPS["transpose"], src_region, dst_region)


def annotate_layout(layouts: dict) -> None:
    """``T.annotate_layout({A_shared: tilelang.layout.make_swizzled_layout(A_shared)})``:
    ask for a bank-conflict-free layout of shared tiles (see tilelang.layout)."""
    from ..layout import SwizzledLayout, accepted_as_is

    if not isinstance(layouts, dict):
        raise LanguageError(f"T.annotate_layout: expected a dict {{buffer: layout}}, got {type(layouts).__name__}")
    for buffer, layout in layouts.items():
        if not isinstance(buffer, tirx.Buffer):
            raise LanguageError(f"T.annotate_layout: keys must be buffers, got {type(buffer).__name__}")
        if _is_global_permutation(buffer, layout):
            _annotate_global_layout(buffer, layout)
            continue
        if not isinstance(layout, SwizzledLayout) and accepted_as_is(buffer, layout):
            continue  # a row-major Layout, or a Fragment hint (see tilelang.layout)
        if not isinstance(layout, SwizzledLayout):
            raise LanguageError(
                f"T.annotate_layout: the layout of {buffer.name!r} is a {type(layout).__name__}; only "
                "tilelang.layout.make_swizzled_layout(buffer) is supported (fragment layouts are chosen by "
                "the compiler from the instructions that use them)")
        if layout.buffer is None or not layout.buffer.same_as(buffer):
            made_for = "a shape, not a buffer" if layout.buffer is None else repr(layout.buffer.name)
            raise LanguageError(f"T.annotate_layout: the layout given for {buffer.name!r} was made for "
                                f"{made_for}; make it from the buffer: make_swizzled_layout({buffer.name})")
        if not buffer.scope().startswith("shared") or len(buffer.shape) != 2:
            raise LanguageError(f"T.annotate_layout: {buffer.name!r} is a {len(buffer.shape)}-d "
                                f"{buffer.scope()} buffer; swizzled layouts are for 2-d T.alloc_shared tiles")
        _emit(TILE_OPS["annotate_layout"], _full(buffer), tirx.const(0, "int32"))


def _is_global_permutation(buffer: Any, layout: Any) -> bool:
    from ..layout import Fragment, Layout, SwizzledLayout

    return (isinstance(layout, Layout) and not isinstance(layout, (Fragment, SwizzledLayout))
            and buffer.scope() == "global"
            and not layout.is_identity_for(buffer.shape))


def _annotate_global_layout(buffer: Any, layout: Any) -> None:
    """A global tensor stored in ``layout``'s order (upstream's flash-attention backward
    stores dQ so that its atomic updates are coalesced): a marker that
    transform.ApplyGlobalLayouts turns into a flat view of the tensor's data, read and
    written at the layout's storage offsets. Every kernel touching the tensor must
    annotate it alike (as upstream requires); the host sees the permuted storage."""
    from tvm.sym.analyzer import Analyzer

    from .ops import GLOBAL_LAYOUT

    name = buffer.name
    if [int(d) if isinstance(d, int) else d for d in layout.shape] != [int(d) for d in buffer.shape]:
        raise LanguageError(f"T.annotate_layout: the Layout given for {name!r} is for shape {layout.shape}, "
                            f"the tensor is {list(buffer.shape)}")
    storage = layout.get_output_shape()
    total_in, total_out = 1, 1
    for d in buffer.shape:
        total_in *= int(d)
    for d in storage:
        total_out *= int(d)
    if total_in != total_out:
        raise LanguageError(f"T.annotate_layout: the Layout given for {name!r} maps {total_in} elements onto "
                            f"storage of shape {storage} ({total_out} elements); a tensor's layout must "
                            "be a permutation of its elements")
    flat = _ib.decl_buffer((total_in,), buffer.dtype, data=buffer.data, scope="global")
    analyzer = Analyzer()
    with _ib.grid(*buffer.shape) as loop_vars:
        loop_vars = list(loop_vars) if len(buffer.shape) > 1 else [loop_vars]
        offset = tirx.const(0, "int32")
        for index, extent in zip(layout.map_forward_index(list(loop_vars)), storage):
            offset = offset * int(extent) + index
        _emit(GLOBAL_LAYOUT, tirx.BufferLoad(flat, [tirx.const(0, "int32")]), analyzer.simplify(offset))


SWIZZLE_ORDERS = ("row", "col")


def use_swizzle(panel_size: int = 10, order: str = "row", enable: bool = True) -> None:
    """Launch the kernel's blocks panel by panel (``panel_size`` rows of blocks at a time
    for ``order="row"``, columns for ``"col"``), so that blocks running together share
    the tiles they read in the L2 cache. Changes the order blocks run in, never results;
    a backend whose block order does not matter (the CPU) ignores it."""
    if order not in SWIZZLE_ORDERS:
        raise LanguageError(f"T.use_swizzle: order {order!r} is not one of {SWIZZLE_ORDERS}")
    if not isinstance(panel_size, int) or panel_size < 1:
        raise LanguageError(f"T.use_swizzle: panel_size must be a positive int, got {panel_size!r}")
    if enable:
        _emit(TILE_OPS["use_swizzle"], tirx.const(panel_size, "int32"),
              tirx.const(SWIZZLE_ORDERS.index(order), "int32"))


def Pipelined(start: Any, stop: Any = None, num_stages: int = 0, order: Any = None, stage: Any = None,
              sync: Any = None, group: Any = None, annotations: dict | None = None) -> Any:
    """``for k in T.Pipelined(n, num_stages=3)`` (or ``T.Pipelined(start, stop, ...)``): a
    serial loop whose iterations a backend may overlap (software pipelining of its copies).
    The annotation carries the stages; backends without a pipeliner, and loops that do not
    start at 0, run as written. Upstream's manual schedule (``order``/``stage``/``sync``/
    ``group``) is accepted: the CUDA pipeliner derives its own."""
    del order, stage, sync, group
    start, stop = (0, start) if stop is None else (start, stop)
    merged = dict(annotations or {})
    if num_stages:
        merged["num_stages"] = int(num_stages)
    return _ib.serial(start, stop, annotations=merged or None)
