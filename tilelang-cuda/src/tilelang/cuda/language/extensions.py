"""CUDA language extensions. Each builds IR that TVM's CUDA codegen prints as the CUDA
intrinsic of the same name (CUDA C++ Programming Guide: warp shuffle functions, warp vote
functions, __syncthreads). Atomics are the common T.atomic_* (tilelang.language.atomic),
which this backend lowers to CUDA's atomic functions."""

from __future__ import annotations

from typing import Any

from tilelang.plugin import block_barrier
from tvm import tirx
from tvm.script.ir_builder import tirx as _ib

FULL_MASK = 0xFFFFFFFF


def _dtype(value: Any) -> str:
    ty = getattr(value, "ty", None)
    if ty is not None:
        return str(ty)
    return "float32" if isinstance(value, float) else "int32"


def _mask(mask: Any) -> Any:
    return tirx.const(mask, "uint32") if isinstance(mask, int) else mask


def sync_threads() -> Any:
    """__syncthreads(): every thread of the block reaches this point."""
    return _ib.evaluate(block_barrier().value)


def sync_warp(mask: int = FULL_MASK) -> Any:
    return _ib.evaluate(tirx.call_extern("int32", "__syncwarp", _mask(mask)))


def shfl_sync(value: Any, src_lane: Any, width: int = 32, mask: int = FULL_MASK) -> Any:
    return tirx.call_extern(_dtype(value), "__shfl_sync", _mask(mask), value, src_lane, width)


def shfl_xor(value: Any, lane_mask: Any, width: int = 32, mask: int = FULL_MASK) -> Any:
    return tirx.call_extern(_dtype(value), "__shfl_xor_sync", _mask(mask), value, lane_mask, width)


def shfl_down(value: Any, delta: Any, width: int = 32, mask: int = FULL_MASK) -> Any:
    return tirx.call_extern(_dtype(value), "__shfl_down_sync", _mask(mask), value, delta, width)


def shfl_up(value: Any, delta: Any, width: int = 32, mask: int = FULL_MASK) -> Any:
    return tirx.call_extern(_dtype(value), "__shfl_up_sync", _mask(mask), value, delta, width)


def activemask() -> Any:
    return tirx.call_extern("uint32", "__activemask")


def any_sync(predicate: Any, mask: int = FULL_MASK) -> Any:
    return tirx.call_extern("int32", "__any_sync", _mask(mask), predicate)


def all_sync(predicate: Any, mask: int = FULL_MASK) -> Any:
    return tirx.call_extern("int32", "__all_sync", _mask(mask), predicate)


def warp_reduce_sum(value: Any) -> Any:
    """Sum of ``value`` over the 32 lanes of a warp (butterfly of __shfl_xor_sync); every
    lane gets the total."""
    for offset in (16, 8, 4, 2, 1):
        value = value + shfl_xor(value, offset)
    return value
