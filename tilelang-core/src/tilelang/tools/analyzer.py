"""A kernel's work, counted from its tile operations, and the time a roofline model gives
it on a device (upstream's ``tilelang.tools.Analyzer``).

``Analyzer.analysis(func, device)`` takes the kernel's PrimFunc (``kernel.get_tir(...)``,
before lowering) and a ``tilelang.carver.arch`` device. It walks the kernel once:

* every ``T.gemm`` adds ``2 * M * N * K`` floating-point operations;
* every ``T.copy`` between global memory and an on-chip tile adds the bytes of its tile;

each multiplied by the trip counts of the loops around it and by the number of blocks of
the grid. Element-wise code (``T.Parallel`` loops that read global tensors directly) is not
counted, as upstream does not count it. The estimate is the larger of the time the bytes
take at the device's memory bandwidth and the time the operations take at its dense
tensor-core peak (both read from the device where one is present, else None).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..errors import LanguageError


@dataclass
class AnalysisResult:
    """What one launch of a kernel computes and moves, and its roofline estimate.
    ``estimated_time`` is in seconds (None without the device's bandwidth);
    ``expected_tflops`` is the device's dense tensor-core peak (None where unknown)."""

    total_flops: int
    total_global_bytes: int
    estimated_time: float | None
    expected_tflops: float | None
    expected_bandwidth_GBps: float | None


#: compute capability -> dense fp16 tensor-core operations per SM per cycle (A100: 108 SMs
#: x 1.41 GHz x 2048 = 312 TFLOP/s; H100: 132 x 1.83 GHz x 4096 = 989)
_TENSOR_FLOPS_PER_SM_CYCLE = {70: 1024, 75: 1024, 80: 2048, 86: 1024, 87: 1024, 89: 1024, 90: 4096,
                              100: 8192, 120: 2048}


class Analyzer:
    """Counts a PrimFunc's tile-level work (module docstring)."""

    def __init__(self, fn: Any, device: Any) -> None:
        from tvm import tirx

        if not isinstance(fn, tirx.PrimFunc):
            raise LanguageError(f"Analyzer: expected a PrimFunc (kernel.get_tir(...)), got {type(fn).__name__}")
        self.fn, self.device = fn, device
        self.total_flops = 0
        self.total_global_bytes = 0

    @classmethod
    def analysis(cls, fn: Any, device: Any) -> AnalysisResult:
        return cls(fn, device).ir_pass().calculate()

    # -- counting -----------------------------------------------------------------------
    def ir_pass(self) -> Analyzer:
        self._visit(self.fn.body, 1)
        return self

    def _visit(self, node: Any, times: int) -> None:
        from tvm import tirx

        if isinstance(node, tirx.SeqStmt):
            for stmt in node.seq:
                self._visit(stmt, times)
        elif isinstance(node, tirx.For):
            self._visit(node.body, times * self._count(node.extent, f"loop {node.loop_var.name}"))
        elif isinstance(node, tirx.AttrStmt) and node.attr_key == "thread_extent":
            blocks = node.node.thread_tag.startswith("blockIdx")
            self._visit(node.body, times * (self._count(node.value, node.node.thread_tag) if blocks else 1))
        elif isinstance(node, tirx.IfThenElse):
            self._visit(node.then_case, times)  # an upper bound: both branches may run
            if node.else_case is not None:
                self._visit(node.else_case, times)
        elif isinstance(node, tirx.Evaluate):
            self._tile_op(node, times)
        else:
            body = getattr(node, "body", None)
            if isinstance(body, tirx.Stmt):
                self._visit(body, times)

    def _count(self, extent: Any, what: str) -> int:
        from tvm import tirx

        if isinstance(extent, tirx.IntImm):
            return int(extent.value)
        raise LanguageError(f"Analyzer: the extent of {what} is {extent}, not a constant; analyze the kernel "
                            "built for concrete sizes")

    def _tile_op(self, stmt: Any, times: int) -> None:
        from ..transform.gpu.ir_util import tile_op_name

        name = tile_op_name(stmt)
        args = stmt.value.args if name else ()
        if name == "gemm":
            a, c = args[0], args[2]
            m, n = (self._count(r.extent, "T.gemm C") for r in c.region[-2:])
            a_rows, a_cols = (self._count(r.extent, "T.gemm A") for r in a.region[-2:])
            k = a_rows if int(args[3].value) else a_cols
            self.total_flops += 2 * m * n * k * times
        elif name == "copy":
            src, dst = args[0], args[1]
            if "global" in (src.source.scope(), dst.source.scope()) and src.source.scope() != dst.source.scope():
                tile = src if src.source.scope() == "global" else dst
                elements = math.prod(self._count(r.extent, "T.copy") for r in tile.region)
                self.total_global_bytes += elements * _bits(tile.source.dtype) // 8 * times

    # -- the estimate -------------------------------------------------------------------
    def calculate(self) -> AnalysisResult:
        peak = _peak_tflops(self.device)
        bandwidth = _bandwidth_gbps(self.device)
        times = []
        if bandwidth:
            times.append(self.total_global_bytes / (bandwidth * 1e9))
        if peak:
            times.append(self.total_flops / (peak * 1e12))
        return AnalysisResult(total_flops=self.total_flops, total_global_bytes=self.total_global_bytes,
                              estimated_time=max(times) if bandwidth else None, expected_tflops=peak,
                              expected_bandwidth_GBps=bandwidth)


def _bits(dtype: Any) -> int:
    import tvm

    info = tvm.DataType(str(dtype))
    return info.bits * info.lanes


def _peak_tflops(device: Any) -> float | None:
    sms, clock_khz = getattr(device, "compute_max_core", None), getattr(device, "clock_rate_khz", None)
    per_cycle = _TENSOR_FLOPS_PER_SM_CYCLE.get(getattr(device, "sm_version", -1))
    if not (sms and clock_khz and per_cycle):
        return None
    return round(sms * clock_khz * 1e3 * per_cycle / 1e12, 1)


def _bandwidth_gbps(device: Any) -> float | None:
    value = getattr(device, "memory_bandwidth_gbps", None)
    return float(value) if value else None
