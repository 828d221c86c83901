"""Short K steps merged into one TMA stage (transform/merge_k_steps.py), without a GPU:
which loops are merged, the ring that results, and the merged kernels run through the
numpy interpreter of the lowered IR against numpy (every transpose: the K axis of each
operand tile). The GPU runs are test_gpu_tile.py's GEMMs, which take this path on sm_90."""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest
import tilelang.language as T
from lowered_instructions import lowered_kernel
from test_lowered_emulation import small_ints
from test_tma import kernel_body, lower
from tilelang.cuda import toolchain
from tilelang.testing.kernels import tile_gemm

MERGE = {"tl.disable_k_step_merge": False, "tl.disable_shared_epilogue": True}  # the loops alone


def ring(func, **configs) -> tuple[list[str], list[str], int]:
    """(loop trip counts, bytes each stage expects, boxes issued per stage)."""
    body = kernel_body(lower(func, **{**MERGE, **configs}).device_source)
    producer = body[body.rfind("tl_mbarrier_expect_tx"):]
    return (re.findall(r"for \(int \w+ = 0; \w+ < (\d+)", body),
            re.findall(r"tl_mbarrier_expect_tx\(.*?, (\d+)\)", body), producer.count("tl_tma_load"))


def test_the_canonical_tile_loads_two_k_steps_per_stage():
    merged = ring(tile_gemm(1024, 1024, 1024, 128, 128, 32, stages=3))
    assert merged == (["16", "16"], ["32768"], 3)  # A: one 128-byte box row; B: two column blocks
    as_written = ring(tile_gemm(1024, 1024, 1024, 128, 128, 32, stages=3), **{"tl.disable_k_step_merge": True})
    assert as_written == (["32", "32"], ["16384"], 3)


def test_16_deep_steps_merge_four_at_a_time():
    assert ring(tile_gemm(512, 512, 512, 128, 128, 16, stages=3))[:2] == (["8", "8"], ["32768"])


def unmerged(func, **configs) -> bool:
    return ring(func, **configs)[1] == [str((128 + 128) * 32 * 2)]


def test_stages_that_would_not_fit_stay_as_written():
    # 5 stages of 128 x 256 x 64 fp16 would take 240 KiB (the H200 refused to launch it);
    # 3 stages (144 KiB) merge
    assert ring(tile_gemm(1024, 1024, 1024, 128, 256, 32, stages=5, threads=256))[0][0] == "32"
    assert ring(tile_gemm(1024, 1024, 1024, 128, 256, 32, stages=3, threads=256))[0][0] == "16"


@pytest.mark.parametrize("case", ["64-deep steps", "odd step count", "mma.sync"])
def test_loops_that_stay_as_written(case):
    if case == "64-deep steps":  # already a full 128-byte row
        assert ring(tile_gemm(1024, 1024, 1024, 128, 128, 64, stages=3))[0] == ["16", "16"]
    elif case == "odd step count":
        assert unmerged(tile_gemm(128, 128, 96, 128, 128, 32, stages=3))
    else:
        body = kernel_body(lower(tile_gemm(1024, 1024, 1024, 128, 128, 32, stages=3),
                                 **{**MERGE, "tl.disable_wgmma": True}).device_source)
        assert re.findall(r"for \(int \w+ = 0; \w+ < (\d+)", body)[0] == "32"


def test_a_tile_used_outside_the_loop_stays_as_written():
    @T.prim_func
    def main(A: T.Tensor((256, 256), "float16"), B: T.Tensor((256, 256), "float16"),
             C: T.Tensor((256, 256), "float32"), D: T.Tensor((128, 32), "float16")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            As = T.alloc_shared((128, 32), "float16")
            Bs = T.alloc_shared((32, 128), "float16")
            Cl = T.alloc_fragment((128, 128), "float32")
            T.clear(Cl)
            for k in T.Pipelined(8, num_stages=3):
                T.copy(A[by * 128, k * 32], As)
                T.copy(B[k * 32, bx * 128], Bs)
                T.gemm(As, Bs, Cl)
            T.copy(As, D)  # the last step's A tile: merging would change its shape
            T.copy(Cl, C[by * 128, bx * 128])

    assert ring(main)[0][0] == "8"  # merged it would be 4


@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, False), (False, True), (True, True)])
def test_merged_gemm_as_lowered_equals_numpy(trans_a, trans_b):
    m, n, k = 128, 128, 256
    rng = np.random.default_rng(7 + 2 * trans_a + trans_b)
    a, a_values = small_ints(rng, (k, m) if trans_a else (m, k))
    b, b_values = small_ints(rng, (n, k) if trans_b else (k, n))
    c = np.full((m, n), np.nan, np.float32)
    func = tile_gemm(m, n, k, 128, 128, 32, trans_a, trans_b, stages=3)
    artifact = lower(func, host_code=False, **MERGE)  # the cp.async ring (the interpreter has no TMA)
    body = kernel_body(artifact.device_source)
    assert "tl_cp_async" in body and re.findall(r"for \(int \w+ = 0; \w+ < (\d+)", body)[0] == "4"  # 256 / 64
    kernel = lowered_kernel(artifact.device_mod)
    kernel(a, b, c)
    expected = (a_values.T if trans_a else a_values) @ (b_values.T if trans_b else b_values)
    np.testing.assert_array_equal(c, expected)


@pytest.mark.skipif(toolchain.nvcc_path() is None, reason="nvcc is not installed")
def test_nvcc_compiles_the_merged_ring():
    source = lower(tile_gemm(1024, 1024, 1024, 128, 128, 32, stages=3), **MERGE).device_source
    assert toolchain._compile_nvcc(source, "sm_90a", "merged")[:4] == b"\x7fELF"


@pytest.mark.skipif(toolchain.nvcc_path() is None, reason="nvcc is not installed")
@pytest.mark.parametrize("stages", [3, 4])
def test_the_merged_canonical_tile_assembles_without_spills(tmp_path, stages):
    """ptxas on the merged ring: no spills, and the loop's 2 x 4 wgmmas (two 64-row pieces,
    four 16-deep steps of the merged 64-deep stage) issued once per stage the consumers wait
    for (nvcc may unroll the loop: then each copy of the body waits and issues its 8)."""
    src = tmp_path / "gemm.cu"
    src.write_text(lower(tile_gemm(4096, 4096, 4096, 128, 128, 32, stages=stages), **MERGE).device_source)
    ptx = tmp_path / "gemm.ptx"
    subprocess.run([toolchain.nvcc_path(), "-ptx", "-arch=sm_90a", str(src), "-o", str(ptx)], check=True,
                   capture_output=True)
    issued = [part.count("wgmma.mma_async") for part in ptx.read_text().split("mbarrier.try_wait")]
    assert sum(issued) >= 8 and set(issued) <= {0, 8}, issued
    cubin = subprocess.run([toolchain.nvcc_path(), "-cubin", "-arch=sm_90a", "-Xptxas", "-v", str(src), "-o",
                            str(tmp_path / "gemm.cubin")], check=True, capture_output=True, text=True)
    assert " 0 bytes spill stores, 0 bytes spill loads" in cubin.stderr
