"""Warp-level intrinsics as upstream TileLang spells them: shuffles (``T.shfl_sync``,
``T.shfl_xor``, ``T.shfl_down``, ``T.shfl_up``), votes (``T.any_sync``, ``T.all_sync``,
``T.ballot_sync``, ``T.ballot``, ``T.activemask``, ``T.match_any_sync``,
``T.match_all_sync``), ``T.sync_warp``, block barriers that count a predicate
(``T.syncthreads_count/and/or``), warp reductions (``T.warp_reduce_sum/max/min/bitand/bitor``)
and the lane and warp of the calling thread (``T.get_lane_idx``, ``T.get_warp_idx``,
``T.get_warp_idx_sync``).

Each builds a backend-neutral op (``tl.shfl_xor_sync``, ``tl.any_sync``, ...; ops.WARP_OPS).
A GPU backend lowers them with its own functions and warp size
(``tilelang.plugin.WarpFunctions``: CUDA's ``__shfl_xor_sync`` over 32 lanes, HIP's
``__shfl_xor`` over 64); a backend that runs a block's threads one after another (the CPU)
has no warps and refuses the kernel with a compile error naming the call.

Results follow upstream: shuffles keep the value's type; votes are int32; ballots and
``activemask`` are uint64 (bit i = lane i; a 32-lane warp leaves the upper half zero);
matches are uint32.
"""

from __future__ import annotations

from typing import Any

from tvm import tirx
from tvm.script.ir_builder import tirx as _ib

from ..errors import LanguageTypeError
from . import ops
from .barriers import _linear_thread

#: every lane of a 32-lane warp (upstream's default mask; a 64-lane backend ignores masks)
FULL_MASK = 0xFFFFFFFF
DEFAULT_WIDTH = 32


def _expr(value: Any, what: str) -> Any:
    if isinstance(value, bool):
        return tirx.const(value, "bool")
    if isinstance(value, int):
        return tirx.const(value, "int32")
    if isinstance(value, float):
        return tirx.const(value, "float32")
    if not hasattr(value, "ty"):
        raise LanguageTypeError(f"T.{what}: expected a scalar expression, got {type(value).__name__}")
    return value


def _mask(mask: Any) -> Any:
    return tirx.const(mask, "uint32") if isinstance(mask, int) else mask


def _call(op: str, dtype: str, *args: Any) -> Any:
    return tirx.call_intrin(dtype, op, *args)


def _predicate(predicate: Any, what: str) -> Any:
    """An integer or boolean condition (upstream refuses a float one: a lossy test)."""
    value = _expr(predicate, what)
    dtype = str(value.ty)
    if not dtype.startswith(("int", "uint", "bool")):
        raise LanguageTypeError(f"T.{what} requires an integer or boolean predicate, but got {dtype}; "
                                f"compare it first, e.g. T.{what}(x != 0)")
    return value


def _shuffle(op: str, what: str, value: Any, lane: Any, width: Any, mask: Any) -> Any:
    value = _expr(value, what)
    return _call(op, str(value.ty), _mask(mask), value, _expr(lane, what), _expr(width, what))


def shfl_sync(value: Any, srcLane: Any, width: Any = DEFAULT_WIDTH, mask: Any = FULL_MASK) -> Any:
    """``value`` of lane ``srcLane`` of each group of ``width`` lanes."""
    return _shuffle(ops.SHFL_SYNC, "shfl_sync", value, srcLane, width, mask)


def shfl_xor(value: Any, delta: Any, width: Any = DEFAULT_WIDTH, mask: Any = FULL_MASK) -> Any:
    """``value`` of lane ``lane ^ delta`` (the butterfly of a warp reduction)."""
    return _shuffle(ops.SHFL_XOR, "shfl_xor", value, delta, width, mask)


def shfl_down(value: Any, delta: Any, width: Any = DEFAULT_WIDTH, mask: Any = FULL_MASK) -> Any:
    """``value`` of lane ``lane + delta`` (a lane past its group keeps its own)."""
    return _shuffle(ops.SHFL_DOWN, "shfl_down", value, delta, width, mask)


def shfl_up(value: Any, delta: Any, width: Any = DEFAULT_WIDTH, mask: Any = FULL_MASK) -> Any:
    """``value`` of lane ``lane - delta`` (a lane before its group's start keeps its own)."""
    return _shuffle(ops.SHFL_UP, "shfl_up", value, delta, width, mask)


def sync_warp(mask: Any = None) -> Any:
    """Every lane of ``mask`` (default: the whole warp) reaches this point."""
    return _ib.evaluate(_call(ops.SYNC_WARP, "int32", _mask(FULL_MASK if mask is None else mask)))


def any_sync(predicate: Any, mask: Any = FULL_MASK) -> Any:
    """Non-zero where some lane of ``mask`` has a non-zero ``predicate``."""
    return _call(ops.ANY_SYNC, "int32", _mask(mask), _predicate(predicate, "any_sync"))


def all_sync(predicate: Any, mask: Any = FULL_MASK) -> Any:
    """Non-zero where every lane of ``mask`` has a non-zero ``predicate``."""
    return _call(ops.ALL_SYNC, "int32", _mask(mask), _predicate(predicate, "all_sync"))


def ballot_sync(predicate: Any, mask: Any = FULL_MASK) -> Any:
    """uint64 with bit i set where lane i's ``predicate`` is non-zero."""
    return _call(ops.BALLOT_SYNC, "uint64", _mask(mask), _predicate(predicate, "ballot_sync"))


def ballot(predicate: Any) -> Any:
    """``T.ballot_sync`` over the whole warp."""
    return _call(ops.BALLOT_SYNC, "uint64", _mask(FULL_MASK), _predicate(predicate, "ballot"))


def activemask() -> Any:
    """uint64 with bit i set where lane i runs this call."""
    return _call(ops.ACTIVEMASK, "uint64")


def match_any_sync(value: Any, mask: Any = FULL_MASK) -> Any:
    """uint32 of the lanes of ``mask`` whose ``value`` equals this lane's."""
    return _call(ops.MATCH_ANY_SYNC, "uint32", _mask(mask), _expr(value, "match_any_sync"))


def match_all_sync(value: Any, mask: Any = FULL_MASK) -> Any:
    """``mask`` where every lane of it has the same ``value``, else 0 (uint32)."""
    return _call(ops.MATCH_ALL_SYNC, "uint32", _mask(mask), _expr(value, "match_all_sync"))


def syncthreads_count(predicate: Any) -> Any:
    """A block barrier whose value is the number of threads with a non-zero ``predicate``."""
    return _call(ops.SYNCTHREADS_COUNT, "int32", _predicate(predicate, "syncthreads_count"))


def syncthreads_and(predicate: Any) -> Any:
    """A block barrier whose value is non-zero where every thread's ``predicate`` is."""
    return _call(ops.SYNCTHREADS_AND, "int32", _predicate(predicate, "syncthreads_and"))


def syncthreads_or(predicate: Any) -> Any:
    """A block barrier whose value is non-zero where some thread's ``predicate`` is."""
    return _call(ops.SYNCTHREADS_OR, "int32", _predicate(predicate, "syncthreads_or"))


def _warp_reduce(kind: str, value: Any) -> Any:
    value = _expr(value, f"warp_reduce_{kind}")
    dtype = str(value.ty)
    if kind in ("bitand", "bitor") and not dtype.startswith(("int", "uint")):
        raise LanguageTypeError(f"T.warp_reduce_{kind} combines bits: it needs an integer value, but got {dtype}")
    return _call(ops.WARP_REDUCE, dtype, tirx.const(ops.WARP_REDUCE_KINDS.index(kind), "int32"), value)


def warp_reduce_sum(value: Any) -> Any:
    """The sum of ``value`` over the lanes of the warp; every lane gets it."""
    return _warp_reduce("sum", value)


def warp_reduce_max(value: Any) -> Any:
    """The largest ``value`` of the warp's lanes; every lane gets it."""
    return _warp_reduce("max", value)


def warp_reduce_min(value: Any) -> Any:
    """The smallest ``value`` of the warp's lanes; every lane gets it."""
    return _warp_reduce("min", value)


def warp_reduce_bitand(value: Any) -> Any:
    """The bitwise and of ``value`` over the warp's lanes; every lane gets it."""
    return _warp_reduce("bitand", value)


def warp_reduce_bitor(value: Any) -> Any:
    """The bitwise or of ``value`` over the warp's lanes; every lane gets it."""
    return _warp_reduce("bitor", value)


def _thread_position(op: str, what: str, warp_size: Any) -> Any:
    if warp_size is None:
        size = tirx.const(0, "int32")  # the backend's warp size
    elif isinstance(warp_size, int) and not isinstance(warp_size, bool):
        if warp_size <= 0:
            raise LanguageTypeError(f"T.{what}({warp_size}): the warp size must be positive")
        size = tirx.const(warp_size, "int32")
    else:
        size = _expr(warp_size, what)
    return _call(op, "int32", _linear_thread(f"T.{what}"), size)


def get_lane_idx(warp_size: Any = None) -> Any:
    """The calling thread's lane: its linear thread index % ``warp_size`` (default: the
    backend's warp size, 32 on CUDA, 64 on AMD)."""
    return _thread_position(ops.LANE_IDX, "get_lane_idx", warp_size)


def get_warp_idx(warp_size: Any = None) -> Any:
    """The calling thread's warp: its linear thread index // ``warp_size``."""
    return _thread_position(ops.WARP_IDX, "get_warp_idx", warp_size)


def get_warp_idx_sync(warp_size: Any = None) -> Any:
    """``T.get_warp_idx`` (upstream's variant for converged warps; the value is the same)."""
    return _thread_position(ops.WARP_IDX, "get_warp_idx_sync", warp_size)


__all__ = [
    "activemask", "all_sync", "any_sync", "ballot", "ballot_sync", "get_lane_idx", "get_warp_idx",
    "get_warp_idx_sync", "match_all_sync", "match_any_sync", "shfl_down", "shfl_sync", "shfl_up",
    "shfl_xor", "sync_warp", "syncthreads_and", "syncthreads_count", "syncthreads_or", "warp_reduce_bitand",
    "warp_reduce_bitor", "warp_reduce_max", "warp_reduce_min", "warp_reduce_sum",
]
