"""ROCm language extensions. Each builds IR that the HIP source prints as the HIP device
function of the same name (HIP Programming Guide: "Warp Cross-Lane Functions",
"Synchronization Functions"). A wavefront has 64 lanes on the CDNA GPUs this backend
targets; shuffles take a ``width`` (a power of two up to 64) and no member mask, since a
wavefront's lanes execute in lockstep. Atomics are the common T.atomic_*
(tilelang.language.atomic), which this backend lowers to HIP's atomic functions."""

from __future__ import annotations

from typing import Any

from tilelang.errors import LanguageError
from tilelang.plugin import block_barrier
from tvm import tirx
from tvm.script.ir_builder import tirx as _ib

WAVEFRONT = 64


def _dtype(value: Any) -> str:
    ty = getattr(value, "ty", None)
    if ty is not None:
        return str(ty)
    return "float32" if isinstance(value, float) else "int32"


def _width(width: int, what: str) -> int:
    if width not in (1, 2, 4, 8, 16, 32, 64):
        raise LanguageError(f"T.{what}(..., width={width}): the width is a power of two up to the "
                            f"wavefront's {WAVEFRONT} lanes")
    return width


def sync_threads() -> Any:
    """__syncthreads(): every thread of the block reaches this point (s_barrier)."""
    return _ib.evaluate(block_barrier().value)


def shfl(value: Any, src_lane: Any, width: int = WAVEFRONT) -> Any:
    """The value ``value`` has in lane ``src_lane`` (of each group of ``width`` lanes)."""
    return tirx.call_extern(_dtype(value), "__shfl", value, src_lane, _width(width, "shfl"))


def shfl_xor(value: Any, lane_mask: Any, width: int = WAVEFRONT) -> Any:
    return tirx.call_extern(_dtype(value), "__shfl_xor", value, lane_mask, _width(width, "shfl_xor"))


def shfl_down(value: Any, delta: Any, width: int = WAVEFRONT) -> Any:
    return tirx.call_extern(_dtype(value), "__shfl_down", value, delta, _width(width, "shfl_down"))


def shfl_up(value: Any, delta: Any, width: int = WAVEFRONT) -> Any:
    return tirx.call_extern(_dtype(value), "__shfl_up", value, delta, _width(width, "shfl_up"))


def ballot(predicate: Any) -> Any:
    """A 64-bit mask with bit i set when ``predicate`` holds in lane i."""
    return tirx.call_extern("uint64", "__ballot", predicate)


def any_lane(predicate: Any) -> Any:
    return tirx.call_extern("int32", "__any", predicate)


def all_lanes(predicate: Any) -> Any:
    return tirx.call_extern("int32", "__all", predicate)


def lane_id() -> Any:
    """This thread's lane in its wavefront (0..63)."""
    return tirx.call_extern("int32", "__lane_id")


def wave_reduce_sum(value: Any) -> Any:
    """Sum of ``value`` over the 64 lanes of a wavefront (butterfly of __shfl_xor); every
    lane gets the total."""
    offset = WAVEFRONT // 2
    while offset:
        value = value + shfl_xor(value, offset)
        offset //= 2
    return value
