"""A mask given as a GEMM's starting value, applied after the GEMM where it masks anything.

Upstream's causal attention writes the mask into the score tile before the GEMM adds the
product to it::

    for i, j in T.Parallel(block_M, block_N):
        acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0, -T.infinity(accum))
    T.gemm(Q_shared, K_shared, acc_s, transpose_B=True)

Every key block pays a select per element, and the GEMM cannot start from zero, although
only the blocks that cross the diagonal mask anything. This pass rewrites the pair as
FlashAttention-2/3 schedule it: the tile is cleared, the GEMM runs, and the select runs
after it under a condition that holds where some element is masked::

    T.clear(acc_s)
    T.gemm(Q_shared, K_shared, acc_s, transpose_B=True)
    if bx * block_M - (k * block_N + block_N - 1) < 0:     # not every element kept
        for i, j in T.Parallel(block_M, block_N):
            acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, acc_s[i, j], -inf)

For finite products the result is the same to the bit: x + 0 is x, and x + -inf is -inf,
which the select writes directly. (A masked element whose product is +inf or NaN is -inf
here, where the kernel as written would hold NaN.) The condition comes from the interval of
each comparison over the loop's ranges (``Analyzer.int_set``): it is skipped only where its
lower or upper bound proves the comparison for the whole tile, so a loose bound costs a
select, never a wrong element.

What is rewritten: a T.Parallel nest over the whole accumulator storing
``if_then_else(cond, 0, ±inf)`` (or the branches swapped), directly followed by a T.gemm
into that accumulator without ``clear_accum``, where ``cond`` reads no memory and is a
comparison of integers, or an ``and`` of such (in the 0 branch).

Where: on sm_90 wgmma kernels, where it was measured (docs/benchmarks/h200-2026-12-02-causal.md,
docs/benchmarks/h200-2026-12-02-mask.md). By default it is kept unless a second block may share
the SM while nothing holds the registers to a budget. The select after the GEMM keeps its
index arithmetic live beside the accumulator: a head-dim-64 kernel of 256 threads with room
for two blocks, whose launch bounds promise no block count, went from 126 registers to 147,
past the 128 that two resident blocks allow, and ran 18% slower. Kept:

- one block per SM (shared tiles of 114 KiB and more): registers do not bound the blocks
  (head dim 128, 128x128 tiles: 7% faster);
- launch bounds that promise blocks per SM (the tensor-core lowering's occupancy plan,
  ``tensor_core.planned_blocks_per_sm``): ptxas keeps the rewritten kernel within their
  budget, and it needed no more registers than as written (64x64 tiles of 128 threads: 11%
  faster at head dim 64, 3% at 128; 128x64 tiles: 9%). One case lost: head dim 128, 64x64
  tiles, 1 stage, 2% slower.

Left as written where two blocks fit and the bounds promise none (and where
``tl.min_blocks_per_sm`` forces a count: a budget the kernel need not fit, as the same
kernel pinned to two blocks spilled and ran 9% slower than as written).
``tl.mask_after_gemm`` True rewrites wherever the pattern is, False never.
"""

from __future__ import annotations

import math
from typing import Any

import tvm
import tvm_ffi
from tilelang.plugin import (
    TILE_OPS,
    buffer_accesses,
    is_full_region,
    pass_config,
    prim_func_pass,
    tile_op_name,
)
from tvm import tirx
from tvm.sym import IntervalSet
from tvm.sym.analyzer import Analyzer

from .cp_async import SMEM_PER_SM
from .occupancy import MIN_BLOCKS_CONFIG, SMEM_RESERVED_PER_BLOCK
from .shared_memory import staged_shared_bytes
from .tensor_core import planned_blocks_per_sm
from .wgmma import on_wgmma

CONFIG = "tl.mask_after_gemm"
_COMPARISONS = (tirx.GE, tirx.GT, tirx.LE, tirx.LT)


def _parallel_nest(stmt: Any) -> tuple[list[Any], Any] | None:
    """(loops, innermost store) of a T.Parallel nest whose body is one store, else None."""
    loops = []
    while isinstance(stmt, tirx.For) and "tilelang.parallel" in (stmt.annotations or {}):
        loops.append(stmt)
        stmt = stmt.body
    return (loops, stmt) if loops and isinstance(stmt, tirx.BufferStore) else None


def _float_value(expr: Any) -> float | None:
    return float(expr.value) if isinstance(expr, tirx.FloatImm) else None


def _mask_select(value: Any) -> tuple[Any, bool, Any] | None:
    """(condition, whether the condition keeps the element, the masking value) of
    ``if_then_else(cond, 0, ±inf)`` or ``if_then_else(cond, ±inf, 0)``, else None."""
    if isinstance(value, tirx.Select):
        cond, a, b = value.condition, value.true_value, value.false_value
    elif isinstance(value, tvm.ir.Call) and getattr(value.op, "name", "") in ("prim.if_then_else",
                                                                              "tirx.if_then_else"):
        cond, a, b = value.args
    else:
        return None
    fa, fb = _float_value(a), _float_value(b)
    if fa == 0.0 and fb is not None and math.isinf(fb):
        return cond, True, b
    if fb == 0.0 and fa is not None and math.isinf(fa):
        return cond, False, a
    return None


def _comparisons(cond: Any) -> list[Any] | None:
    """The integer comparisons whose conjunction ``cond`` is, or None."""
    if isinstance(cond, tirx.And):
        left, right = _comparisons(cond.a), _comparisons(cond.b)
        return None if left is None or right is None else left + right
    if isinstance(cond, _COMPARISONS) and "int" in str(cond.a.dtype):
        return [cond]
    return None


def _fails_somewhere(comparison: Any, domain: dict, analyzer: Any) -> Any:
    """A condition that holds wherever ``comparison`` may be false for some element of the
    tile (the difference of its sides bounded over the loops' ranges)."""
    bounds = analyzer.int_set(comparison.a - comparison.b, domain)
    low, high = bounds.min_value, bounds.max_value
    if isinstance(comparison, tirx.GE):
        return low < 0
    if isinstance(comparison, tirx.GT):
        return low <= 0
    if isinstance(comparison, tirx.LE):
        return high > 0
    return high >= 0  # LT


def _finite(expr: Any) -> bool:
    """An interval bound the analyzer found (not its positive or negative infinity)."""
    return not isinstance(expr, tvm.ir.Call) and "inf" not in str(expr)


class _Rewrite:
    def __init__(self) -> None:
        self.analyzer = Analyzer()

    def pair(self, nest_stmt: Any, gemm_stmt: Any) -> list[Any] | None:
        """The statements replacing (mask nest, GEMM), or None when the pair is not one."""
        nest = _parallel_nest(nest_stmt)
        if nest is None or tile_op_name(gemm_stmt) != "gemm":
            return None
        loops, store = nest
        args = gemm_stmt.value.args
        accumulator = store.buffer
        if len(args) < 6 or not (isinstance(args[5], tirx.IntImm) and args[5].value == 0):
            return None  # clear_accum: the GEMM overwrites the tile
        region = args[2]
        if not region.source.same_as(accumulator) or not is_full_region(region):
            return None
        if len(loops) != len(accumulator.shape) or any(
                not (isinstance(loop.min, tirx.IntImm) and loop.min.value == 0) or
                not tvm_ffi.structural_equal(loop.extent, extent) or not index.same_as(loop.loop_var)
                for loop, extent, index in zip(loops, accumulator.shape, store.indices)):
            return None  # not the whole tile, element by element
        select = _mask_select(store.value)
        if select is None or "float" not in str(accumulator.dtype):
            return None
        cond, keeps, masked = select
        comparisons = _comparisons(cond) if keeps else None
        if comparisons is None and not keeps and isinstance(cond, _COMPARISONS) and "int" in str(cond.a.dtype):
            comparisons = [_negate(cond)]  # masked where cond holds: kept where its negation does
        if comparisons is None or buffer_accesses(cond):  # a condition that reads memory
            return None
        domain = {loop.loop_var: IntervalSet(loop.min, loop.min + loop.extent - 1) for loop in loops}
        fails = [self.analyzer.simplify(_fails_somewhere(c, domain, self.analyzer)) for c in comparisons]
        if not all(_finite(f) for f in fails):
            return None
        element = tirx.BufferLoad(accumulator, list(store.indices))
        new_value = (tirx.if_then_else(cond, element, masked) if keeps else tirx.if_then_else(cond, masked, element))
        masked_nest = tirx.BufferStore(accumulator, new_value, list(store.indices))
        for loop in reversed(loops):
            masked_nest = tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, masked_nest,
                                   loop.thread_binding, loop.annotations, loop.step)
        needed = fails[0]
        for f in fails[1:]:
            needed = tirx.Or(needed, f)
        clear = tirx.Evaluate(tvm.ir.Call(tvm.ir.Op.get(TILE_OPS["fill"]), [region, tirx.const(0, str(accumulator.dtype))],
                                          ret_ty="int32"))  # T.clear(acc)
        return [clear, gemm_stmt, tirx.IfThenElse(needed, masked_nest, None)]

    def seq(self, stmt: Any) -> Any:
        items = list(stmt.seq)
        out: list[Any] = []
        i = 0
        while i < len(items):
            replaced = self.pair(items[i], items[i + 1]) if i + 1 < len(items) else None
            out.extend([items[i]] if replaced is None else replaced)
            i += 1 if replaced is None else 2
        return tirx.SeqStmt(out) if len(out) != len(items) else stmt


def _negate(comparison: Any) -> Any:
    negations = {tirx.GE: tirx.LT, tirx.GT: tirx.LE, tirx.LE: tirx.GT, tirx.LT: tirx.GE}
    return negations[type(comparison)](comparison.a, comparison.b)


def _registers_may_cost_a_block(func: Any, tensor_maps: bool) -> bool:
    """Whether two blocks may share an SM while nothing holds their registers to a budget:
    the shared tiles leave room for a second block, and the tensor-core lowering's occupancy
    plan promises no block count in the launch bounds (a pass config that forces one is the
    user's budget, not a plan that fits)."""
    if 2 * (staged_shared_bytes(func.body) + SMEM_RESERVED_PER_BLOCK) > SMEM_PER_SM:
        return False
    return pass_config(MIN_BLOCKS_CONFIG) is not None or not planned_blocks_per_sm(func, tensor_maps)


def _run(func: Any, tensor_maps: bool = False) -> Any:
    wanted = pass_config(CONFIG)
    if wanted is False or not on_wgmma(func):
        return func
    body = tvm_ffi.structural_map(func.body, (tirx.SeqStmt, _Rewrite().seq), order="post")
    if body.same_as(func.body):
        return func
    rewritten = func.with_body(body)
    if wanted is None and _registers_may_cost_a_block(rewritten, tensor_maps):
        return func
    return rewritten


def MaskAfterGemm(tensor_maps: bool = False) -> Any:
    """``tensor_maps``: as LowerTensorCoreGemm's (a TMA ring's producer warp counts in the
    occupancy plan)."""
    return prim_func_pass(lambda func, mod, ctx: _run(func, tensor_maps), "tl.cuda.MaskAfterGemm", per_kernel=True)


__all__ = ["CONFIG", "MaskAfterGemm"]
