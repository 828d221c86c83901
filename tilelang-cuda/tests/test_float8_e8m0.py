"""float8_e8m0fnu (torch.float8_e8m0fnu, CUDA's __nv_fp8_e8m0): MX block scales, a power of
two per byte. Tensors of it are kernel parameters; casts to it round up to a power of two
(CUDA's conversion, which upstream's __tl_cvt_*_to_e8m0 also use: cudaRoundPosInf,
__NV_SATFINITE), which is not torch's rounding (torch rounds 1.4 down to 1; overflow is NaN).

Checked without a GPU: the emulator's reference conversion against CUDA's own (cuda_fp8.h,
compiled by nvcc for the host and run here), the lowered kernels in the lowered-IR emulator
against numpy, and nvcc for sm_80 and sm_90a; marked gpu, through each execution backend."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
import tilelang
import tilelang.backend
import tilelang.cuda
import tilelang.language as T
from lowered_emulator import e8m0_bits, e8m0_values
from test_lowered_emulation import run
from tilelang.cuda import toolchain

E8M0 = "float8_e8m0fnu"
needs_nvcc = pytest.mark.skipif(toolchain.nvcc_path() is None, reason="nvcc is not installed")
EXECUTION_BACKENDS = [spec.name for spec in tilelang.backend.registered_backends()["cuda"].execution_backends]
SPECIALS = [0.0, -0.0, 1.0, 1.5, 1.0000001, 0.75, 3.0, -2.0, -3.5, 2.0**-127, 2.0**-127 * 1.01, 2.0**-126,
            1e-40, 1e-45, 2.0**127, 2.0**127 * 1.0001, 3.0e38, float("inf"), float("-inf"), float("nan"), 6.0e-39]


def reference_values(n: int = 2000) -> np.ndarray:
    rng = np.random.default_rng(8)
    spread = rng.standard_normal(n) * np.exp2(rng.integers(-140, 140, n).astype(np.float64))
    with np.errstate(over="ignore"):  # beyond float32: infinities, as intended
        return np.concatenate([np.array(SPECIALS), spread]).astype(np.float32)


CUDA_CONVERSIONS = r"""
#include <cstdio>
#include <cuda_fp8.h>
#include "tl_device.h"
int main() {
  double x;
  while (std::scanf("%la", &x) == 1) {
    const float f = (float)x;
    __nv_fp8_e8m0 e(f);  // the conversion sm_90's own cast (and upstream's helpers) use
    std::printf("%u %u %u %u %u\n", (unsigned)__nv_cvt_float_to_e8m0(f, __NV_SATFINITE, cudaRoundPosInf),
                (unsigned)e.__x, (unsigned)tl_cvt_float_to_e8m0(f),
                (unsigned)__nv_cvt_double_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf),
                (unsigned)tl_cvt_double_to_e8m0(x));
  }
  for (unsigned b = 0; b < 256; ++b) {
    __nv_fp8_e8m0 e;
    e.__x = (__nv_fp8_storage_t)b;
    std::printf("%a %a\n", (float)e, tl_cvt_e8m0_to_float((unsigned char)b));
  }
  return 0;
}
"""


@needs_nvcc
def test_the_helpers_and_the_reference_are_cudas_conversion(tmp_path):
    """cuda_fp8.h's conversions and tl_device.h's helpers are host functions too: compiled for
    the host and run on the values, the helpers give CUDA's results, and so does the
    emulator's reference (e8m0_bits, e8m0_values)."""
    (tmp_path / "conv.cu").write_text(CUDA_CONVERSIONS)
    include = str(Path(tilelang.cuda.__file__).parent)
    subprocess.run([toolchain.nvcc_path(), "-I", include, "-o", str(tmp_path / "conv"), str(tmp_path / "conv.cu")],
                   check=True, capture_output=True)
    doubles = np.concatenate([reference_values().astype(np.float64), [1e300, -1e-300, 2.0**-127 * (1 + 2.0**-40)]])
    done = subprocess.run([str(tmp_path / "conv")], input="\n".join(float(v).hex() for v in doubles), text=True,
                          capture_output=True, check=True)
    lines = done.stdout.splitlines()
    rows = np.array([[int(v) for v in line.split()] for line in lines[:len(doubles)]])
    cuda_float, constructor, helper_float, cuda_double, helper_double = rows.T
    np.testing.assert_array_equal(constructor, cuda_float)
    np.testing.assert_array_equal(helper_float, cuda_float)
    np.testing.assert_array_equal(helper_double, cuda_double)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(e8m0_bits(doubles.astype(np.float32)), cuda_float)
    np.testing.assert_array_equal(e8m0_bits(doubles), cuda_double)
    decoded = np.array([[float.fromhex(v) for v in line.split()] for line in lines[len(doubles):]])
    np.testing.assert_array_equal(decoded[:, 1], decoded[:, 0])
    np.testing.assert_array_equal(e8m0_values(np.arange(256)).astype(np.float32), decoded[:, 0].astype(np.float32))


def cast(m: int, src: str, dst: str):
    @T.prim_func
    def main(A: T.Tensor((m,), src), B: T.Tensor((m,), dst)):
        with T.Kernel(1, threads=128):
            T.copy(A, B)

    return main


def mx_scales(rows: int = 64, cols: int = 128, block: int = 32):
    """MX scaling: each block of 32 values gets the power of two at or above its largest
    magnitude (an e8m0 scale), and the values are divided by it."""
    @T.prim_func
    def main(X: T.Tensor((rows, cols), "float32"), Scale: T.Tensor((rows, cols // block), E8M0),
             Y: T.Tensor((rows, cols), "float32")):
        with T.Kernel(1, threads=128):
            tile = T.alloc_fragment((rows, cols // block, block), "float32")
            amax = T.alloc_fragment((rows, cols // block), "float32")
            scale = T.alloc_fragment((rows, cols // block), E8M0)
            for r, g, i in T.Parallel(rows, cols // block, block):
                tile[r, g, i] = T.abs(X[r, g * block + i])
            T.reduce_max(tile, amax, dim=2)
            for r, g in T.Parallel(rows, cols // block):
                scale[r, g] = amax[r, g]
            T.copy(scale, Scale)
            for r, c in T.Parallel(rows, cols):
                Y[r, c] = X[r, c] / T.cast(scale[r, c // block], "float32")

    return main


def store_counts(lanes: int):
    """Upstream's test_vectorize_all_dtypes kernel for e8m0: A[i] = i + 1, vectorized."""
    @T.prim_func
    def main(A: T.Tensor((64,), E8M0)):
        with T.Kernel(1, threads=256):
            for i in T.vectorized(lanes):
                A[i] = T.cast(i + 1, E8M0)

    return main


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("src, dst", [("float32", E8M0), ("bfloat16", E8M0), ("float64", E8M0),
                                      (E8M0, "float32"), (E8M0, "bfloat16")])
def test_casts_as_lowered_equal_cudas_conversion(arch, src, dst):
    values = reference_values(252)[:256]
    values = np.resize(values, 256)
    artifact = tilelang.lower(cast(256, src, dst), target={"kind": "cuda", "arch": arch})
    if src == E8M0:
        a = e8m0_bits(values)
        expected = e8m0_values(a)
    else:
        a = values.astype(np.float64) if src == "float64" else values
        if src == "bfloat16":  # bfloat16 as its bits; the values it holds are what converts
            a = (values.view(np.uint32) >> 16).astype(np.uint16)
            values = (a.astype(np.uint32) << 16).view(np.float32)
        expected = e8m0_bits(values)
    out = np.zeros(256, dtype=np.uint16 if dst == "bfloat16" else np.uint8 if dst == E8M0 else np.float32)
    run(artifact.device_mod, a, out)
    if dst == "bfloat16":
        out = (out.astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(out, expected.astype(out.dtype))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_mx_scales_as_lowered_equal_numpy(arch):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((64, 128)) * np.exp2(rng.integers(-20, 20, (64, 1)))).astype(np.float32)
    scale, y = np.zeros((64, 4), np.uint8), np.zeros((64, 128), np.float32)
    run(tilelang.lower(mx_scales(), target={"kind": "cuda", "arch": arch}).device_mod, x, scale, y)
    expected = e8m0_bits(np.abs(x).reshape(64, 4, 32).max(axis=2))
    np.testing.assert_array_equal(scale, expected)
    np.testing.assert_array_equal(y, (x.reshape(64, 4, 32) / e8m0_values(expected)[..., None]).reshape(64, 128))
    assert np.abs(y).max() <= 1.0


@pytest.mark.parametrize("lanes", [1, 2, 4, 8])
def test_vectorized_stores_of_counts(lanes):
    out = np.zeros(64, np.uint8)
    run(tilelang.lower(store_counts(lanes), target={"kind": "cuda", "arch": "sm_90"}).device_mod, out)
    np.testing.assert_array_equal(out[:lanes], e8m0_bits(np.arange(1, lanes + 1)))


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_nvcc_compiles_e8m0_kernels(arch):
    kernels = [mx_scales(), store_counts(8), cast(256, "float32", E8M0), cast(256, E8M0, "bfloat16")]
    for i, kernel in enumerate(kernels):
        source = tilelang.lower(kernel, target={"kind": "cuda", "arch": arch}).device_source
        assert toolchain._compile_nvcc(source, arch + ("a" if arch == "sm_90" else ""), f"e8m0_{i}")[:4] == b"\x7fELF"


def test_e8m0_is_refused_on_the_cpu():
    with pytest.raises(tilelang.LanguageError, match="buffer 'B' has dtype 'float8_e8m0fnu', which the CPU backend "
                                                     "cannot compute with"):
        tilelang.compile(cast(256, "float32", E8M0), target="cpu")


@pytest.mark.gpu
@pytest.mark.parametrize("backend", EXECUTION_BACKENDS)
def test_e8m0_on_the_gpu(backend):
    import torch

    kernel = tilelang.compile(mx_scales(), target="cuda", execution_backend=backend)
    x = torch.randn(64, 128, device="cuda") * torch.exp2(torch.randint(-20, 20, (64, 1), device="cuda").float())
    scale = torch.zeros(64, 4, dtype=torch.float8_e8m0fnu, device="cuda")
    y = torch.zeros_like(x)
    kernel(x, scale, y)
    expected = e8m0_bits(x.abs().reshape(64, 4, 32).amax(dim=2).cpu().numpy())
    np.testing.assert_array_equal(scale.view(torch.uint8).cpu().numpy(), expected)
    torch.testing.assert_close(y, (x.reshape(64, 4, 32) / scale.float()[..., None]).reshape(64, 128), rtol=0, atol=0)
    back = tilelang.compile(cast(256, E8M0, "float32"), target="cuda", execution_backend=backend)
    bits = torch.arange(256, dtype=torch.uint8, device="cuda")
    out = torch.zeros(256, device="cuda")
    back(bits.view(torch.float8_e8m0fnu), out)
    torch.testing.assert_close(out, bits.view(torch.float8_e8m0fnu).float(), rtol=0, atol=0, equal_nan=True)
