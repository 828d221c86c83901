"""Atomics as upstream TileLang spells them: ``T.atomic_add/max/min/or/and/xor``,
``T.atomic_addx2/addx4``, ``T.atomic_load`` and ``T.atomic_store``.

One element (``T.atomic_add(B[i], v)``) becomes an atomic element op, an expression whose
value is the element's previous value (``P[i] = T.atomic_add(B[0], A[i], return_prev=True)``)
and which, used as a statement, performs the update alone. A tile (``T.atomic_add(C, C_local)``,
a slice or a corner ``C[by * bM, bx * bN]``) becomes the tile op ``tl.atomic_add`` with its
kind, which LowerTileOps turns into one element op per element. Each backend lowers the
element ops (tilelang/language/ops.py lists them): CUDA to its atomic instructions, the CPU
to plain accesses in a kernel it then runs on one thread.

``memory_order`` takes C++'s std::memory_order names; backends give at least that ordering.
"""

from __future__ import annotations

from typing import Any

from tvm import tirx
from tvm.ir import TensorLoad, TensorRegion
from tvm.script.ir_builder import tirx as _ib

from ..errors import LanguageError
from .ops import (
    ATOMIC_LOAD_ELEMENT,
    ATOMIC_RMW_ELEMENT,
    ATOMIC_RMW_KINDS,
    ATOMIC_STORE_ELEMENT,
    MEMORY_ORDERS,
    TILE_OPS,
)
from .tile import _const, _emit, _extents, _region

#: orders an atomic load / store may have (a load cannot release, a store cannot acquire)
LOAD_ORDERS = ("relaxed", "consume", "acquire", "seq_cst")
STORE_ORDERS = ("relaxed", "release", "seq_cst")
#: kinds that combine bits, so need integer elements
BITWISE_KINDS = ("or", "and", "xor")


def _order(what: str, memory_order: str | None, allowed: tuple[str, ...] = MEMORY_ORDERS) -> Any:
    if memory_order is None:
        memory_order = "relaxed"
    if memory_order not in allowed:
        # upstream's words first ("atomic_load does not support memory_order"), then the fix
        raise LanguageError(f"{what} does not support memory_order={memory_order!r}; use one of {list(allowed)}")
    return tirx.const(MEMORY_ORDERS.index(memory_order), "int32")


def _element(value: Any) -> bool:
    return isinstance(value, TensorLoad) and tirx.is_buffer_var(value.source)


def _is_tile(value: Any) -> bool:
    # (not isinstance(value, tirx.Buffer): in TVM 0.27 that is any Var, a scalar `mask: T.int32` too)
    return tirx.is_buffer_var(value) or isinstance(value, TensorRegion)


def _cast(value: Any, dtype: str) -> Any:
    value = _const(value, dtype)
    return value if str(getattr(value, "ty", "")) == dtype else tirx.Cast(dtype, value)


def rmw_element(kind: str, dst: Any, value: Any, memory_order: Any) -> Any:
    """The element op ``tl.atomic_rmw_element`` on ``dst`` (a load such as ``B[i]``)."""
    dtype = str(dst.source.dtype)
    return tirx.call_intrin(dtype, ATOMIC_RMW_ELEMENT, tirx.const(ATOMIC_RMW_KINDS.index(kind), "int32"),
                            dst, _cast(value, dtype), memory_order)


def _rmw(kind: str, dst: Any, value: Any, memory_order: str | None, return_prev: bool,
         use_tma: bool = False) -> Any:
    what = f"T.atomic_{kind}"
    order = _order(what, memory_order)
    buffer = dst if tirx.is_buffer_var(dst) else getattr(dst, "source", None)
    if not tirx.is_buffer_var(buffer):
        raise LanguageError(f"{what}: the destination must be a buffer element such as B[i], a buffer "
                            f"or a slice such as B[0:64, k:k+32], got {type(dst).__name__}")
    dst_dtype = str(buffer.dtype)
    if kind in BITWISE_KINDS and not dst_dtype.startswith(("int", "uint", "bool")):
        raise LanguageError(f"{what}: combines bits, so needs an integer destination; "
                            f"{_name(dst)} holds {dst_dtype}")
    if _element(dst) and not _is_tile(value):
        return rmw_element(kind, dst, value, order)
    if return_prev:
        raise LanguageError(f"{what}: return_prev=True needs one element, such as B[i], as the "
                            "destination and a scalar value (a tile update has no single previous value)")
    value_extents = _extents(value)
    dst_region = _region(dst, value_extents, f"{what} destination")
    operand = _region(value, _extents(dst), f"{what} value") if _is_tile(value) or value_extents \
        else _cast(value, dst_dtype)
    _emit(TILE_OPS["atomic_add"], dst_region, operand, tirx.const(ATOMIC_RMW_KINDS.index(kind), "int32"),
          order, tirx.const(int(bool(use_tma)), "int32"))
    return None


def _name(dst: Any) -> str:
    buffer = dst if tirx.is_buffer_var(dst) else dst.source
    return repr(str(buffer.name))


def atomic_add(dst: Any, value: Any, memory_order: str | None = None, return_prev: bool = False,
               use_tma: bool = False) -> Any:
    """``dst += value`` atomically, for one element or every element of a tile (elements
    of a tile outside a global tensor are skipped). Concurrent updates from other blocks
    and threads all land; the result does not depend on their order (up to floating-point
    rounding). ``use_tma`` asks for a TMA bulk reduction of a tile (sm_90): a backend
    without one either serves it with element atomics or refuses it."""
    return _rmw("add", dst, value, memory_order, return_prev, use_tma)


def atomic_max(dst: Any, value: Any, memory_order: str | None = None, return_prev: bool = False) -> Any:
    """``dst = max(dst, value)`` atomically (an element or a tile)."""
    return _rmw("max", dst, value, memory_order, return_prev)


def atomic_min(dst: Any, value: Any, memory_order: str | None = None, return_prev: bool = False) -> Any:
    """``dst = min(dst, value)`` atomically (an element or a tile)."""
    return _rmw("min", dst, value, memory_order, return_prev)


def atomic_or(dst: Any, value: Any, memory_order: str | None = None, return_prev: bool = False) -> Any:
    """``dst |= value`` atomically (integer elements)."""
    return _rmw("or", dst, value, memory_order, return_prev)


def atomic_and(dst: Any, value: Any, memory_order: str | None = None, return_prev: bool = False) -> Any:
    """``dst &= value`` atomically (integer elements)."""
    return _rmw("and", dst, value, memory_order, return_prev)


def atomic_xor(dst: Any, value: Any, memory_order: str | None = None, return_prev: bool = False) -> Any:
    """``dst ^= value`` atomically (integer elements)."""
    return _rmw("xor", dst, value, memory_order, return_prev)


def _lanes(what: str, operand: Any, lanes: int, access: str = "atomic") -> tuple[Any, list[Any]]:
    """(buffer, first index) of ``lanes`` consecutive elements along the last axis: an
    element ``A[i, j]`` (the run starts there), a buffer or a slice of that many elements."""
    if _element(operand):
        indices = list(operand.indices)
        return operand.source, indices[:-1] + [_run_start(what, operand, indices[-1], lanes)]
    region = _region(operand, None, what) if _is_tile(operand) else None
    if region is None:
        raise LanguageError(f"{what}: expected a buffer element such as A[i, j * {lanes}], a buffer or a "
                            f"slice of {lanes} elements, got {type(operand).__name__}")
    extents = [r.extent for r in region.region]
    static = [int(e.value) if isinstance(e, tirx.IntImm) else None for e in extents]
    if static[-1] != lanes or any(e != 1 for e in static[:-1]):
        raise LanguageError(f"{what}: {_name(region)} gives a tile of {extents}; a {lanes}-wide {access} "
                            f"takes {lanes} consecutive elements of the last axis")
    return region.source, [r.min for r in region.region]


def _run_start(what: str, operand: Any, last: Any, lanes: int) -> Any:
    """Where the run of ``lanes`` elements indexed by ``last`` starts: a scalar index is the
    start itself; a vector index must be upstream's ``T.Ramp(start, 1, lanes)``."""
    index_lanes = int(last.ty.dtype.lanes) if hasattr(last.ty, "dtype") else 1
    if index_lanes == 1:
        return last
    if isinstance(last, tirx.Ramp) and isinstance(last.stride, tirx.IntImm) and int(last.stride.value) == 1 \
            and int(last.lanes) == lanes:
        return last.base
    raise LanguageError(f"{what}: {operand} indexes {index_lanes} lanes with {last}; a {lanes}-wide atomic takes "
                        f"{lanes} consecutive elements: T.Ramp(start, 1, {lanes}), a slice or the first element")


def _vector_add(lanes: int, dst: Any, value: Any, return_prev: bool, memory_order: str | None) -> Any:
    """``atomic_addx{lanes}``: each of the elements is updated atomically (as CUDA's vector
    atomicAdd guarantees: per element, not the vector as a whole)."""
    what = f"T.atomic_addx{lanes}"
    order = _order(what, memory_order)
    d_buf, d_idx = _lanes(f"{what} destination", dst, lanes)
    s_buf, s_idx = _lanes(f"{what} value", value, lanes)

    def add(lane: Any) -> Any:
        d = tirx.BufferLoad(d_buf, d_idx[:-1] + [d_idx[-1] + lane])
        s = tirx.BufferLoad(s_buf, s_idx[:-1] + [s_idx[-1] + lane])
        return rmw_element("add", d, s, order)

    if return_prev:  # the previous values as one vector, lane k = element k
        return tirx.Shuffle([add(lane) for lane in range(lanes)], [tirx.const(k, "int32") for k in range(lanes)])
    # a loop over the lanes, which a backend may make one vector add (CUDA's PackAtomicAdds:
    # float4 atomicAdd on sm_90, where the first element is aligned)
    with _ib.serial(0, lanes) as lane:
        _ib.evaluate(add(lane))
    return None


def atomic_addx2(dst: Any, value: Any, return_prev: bool = False, memory_order: str | None = None) -> Any:
    """Atomic add of 2 consecutive elements (``dst`` and ``value`` each an element where the
    pair starts, a 2-element buffer or a slice); ``return_prev`` gives a 2-lane vector."""
    return _vector_add(2, dst, value, return_prev, memory_order)


def atomic_addx4(dst: Any, value: Any, return_prev: bool = False, memory_order: str | None = None) -> Any:
    """Atomic add of 4 consecutive elements (see :func:`atomic_addx2`)."""
    return _vector_add(4, dst, value, return_prev, memory_order)


def atomic_load(src: Any, memory_order: str = "seq_cst") -> Any:
    """The value of one element, read atomically (``x = T.atomic_load(flag[0], "acquire")``)."""
    if not _element(src):
        raise LanguageError(f"T.atomic_load: expected a buffer element such as A[i], got {type(src).__name__}")
    return tirx.call_intrin(str(src.source.dtype), ATOMIC_LOAD_ELEMENT, src,
                            _order("T.atomic_load", memory_order, LOAD_ORDERS))


def atomic_store(dst: Any, src: Any, memory_order: str = "seq_cst") -> Any:
    """Write one element atomically (``T.atomic_store(flag[0], 1, memory_order="release")``)."""
    if not _element(dst):
        raise LanguageError(f"T.atomic_store: expected a buffer element such as A[i], got {type(dst).__name__}")
    return tirx.call_intrin("int32", ATOMIC_STORE_ELEMENT, dst, _cast(src, str(dst.source.dtype)),
                            _order("T.atomic_store", memory_order, STORE_ORDERS))


__all__ = ["atomic_add", "atomic_addx2", "atomic_addx4", "atomic_and", "atomic_load", "atomic_max",
           "atomic_min", "atomic_or", "atomic_store", "atomic_xor"]
