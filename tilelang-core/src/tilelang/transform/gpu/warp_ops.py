"""LowerWarpOps: the warp ops of ``tilelang.language.warp`` -> a GPU dialect's functions,
given as data (:class:`WarpFunctions`), over the dialect's warp size.

* Shuffles, votes, ballots, matches, ``sync_warp`` and the counting block barriers become
  calls of the dialect's functions. A dialect whose functions take the member mask first
  (CUDA's ``*_sync``) gets it; one without masks (HIP: the whole wavefront) does not.
* A ballot narrower than 64 bits (CUDA's 32-lane ``__ballot_sync``) is widened to uint64,
  the type upstream gives ``T.ballot*`` and ``T.activemask``; a dialect without an
  ``activemask`` function takes ``ballot(1)``.
* Shuffles of 8- and 16-bit integers and of bool travel as 32-bit integers (the dialects
  shuffle 32- and 64-bit words, and halves).
* ``T.warp_reduce_*`` is a butterfly of xor shuffles over the whole warp (log2(warp size)
  steps, each step's value bound once), so every lane gets the result.
* ``T.get_lane_idx`` / ``T.get_warp_idx``: the linear thread index % and // the warp size
  the kernel gave, else the dialect's.

An op the dialect has no function for (CUDA's ``__match_any_sync`` has no HIP counterpart)
is a LanguageError naming it and the vendor.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ...backend.pass_pipeline import prim_func_pass
from ...errors import LanguageError
from ...language import ops

_SHUFFLES = (ops.SHFL_SYNC, ops.SHFL_XOR, ops.SHFL_DOWN, ops.SHFL_UP)
_MASKED = (*_SHUFFLES, ops.SYNC_WARP, ops.ANY_SYNC, ops.ALL_SYNC, ops.BALLOT_SYNC, ops.MATCH_ANY_SYNC,
           ops.MATCH_ALL_SYNC)
_NARROW = {"int8": "int32", "int16": "int32", "uint8": "uint32", "uint16": "uint32", "bool": "int32"}


@dataclass(frozen=True)
class WarpFunctions:
    """A dialect's warp functions. ``functions``: warp op (``tilelang.language.ops``
    ``SHFL_*``, ``SYNC_WARP``, ``ANY_SYNC``, ``ALL_SYNC``, ``BALLOT_SYNC``, ``ACTIVEMASK``,
    ``MATCH_*``, ``SYNCTHREADS_*``) -> the function's name; an op left out is one the
    dialect does not have. ``masked``: the functions take the member mask as their first
    argument. ``ballot_bits``: the width of the ballot function's result. ``vendor`` names
    the dialect in error messages."""

    vendor: str
    warp_size: int
    functions: Mapping[str, str]
    masked: bool = True
    ballot_bits: int = 64


class _Lowering:
    def __init__(self, functions: WarpFunctions) -> None:
        self.f = functions
        self.missing: set[str] = set()

    def extern(self, op: str, dtype: str, *args: Any) -> Any:
        name = self.f.functions.get(op)
        if name is None:
            self.missing.add(ops.WARP_OPS[op])
            return tirx.const(0, dtype)
        return tirx.call_extern(dtype, name, *args)

    def masked(self, op: str, dtype: str, mask: Any, *args: Any) -> Any:
        return self.extern(op, dtype, *((mask,) if self.f.masked else ()), *args)

    def ballot(self, mask: Any, predicate: Any) -> Any:
        bits = self.masked(ops.BALLOT_SYNC, f"uint{self.f.ballot_bits}", mask, predicate)
        return bits if self.f.ballot_bits == 64 else tirx.Cast("uint64", bits)

    def shuffle(self, op: str, mask: Any, value: Any, lane: Any, width: Any) -> Any:
        dtype = str(value.ty)
        wide = _NARROW.get(dtype)
        if wide is None:
            return self.masked(op, dtype, mask, value, lane, width)
        return tirx.Cast(dtype, self.masked(op, wide, mask, tirx.Cast(wide, value), lane, width))

    def warp_reduce(self, kind: str, value: Any) -> Any:
        """A butterfly: log2(warp size) xor shuffles, each step's value bound once."""
        dtype = str(value.ty)
        full = tirx.const((1 << min(self.f.warp_size, 32)) - 1, "uint32")
        combine = {"sum": lambda a, b: a + b, "max": tirx.max, "min": tirx.min,
                   "bitand": tirx.bitwise_and, "bitor": tirx.bitwise_or}[kind]
        steps: list[tuple[Any, Any]] = []
        current = value
        offset = self.f.warp_size // 2
        while offset >= 1:
            var = tirx.Var(f"warp_{kind}_{offset}", dtype)
            steps.append((var, current))
            other = self.shuffle(ops.SHFL_XOR, full, var, tirx.const(offset, "int32"),
                                 tirx.const(self.f.warp_size, "int32"))
            current = combine(var, other)
            offset //= 2
        for var, bound in reversed(steps):
            current = tirx.Let(var, bound, current)
        return current

    def position(self, op: str, tid: Any, size: Any) -> Any:
        if isinstance(size, tirx.IntImm) and size.value == 0:
            size = tirx.const(self.f.warp_size, "int32")
        return tirx.floormod(tid, size) if op == ops.LANE_IDX else tirx.floordiv(tid, size)

    def on_call(self, call: Any) -> Any:
        name = getattr(getattr(call, "op", None), "name", None)
        if name not in ops.WARP_OPS:
            return call
        args, dtype = list(call.args), str(call.ty)
        if name in _SHUFFLES:
            return self.shuffle(name, *args)
        if name == ops.BALLOT_SYNC:
            return self.ballot(*args)
        if name == ops.ACTIVEMASK:
            if ops.ACTIVEMASK not in self.f.functions:
                return self.ballot(tirx.const(0xFFFFFFFF, "uint32"), tirx.const(1, "int32"))
            bits = self.extern(ops.ACTIVEMASK, f"uint{self.f.ballot_bits}")
            return bits if self.f.ballot_bits == 64 else tirx.Cast("uint64", bits)
        if name in _MASKED:
            return self.masked(name, dtype, *args)
        if name == ops.WARP_REDUCE:
            return self.warp_reduce(ops.WARP_REDUCE_KINDS[int(args[0].value)], args[1])
        if name in (ops.LANE_IDX, ops.WARP_IDX):
            return self.position(name, *args)
        return self.extern(name, dtype, *args)  # the counting block barriers


def LowerWarpOps(functions: WarpFunctions, name: str = "tl.gpu.LowerWarpOps") -> Any:
    def run(func: Any, mod: Any, ctx: Any) -> Any:
        if not ops.WARP_OPS.keys() & ops.tl_op_names_in(func.body):
            return func
        kernel = str(func.attrs.get("global_symbol", "main")) if func.attrs else "main"
        lowering = _Lowering(functions)
        body = tvm_ffi.structural_map(func.body, (tvm.ir.Call, lowering.on_call), order="post")
        if lowering.missing:  # raised after the walk: FFI callbacks lose the exception type
            raise LanguageError(
                f"kernel {kernel!r} uses {', '.join(sorted(lowering.missing))}, which {functions.vendor} does not "
                "have; write it without, or compile for a backend that has it")
        return func.with_body(body)

    return prim_func_pass(run, name)


__all__ = ["LowerWarpOps", "WarpFunctions"]
