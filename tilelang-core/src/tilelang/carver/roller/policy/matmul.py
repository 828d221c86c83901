"""A small GEMM tile search — not upstream's roller.

Upstream's roller analyses a TE compute graph and models traffic through each memory level.
This one enumerates GEMM tiles (block M/N/K, warp split, pipeline stages), keeps those that
fit the device (shared memory per block, registers per thread and per SM, threads per SM)
and ranks them with a roofline estimate:

    time of one block  = K * max(bm * bn / MACS, (bm + bn) * bytes / BANDWIDTH)
                         * (1 + 1 / (2 * stages * blocks_per_sm))     # latency not hidden
    time of the kernel = waves * blocks_per_sm * time of one block

where waves = ceil(blocks / (SMs * blocks_per_sm)) — or blocks / blocks_per_sm when the SM
count is unknown (no device) — and MACS / BANDWIDTH are per-SM per-clock rates: the matrix
units' where the device multiplies the operand and accumulator types there (its
``tensorcore_precisions()``: on CUDA fp16/bf16 from sm_70, int8 and float32 as TF32 from
sm_80, fp8 from sm_89; 32 bytes of K per step, so TF32 at half fp16's rate and 8-bit types
at twice it), else its ``fma_per_clock``; ``bytes_per_clock`` from L2. It ranks tiles, it
does not predict time: measure the candidates (``tilelang.autotune``).
"""

from __future__ import annotations

import math
from itertools import product
from typing import Any

from ...arch.arch_base import is_tensorcore_supported_precision
from ..hint import Hint
from ..rasterization import NoRasterization, Rasterization2DColumn

_TILES = (32, 64, 128, 256)
_STEPS = (32, 64)
_WARPS = (4, 8)
# per-SM per-clock dense fp16 tensor-core MACs (CUDA Programming Guide throughput tables,
# rounded); SIMT FMAs and L2 bytes are the device's (TileDevice.fma_per_clock, bytes_per_clock)
TENSOR_MACS = 1024
_MAX_REGS_PER_THREAD = 255


def dtype_bytes(dtype: str) -> int:
    """Bytes of one element (at least one: 4-bit types are counted as bytes)."""
    from tvm import DataType

    return max(1, DataType(str(dtype)).bits // 8)


def mac_rate(in_dtype: str, accum_dtype: str, arch: Any) -> tuple[bool, int]:
    """(whether the device's matrix units take the types, multiply-adds per SM per clock):
    the matrix units move 32 bytes of K per step (TF32 at half fp16's rate, 8-bit types at
    twice it), else the device's ``fma_per_clock``."""
    if is_tensorcore_supported_precision(in_dtype, accum_dtype, arch):
        return True, TENSOR_MACS * 2 // dtype_bytes(in_dtype)
    return False, arch.fma_per_clock


def _warp_split(bm: int, bn: int, warps: int, quantum: int) -> tuple[int, int] | None:
    """The warp tile (wm, wn) with wm * wn * warps = bm * bn closest to square."""
    best = None
    for rows in (1, 2, 4, 8):
        cols = warps // rows
        if rows * cols != warps or bm % rows or bn % cols:
            continue
        wm, wn = bm // rows, bn // cols
        if wm % quantum or wn % quantum:
            continue
        if best is None or abs(math.log2(wm / wn)) < abs(math.log2(best[0] / best[1])):
            best = (wm, wn)
    return best


def matmul_hints(M: int, N: int, K: int, in_dtype: str, accum_dtype: str, arch: Any,
                 topk: int = 10) -> list[Hint]:
    """Up to ``topk`` GEMM configurations for ``arch`` (a ``tilelang.carver.arch`` device),
    best first."""
    use_tc, macs = mac_rate(in_dtype, accum_dtype, arch)
    quantum = 16 if use_tc else 8
    in_bytes, acc_bytes = dtype_bytes(in_dtype), dtype_bytes(accum_dtype)
    stages = (2, 3, 4) if getattr(arch, "sm_version", 0) >= 80 else (1,)
    sms = arch.compute_max_core
    fit_m, fit_n, fit_k = (max(32, 1 << (max(d, 1) - 1).bit_length()) for d in (M, N, K))
    hints = []
    for bm, bn, bk, warps, stage in product(_TILES, _TILES, _STEPS, _WARPS, stages):
        if bm > fit_m or bn > fit_n or bk > fit_k:
            continue
        split = _warp_split(bm, bn, warps, quantum)
        if split is None:
            continue
        threads = warps * arch.warp_size
        smem = stage * (bm + bn) * bk * in_bytes
        # accumulators + one k-slice of A and B fragments + addressing, in 32-bit registers
        regs = (bm * bn * acc_bytes + (split[0] + split[1]) * 16 * in_bytes * warps) // (4 * threads) + 32
        if smem > arch.smem_cap or regs > _MAX_REGS_PER_THREAD or regs * threads > arch.reg_cap:
            continue
        per_sm = min(arch.smem_cap // smem, arch.reg_cap // (regs * threads),
                     arch.max_threads_per_sm // threads)
        blocks = math.ceil(M / bm) * math.ceil(N / bn)
        block_time = K * max(bm * bn / macs, (bm + bn) * in_bytes / arch.bytes_per_clock)
        block_time *= 1 + 1 / (2 * stage * per_sm)
        waves = math.ceil(blocks / (sms * per_sm)) if sms else blocks / per_sm
        large_grid = blocks > 2 * (sms or 64)
        hints.append(Hint(block=[bm, bn], warp=list(split), rstep=[bk], pipeline_stage=stage, use_tc=use_tc,
                          rasterization_plan=Rasterization2DColumn(10) if large_grid else NoRasterization(),
                          smem_bytes=smem, cost=waves * per_sm * block_time))
    # ties: the larger tile (fewer blocks, more reuse), then fewer stages (less shared memory)
    hints.sort(key=lambda h: (h.cost, -h.block[0] * h.block[1], h.pipeline_stage))
    return hints[:topk]
