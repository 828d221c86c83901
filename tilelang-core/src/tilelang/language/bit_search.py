"""``T.__ffs``, upstream's spelling of CUDA's ``__ffs`` / ``__ffsll``, as integer arithmetic
every backend compiles (CUDA prints the population count as ``__popc``): the one-based
position of the lowest set bit of a 32- or 64-bit integer, 0 when it is 0, as int32.

``T.__fns(mask, base, offset)`` is CUDA's ``__fns``, as upstream has it (CUDA only): the
position of the ``offset``-th set bit of a 32-bit ``mask`` counting from bit ``base``
upwards (``offset`` > 0) or downwards (< 0), ``base`` itself when ``offset`` is 0 and the
bit is set, else 0xFFFFFFFF; uint32. It is an op each GPU dialect's warp functions name
(``tl.fns``); a backend without it refuses the kernel by name. (Written as arithmetic, a
search of 32 bits bound as lets, TVM's C-family code generators printed each let's value
at every use and the source grew past what compiles in minutes.)
"""

from __future__ import annotations

from typing import Any

from tvm import tirx

from ..errors import LanguageError


def _integer(value: Any, what: str, bits: tuple[int, ...] = (32, 64)) -> Any:
    value = tirx.convert(value) if not isinstance(value, int) else tirx.const(value, "int32")
    dtype = str(value.ty.dtype)
    if not dtype.startswith(("int", "uint")) or int(dtype.lstrip("uint")) not in bits:
        raise LanguageError(f"{what}: expected a {' or '.join(map(str, bits))}-bit integer, got {dtype}")
    return value


def _unsigned(value: Any) -> Any:
    dtype = str(value.ty.dtype)
    return value if dtype.startswith("uint") else tirx.reinterpret("u" + dtype, value)


def ffs(value: Any) -> Any:
    """``T.__ffs(x)`` (see the module docstring)."""
    x = _unsigned(_integer(value, "T.__ffs"))
    dtype = str(x.ty.dtype)
    # x ^ (x - 1): the lowest set bit and every bit below it; their count is its position
    up_to_lowest = tirx.bitwise_xor(x, x - tirx.const(1, dtype))
    return tirx.Select(x == tirx.const(0, dtype), tirx.const(0, "int32"),
                       tirx.Cast("int32", tirx.popcount(up_to_lowest)))


def fns(mask: Any, base: Any, offset: Any) -> Any:
    """``T.__fns(mask, base, offset)`` (see the module docstring)."""
    from . import ops

    mask = _integer(mask, "T.__fns mask", bits=(32,))
    base = _integer(base, "T.__fns base", bits=(32, 64))
    offset = _integer(offset, "T.__fns offset", bits=(32, 64))
    return tirx.call_intrin("uint32", ops.FNS, _unsigned(mask), tirx.Cast("uint32", base),
                            tirx.Cast("int32", offset))
