"""float32 GEMMs on TF32 tensor cores, as upstream's T.gemm computes them: float32 A and B
into a float32 accumulator take mma.sync m16n8k8 from sm_80 (each operand rounded to TF32
first; MN-major operands, A as [k][m] or B as [k][n], read an element at a time, since
ldmatrix cannot transpose 32-bit elements) and, K-major, wgmma k8 on sm_90;
``tl.disable_tf32`` keeps them in float32 on the SIMT path. Run as lowered
(test_lowered_emulation.py) and compared with numpy: exactly where the operands are small
integers, which TF32 holds exactly."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest
import tilelang
from lowered_instructions import lowered_kernel, tf32_values
from test_lowered_emulation import SM80, SM90, lower, run, small_ints
from tilelang.testing.kernels import tile_gemm

MMA = "tl_mma_m16n8k8_tf32_f32"

TF32_GEMMS = [  # arch, M, N, K, block M, N, K, transpose A, B, stages, threads, the product's instruction
    ("sm_80", 128, 128, 64, 64, 64, 32, False, True, 2, 128, MMA),
    ("sm_80", 64, 128, 40, 64, 128, 8, False, True, 3, 256, MMA),  # 8 warps, 5 k tiles of one k8 step
    ("sm_80", 64, 64, 32, 64, 64, 32, False, False, 2, 128, MMA),  # B as [k][n]: its elements one at a time
    ("sm_80", 128, 128, 64, 128, 128, 16, True, False, 3, 256, MMA),  # A and B MN-major
    ("sm_80", 70, 45, 33, 32, 32, 8, True, True, 0, 128, MMA),  # edge tiles, K not a multiple of 8
    ("sm_90", 128, 256, 64, 128, 256, 32, False, True, 3, 256, "tl_wgmma_m64n256k8_tf32_00"),  # 128-byte swizzle
    ("sm_90", 128, 128, 64, 128, 128, 16, False, True, 2, 128, "tl_wgmma_m64n128k8_tf32_00"),  # 64-byte swizzle
    ("sm_90", 64, 64, 32, 64, 64, 8, False, True, 4, 128, "tl_wgmma_m64n64k8_tf32_00"),  # 32-byte rows
    ("sm_90", 70, 45, 33, 64, 64, 16, False, False, 2, 128, MMA),  # MN-major: wgmma takes K-major TF32 only
]


@pytest.mark.parametrize("arch,m,n,k,bm,bn,bk,trans_a,trans_b,stages,threads,instruction", TF32_GEMMS)
def test_float32_gemm_on_tf32_tensor_cores_equals_numpy(arch, m, n, k, bm, bn, bk, trans_a, trans_b, stages,
                                                         threads, instruction):
    rng = np.random.default_rng(m + n + k + bk)
    a, a_values = small_ints(rng, (k, m) if trans_a else (m, k), "float32")
    b, b_values = small_ints(rng, (n, k) if trans_b else (k, n), "float32")
    c = np.full((m, n), np.nan, np.float32)
    func = tile_gemm(m, n, k, bm, bn, bk, trans_a, trans_b, dtype="float32", stages=stages, threads=threads)
    calls = run(lower(func, {"kind": "cuda", "arch": arch}), a, b, c)
    assert calls[instruction] > 0
    np.testing.assert_array_equal(c, (a_values.T if trans_a else a_values) @ (b_values.T if trans_b else b_values))


@pytest.mark.parametrize("target", [SM80, SM90])
@pytest.mark.parametrize("trans_a,trans_b", [(False, True), (False, False), (True, True)])
def test_float32_gemms_with_tf32_disabled_stay_in_float32(target, trans_a, trans_b):
    """tl.disable_tf32, operands TF32 would round (24 significant bits): the SIMT path
    gives float32's result, and no tensor-core instruction runs."""
    configs = {"tl.disable_tf32": True}
    m, n, k = 64, 64, 32
    rng = np.random.default_rng(7)
    a = (1 + rng.integers(1, 2 ** 12, (k, m) if trans_a else (m, k)) * 2.0 ** -23).astype(np.float32)
    b = (1 + rng.integers(1, 2 ** 12, (n, k) if trans_b else (k, n)) * 2.0 ** -23).astype(np.float32)
    c = np.full((m, n), np.nan, np.float32)
    func = tile_gemm(m, n, k, 64, 64, 32, trans_a, trans_b, dtype="float32", stages=2)
    calls = run(lower(func, target, **configs), a, b, c)
    assert not any("mma" in name for name in calls)
    expected = (a.T if trans_a else a).astype(np.float64) @ (b.T if trans_b else b).astype(np.float64)
    np.testing.assert_allclose(c, expected, rtol=2e-6)  # (float32 sums; TF32 is off by ~1e-4)
    tf32 = tf32_values((a.T if trans_a else a).view(np.uint32)) @ tf32_values((b.T if trans_b else b).view(np.uint32))
    assert np.abs(c - tf32).max() > 1e-3  # (the operands differ in TF32: the check above would see it)


def test_the_mma_operands_are_rounded_to_tf32_to_nearest():
    """mma.sync's helper rounds each operand (cvt.rna.tf32.f32): 1 + 2^-11, a tie, rounds
    away to 1 + 2^-10; 1 + 3 * 2^-12 up, 1 + 2^-12 down."""
    func = tile_gemm(16, 16, 8, 16, 16, 8, False, True, dtype="float32", stages=0, threads=32)
    kernel = lowered_kernel(lower(func, SM80))
    a = np.zeros((16, 8), np.float32)
    a[:3, 0] = [1 + 2.0 ** -11, 1 + 3 * 2.0 ** -12, 1 + 2.0 ** -12]
    b = np.zeros((16, 8), np.float32)
    b[0, 0] = 1
    c = np.full((16, 16), np.nan, np.float32)
    kernel(a, b, c)
    assert kernel.calls[MMA] > 0
    np.testing.assert_array_equal(c[:3, 0], [1 + 2.0 ** -10, 1 + 2.0 ** -10, 1])


def test_tf32_values_round_or_truncate_as_the_isa_says():
    bits = np.array([1 + 2.0 ** -11, -(1 + 2.0 ** -11), 1 + 2.0 ** -12, np.inf, 2.0 ** -130], np.float32).view(np.uint32)
    np.testing.assert_array_equal(tf32_values(bits, "rna"), [1 + 2.0 ** -10, -(1 + 2.0 ** -10), 1, np.inf, 2.0 ** -130])
    np.testing.assert_array_equal(tf32_values(bits, "rz"), [1, -1, 1, np.inf, 2.0 ** -130])


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("arch,trans_b,instruction", [
    ("sm_80", True, r"mma\.sync\.aligned\.m16n8k8\.row\.col\.f32\.tf32\.tf32\.f32"),
    ("sm_80", False, r"mma\.sync\.aligned\.m16n8k8\.row\.col\.f32\.tf32\.tf32\.f32"),
    ("sm_90a", True, r"wgmma\.mma_async\.sync\.aligned\.m64n128k8\.f32\.tf32\.tf32")])
def test_tf32_gemm_assembles_without_spills(tmp_path, arch, trans_b, instruction):
    src = tmp_path / "gemm.cu"
    func = tile_gemm(4096, 4096, 4096, 128, 128, 32, False, trans_b, dtype="float32", stages=3)
    src.write_text(tilelang.lower(func, target={"kind": "cuda", "arch": arch.removesuffix("a")},
                                  out_idx=[-1]).kernel_source)
    ptx = tmp_path / "gemm.ptx"
    subprocess.run(["nvcc", "-ptx", f"-arch={arch}", str(src), "-o", str(ptx)], check=True, capture_output=True)
    assert re.search(instruction, ptx.read_text())
    report = subprocess.run(["nvcc", "-cubin", f"-arch={arch}", "-Xptxas", "-v", str(src), "-o",
                             str(tmp_path / "gemm.cubin")], check=True, capture_output=True, text=True).stderr
    assert "0 bytes spill stores" in report, report
    assert "serialized" not in report, report
