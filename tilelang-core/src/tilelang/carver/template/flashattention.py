"""``FlashAttentionTemplate(batch_size=, num_heads=, seq_length=, seq_kv_length=, head_dim=,
...)``: O = softmax(Q K^T / sqrt(d)) V, tiled as flash attention is: a block owns
``block_M`` query rows and walks the keys ``block_N`` at a time.

The hints rank (block_M, block_N, threads, stages) as the GEMM search does: per block, the
two products' multiply-adds (on matrix units where the device has them for ``in_dtype``)
against the bytes of its Q tile and of all K and V rows, stages hiding the loads; Q and
``stages`` K and V tiles must fit shared memory, the O and S accumulators the registers.
``hint.block`` is [block_M, head_dim], ``hint.rstep`` [block_N]."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import product
from typing import Any

from ..roller.hint import Hint
from ..roller.policy.default import NOMINAL_SMS
from ..roller.policy.matmul import dtype_bytes, mac_rate
from .base import BaseTemplate, positive


@dataclass
class FlashAttentionTemplate(BaseTemplate):
    batch_size: int | None = None
    num_heads: int | None = None
    seq_length: int | None = None
    seq_kv_length: int | None = None
    head_dim: int | None = None
    in_dtype: str = "float16"
    accum_dtype: str = "float16"
    out_dtype: str = "float16"
    arch: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        positive("FlashAttentionTemplate", batch_size=self.batch_size, num_heads=self.num_heads,
                 seq_length=self.seq_length, seq_kv_length=self.seq_kv_length, head_dim=self.head_dim)
        self.in_dtype, self.accum_dtype, self.out_dtype = map(str, (self.in_dtype, self.accum_dtype, self.out_dtype))

    def equivalent_function(self) -> Any:
        from tvm import te, tirx

        shape_q = (self.batch_size, self.num_heads, self.seq_length, self.head_dim)
        shape_kv = (self.batch_size, self.num_heads, self.seq_kv_length, self.head_dim)
        Q = te.placeholder(shape_q, name="Q", dtype=self.in_dtype)
        K = te.placeholder(shape_kv, name="K", dtype=self.in_dtype)
        V = te.placeholder(shape_kv, name="V", dtype=self.in_dtype)
        acc = self.accum_dtype
        d = te.reduce_axis((0, self.head_dim), name="d")
        scale = tirx.const(1.0 / math.sqrt(self.head_dim), "float32")
        S = te.compute((*shape_q[:3], self.seq_kv_length),
                       lambda b, h, i, j: te.sum(Q[b, h, i, d].astype(acc) * K[b, h, j, d].astype(acc), axis=[d]),
                       name="S")
        j1 = te.reduce_axis((0, self.seq_kv_length), name="j1")
        row_max = te.compute(shape_q[:3], lambda b, h, i: te.max(S[b, h, i, j1], axis=[j1]), name="row_max")
        E = te.compute(S.shape, lambda b, h, i, j: te.exp((S[b, h, i, j] - row_max[b, h, i]).astype("float32") * scale),
                       name="E")
        j2 = te.reduce_axis((0, self.seq_kv_length), name="j2")
        row_sum = te.compute(shape_q[:3], lambda b, h, i: te.sum(E[b, h, i, j2], axis=[j2]), name="row_sum")
        j3 = te.reduce_axis((0, self.seq_kv_length), name="j3")
        O = te.compute(shape_q, lambda b, h, i, e: te.sum(E[b, h, i, j3] * V[b, h, j3, e].astype("float32"), axis=[j3]),
                       name="O_acc")
        out = te.compute(shape_q, lambda b, h, i, e: (O[b, h, i, e] / row_sum[b, h, i]).astype(self.out_dtype),
                         name="O")
        return te.create_prim_func([Q, K, V, out])

    def _hints(self, topk: int) -> list[Hint]:
        arch, dim = self.arch, self.head_dim
        in_bytes = dtype_bytes(self.in_dtype)
        accumulator = "int32" if self.in_dtype.startswith(("int", "uint")) else "float32"
        use_tc, rate = mac_rate(self.in_dtype, accumulator, arch)
        cpu = arch.warp_size == 1
        sms = arch.compute_max_core or NOMINAL_SMS
        fit_m = max(16, 1 << (self.seq_length - 1).bit_length())
        fit_n = max(16, 1 << (self.seq_kv_length - 1).bit_length())
        hints = []
        for bm, bn, warps, stages in product((32, 64, 128), (32, 64, 128), (1,) if cpu else (4, 8),
                                             (1,) if cpu else (1, 2, 3)):
            if bm > fit_m or bn > fit_n or (not cpu and (bm % warps or bm // warps < 16)):
                continue
            threads = warps * arch.warp_size
            smem = (bm * dim + stages * 2 * bn * dim) * in_bytes
            regs = (bm * dim + bm * bn) // threads + 32  # O and S accumulators (fp32) per thread
            if smem > arch.smem_cap or (not cpu and regs > 255):
                continue
            blocks = self.batch_size * self.num_heads * math.ceil(self.seq_length / bm)
            per_sm = max(1, min(arch.smem_cap // smem, arch.max_threads_per_sm // threads,
                                arch.reg_cap // max(1, regs * threads)))
            resident = min(per_sm, math.ceil(blocks / sms))
            waves = math.ceil(blocks / (sms * resident))
            macs = 2 * bm * self.seq_kv_length * dim
            traffic = (bm * dim + 2 * self.seq_kv_length * dim) * in_bytes
            block_time = (max(macs / rate, traffic / arch.bytes_per_clock) * (1 + 1 / (2 * stages))
                          + arch.block_overhead_clocks)
            warp_rows = bm // warps if not cpu else bm
            hints.append(Hint(block=[bm, dim], warp=[warp_rows, dim] if use_tc else [], rstep=[bn],
                              thread=[] if use_tc else [threads, 1], pipeline_stage=stages, use_tc=use_tc,
                              use_async=stages > 1, smem_bytes=smem, cost=waves * resident * block_time, arch=arch))
        hints.sort(key=lambda h: (h.cost, -h.block[0], h.pipeline_stage))
        return hints[:topk]
