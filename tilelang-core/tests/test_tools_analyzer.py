"""tilelang.tools.Analyzer: a kernel's FLOPs and global bytes, counted from its tile ops
(upstream's examples/analyze), and its roofline estimate."""

from __future__ import annotations

import pytest
import tilelang.language as T
from tilelang.carver.arch import CUDA
from tilelang.carver.arch.arch_base import TileDevice
from tilelang.errors import LanguageError
from tilelang.tools import AnalysisResult, Analyzer

SM90 = CUDA({"kind": "cuda", "arch": "sm_90"})


def tiled_matmul(m, n, k, bm, bn, bk):
    """The canonical T.copy / T.gemm kernel (fp16 in, fp32 out)."""

    @T.prim_func
    def gemm(A: T.Tensor((m, k), "float16"), B: T.Tensor((k, n), "float16"), C: T.Tensor((m, n), "float32")):
        with T.Kernel(n // bn, m // bm, threads=128) as (bx, by):
            As = T.alloc_shared((bm, bk), "float16")
            Bs = T.alloc_shared((bk, bn), "float16")
            Cf = T.alloc_fragment((bm, bn), "float32")
            T.clear(Cf)
            for ko in T.Pipelined(k // bk, num_stages=2):
                T.copy(A[by * bm, ko * bk], As)
                T.copy(B[ko * bk, bx * bn], Bs)
                T.gemm(As, Bs, Cf)
            T.copy(Cf, C[by * bm, bx * bn])

    return gemm


def test_a_tiled_gemm_counts_2mnk_and_every_tile_it_moves():
    m, n, k, bm, bn, bk = 256, 128, 512, 64, 32, 16
    result = Analyzer.analysis(tiled_matmul(m, n, k, bm, bn, bk), SM90)
    assert result.total_flops == 2 * m * n * k
    # A's row panel once per column of blocks, B's column panel once per row of blocks, C once
    assert result.total_global_bytes == 2 * (m * k * (n // bn) + k * n * (m // bm)) + 4 * m * n


def test_copies_between_on_chip_tiles_move_no_global_bytes_and_conditions_count_both_branches():
    @T.prim_func
    def staged(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16")):
        with T.Kernel(2, threads=128) as bx:
            s = T.alloc_shared((32, 64), "float16")
            f = T.alloc_fragment((32, 64), "float16")
            for r in T.serial(3):
                T.copy(A[bx * 32, 0], s)
            T.copy(s, f)
            if bx == 0:
                T.copy(f, B[0, 0])
            else:
                T.copy(f, B[32, 0])

    result = Analyzer.analysis(staged, SM90)
    assert result.total_flops == 0
    assert result.total_global_bytes == 2 * (3 + 2) * 32 * 64 * 2


def test_the_estimate_is_the_roofline_of_the_devices_peaks():
    class Device(TileDevice):
        sm_version, compute_max_core, clock_rate_khz, memory_bandwidth_gbps = 90, 100, 1_000_000, 1000.0

    result = Analyzer.analysis(tiled_matmul(1024, 1024, 1024, 128, 128, 32), Device())
    assert result.expected_tflops == pytest.approx(100 * 1e9 * 4096 / 1e12)
    compute = 2 * 1024**3 / (result.expected_tflops * 1e12)
    memory = result.total_global_bytes / 1e12
    assert result.estimated_time == pytest.approx(max(compute, memory))
    # a device that cannot say its peaks (no GPU present): counts, no estimate
    assert Analyzer.analysis(tiled_matmul(64, 64, 64, 32, 32, 32), TileDevice()) == AnalysisResult(
        2 * 64**3, 2 * (64 * 64 * 2 + 64 * 64 * 2) + 4 * 64 * 64, None, None, None)


def test_symbolic_sizes_and_non_kernels_are_refused_with_what_to_do():
    n = T.symbolic("n")

    @T.prim_func
    def dynamic(A: T.Tensor((n, 64), "float32"), B: T.Tensor((n, 64), "float32")):
        with T.Kernel(T.ceildiv(n, 32), threads=32) as bx:
            s = T.alloc_shared((32, 64), "float32")
            T.copy(A[bx * 32, 0], s)
            T.copy(s, B[bx * 32, 0])

    with pytest.raises(LanguageError, match=r"the extent of blockIdx.x is .* not a constant; analyze the kernel "
                                            "built for concrete sizes"):
        Analyzer.analysis(dynamic, SM90)
    with pytest.raises(LanguageError, match=r"expected a PrimFunc \(kernel.get_tir\(...\)\), got str"):
        Analyzer("main", SM90)
