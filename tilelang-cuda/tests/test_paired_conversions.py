"""Vector casts as CUDA's paired conversions (transform/conversions.py, tl_convert.h): one
cvt per two lanes (cvt.rn.f16x2.f32, cvt.rn.bf16x2.f32, cvt.rn.satfinite.e4m3x2.f32,
cvt.rn.f16x2.e4m3x2) where TVM's codegen converted lane by lane. Upstream's
test_tilelang_language_vectorized_cast.py looks for these conversions in the source of a
T.copy between dtypes and of a T.Parallel over register fragments; before, the first was
vectorized only where 16-byte vectors divided evenly among the threads, the second never,
and fp8 nests never (a dtype's size was read from its name's digits: float8_e4m3fn, 843
bits). Checked in the source, with nvcc, in the lowered-IR emulator and on a GPU
against torch."""

from __future__ import annotations

import re

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from lowered_emulator import bf16_bits, bf16_floats, fp8_bits, fp8_values
from lowered_instructions import lowered_kernel
from tilelang.cuda import toolchain

SM90 = {"kind": "cuda", "arch": "sm_90"}

# (source, target, the call of two lanes, of four) -- four lanes to float32 are two pairs
PAIRS = [
    ("float32", "float16", "__tl_cvt_float2_to_half2(", "__tl_cvt_float4_to_half4("),
    ("float16", "float32", "__tl_cvt_half2_to_float2(", "__tl_cvt_half2_to_float2("),
    ("float32", "bfloat16", "__tl_cvt_float2_to_bfloat162(", "__tl_cvt_float4_to_bfloat164("),
    ("bfloat16", "float32", "__tl_cvt_bfloat162_to_float2(", "__tl_cvt_bfloat162_to_float2("),
    ("float32", "float8_e4m3fn", "__tl_cvt_float2_to_fp8x2<__NV_E4M3>(", "__tl_cvt_float4_to_fp8x4<__NV_E4M3>("),
    ("float32", "float8_e5m2", "__tl_cvt_float2_to_fp8x2<__NV_E5M2>(", "__tl_cvt_float4_to_fp8x4<__NV_E5M2>("),
    ("float8_e4m3fn", "float32", "__tl_cvt_fp8x2_to_float2(", "__tl_cvt_fp8x2_to_float2("),
    ("float8_e5m2", "float32", "__tl_cvt_fp8x2_to_float2(", "__tl_cvt_fp8x2_to_float2("),
    ("float8_e4m3fn", "float16", "__tl_cvt_fp8x2_to_half2(", "__tl_cvt_fp8x4_to_half4("),
    ("float8_e5m2", "float16", "__tl_cvt_fp8x2_to_half2(", "__tl_cvt_fp8x4_to_half4("),
    ("float16", "float8_e4m3fn", "__tl_cvt_half2_to_fp8x2<__NV_E4M3>(", "__tl_cvt_half4_to_fp8x4<__NV_E4M3>("),
    ("float16", "float8_e5m2", "__tl_cvt_half2_to_fp8x2<__NV_E5M2>(", "__tl_cvt_half4_to_fp8x4<__NV_E5M2>("),
]


def copy_cast(m: int, source: str, target: str, fragments: bool):
    """Upstream's two kernels: T.copy between the dtypes, or through register fragments
    converted by a T.Parallel."""
    @T.prim_func
    def main(A: T.Tensor((m,), source), B: T.Tensor((m,), target)):
        with T.Kernel(1, threads=128):
            if fragments:
                A_local = T.alloc_fragment((m,), source)
                B_local = T.alloc_fragment((m,), target)
                T.copy(A, A_local)
                for i in T.Parallel(m):
                    B_local[i] = A_local[i]
                T.copy(B_local, B)
            else:
                T.copy(A, B)

    return main


def device_source(func, target=SM90) -> str:
    return tilelang.lower(func, target=target).device_source


@pytest.mark.parametrize("fragments", [False, True], ids=["copy", "fragments"])
@pytest.mark.parametrize("lanes", [2, 4])
@pytest.mark.parametrize("source,target,pair,quad", PAIRS)
def test_a_vector_cast_is_converted_a_pair_of_lanes_at_a_time(source, target, pair, quad, lanes, fragments):
    code = device_source(copy_cast(128 * lanes, source, target, fragments))
    kernel = code[code.index('extern "C" __global__'):]
    call = pair if lanes == 2 else quad
    assert call in kernel, kernel
    helper = call.split("<")[0].rstrip("(")
    assert "__device__ __forceinline__" in code[:code.index('extern "C" __global__')]
    assert f" {helper}(" in code[:code.index('extern "C" __global__')] or f" {helper}<" in code, code[:3000]
    assert ")(v_.x)" not in kernel  # TVM's lane-by-lane conversion
    assert "TileLang CUDA device helpers" not in code  # tl_convert.h's helpers alone, not tl_device.h
    if toolchain.nvcc_path() is not None:
        assert toolchain._compile_nvcc(code, "sm_90a", f"cvt_{source}_{target}_{lanes}")[:4] == b"\x7fELF"


def _inputs(source: str, m: int) -> tuple[np.ndarray, np.ndarray]:
    """(what the emulator is given, the values it holds) for ``source``."""
    rng = np.random.default_rng(7)
    values = rng.standard_normal(m).astype(np.float32) * 3
    if source == "bfloat16":
        bits = bf16_bits(values)
        return bits, bf16_floats(bits)
    if source.startswith("float8"):
        bits = rng.integers(0, 256, m).astype(np.uint8)
        kind = "e4m3" if "e4m3" in source else "e5m2"
        bits[(bits & 0x7F) == (0x7F if kind == "e4m3" else 0x7C)] = 0x38  # no NaN / infinity inputs
        if kind == "e5m2":
            bits[(bits & 0x7F) > 0x7C] = 0x3C
        return bits, fp8_values(bits, kind)
    return values.astype(source), values.astype(source).astype(np.float64)


@pytest.mark.parametrize("fragments", [False, True], ids=["copy", "fragments"])
@pytest.mark.parametrize("lanes", [2, 4])
@pytest.mark.parametrize("source,target", [("float32", "float16"), ("float16", "float32"), ("float32", "bfloat16"),
                                           ("bfloat16", "float32"), ("float8_e4m3fn", "float32"),
                                           ("float8_e5m2", "float16"), ("float8_e4m3fn", "float16")])
def test_paired_conversions_as_lowered_equal_numpy(source, target, lanes, fragments):
    """The lowered kernel, run by the emulator (its conversions are the casts' own, the
    lanes packed into the helper's integer and read back as the vector)."""
    m = 128 * lanes
    given, held = _inputs(source, m)
    out = np.zeros(m, np.uint16 if target == "bfloat16" else target)
    lowered_kernel(tilelang.lower(copy_cast(m, source, target, fragments), target=SM90).device_mod)(given, out)
    if target == "bfloat16":
        np.testing.assert_array_equal(out, bf16_bits(held.astype(np.float32)))
    else:
        np.testing.assert_array_equal(out, held.astype(target))


def test_vectors_narrow_until_they_divide_evenly_among_the_threads():
    """256 floats over 128 threads: 16-byte vectors (64 of them) left half the threads idle,
    which made the nest scalar; pairs of floats (8 bytes) go to every thread."""
    @T.prim_func
    def scale(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(256):
                B[i] = A[i] * 2.0

    code = device_source(scale)
    assert "*(float2*)(A_ptr + (((int)threadIdx.x) * 2))" in code
    a = np.arange(256, dtype=np.float32)
    b = np.zeros(256, np.float32)
    lowered_kernel(tilelang.lower(scale, target=SM90).device_mod)(a, b)
    np.testing.assert_array_equal(b, a * 2)


@pytest.mark.parametrize("target", ["float8_e4m3fn", "float8_e5m2"])
def test_fp8_nests_stay_scalar_where_cuda_has_no_fp8(target):
    """sm_80 has no fp8 types: TVM computes fp8 in integer bits there, and its vectors of
    that did not compile ("expression must have bool type"); such nests stay scalar."""
    code = device_source(copy_cast(256, "float32", target, False), {"kind": "cuda", "arch": "sm_80"})
    assert "__tl_cvt" not in code and "float2" not in code[code.index('extern "C" __global__'):]
    if toolchain.nvcc_path() is not None:
        assert toolchain._compile_nvcc(code, "sm_80", f"fp8_sm80_{target}")[:4] == b"\x7fELF"


def test_bfloat16_pairs_from_sm80_only():
    code = device_source(copy_cast(256, "float32", "bfloat16", False), {"kind": "cuda", "arch": "sm_75"})
    assert "__tl_cvt" not in code


def test_a_register_nest_that_calls_something_converts_a_pair_at_a_time_too():
    """A nest over register fragments runs as vectors of their lanes (two points a thread
    here), an intrinsic call lane by lane within them, the conversion a pair at a time."""
    @T.prim_func
    def exp_cast(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float16")):
        with T.Kernel(1, threads=128):
            A_local = T.alloc_fragment((256,), "float32")
            B_local = T.alloc_fragment((256,), "float16")
            T.copy(A, A_local)
            for i in T.Parallel(256):
                B_local[i] = T.exp(A_local[i])
            T.copy(B_local, B)

    code = device_source(exp_cast)
    assert "__tl_cvt_float2_to_half2(" in code
    a = np.linspace(-2, 2, 256, dtype=np.float32)
    b = np.zeros(256, np.float16)
    lowered_kernel(tilelang.lower(exp_cast, target=SM90).device_mod)(a, b)
    np.testing.assert_allclose(b.astype(np.float32), np.exp(a), rtol=2e-3)


# tl_convert.h's helpers compiled for the host (CUDA's conversion functions are __host__
# __device__ there), against CUDA's conversion of one lane at a time: lane order and rounding
HOST_PROGRAM = r"""
#include <cstdio>
#include <cstring>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
template <typename T> struct Vec4 { T x, y, z, w; __host__ __device__ Vec4() {} __host__ __device__ Vec4(T a, T b, T c, T d) : x(a), y(b), z(c), w(d) {} };
using half4 = Vec4<__half>;
using nv_bfloat164 = Vec4<__nv_bfloat16>;
#include "tl_convert_host.h"  // tl_convert.h, its helpers __host__ too
template <typename T, typename B> static void lanes(B bits, T* out, int n) { memcpy(out, &bits, sizeof(T) * n); }
int main() {
  int bad = 0;
  for (int i = 0; i < 4096; ++i) {
    float f[4];
    for (int l = 0; l < 4; ++l) { unsigned u = 2654435761u * (i * 4 + l + 1); f[l] = ((int)(u >> 8) - (1 << 23)) / 65536.0f; if (i % 7 == 0) f[l] *= 1e-3f; if (i % 11 == 0) f[l] *= 300.f; }
    float4 v4 = make_float4(f[0], f[1], f[2], f[3]); float2 v2 = make_float2(f[0], f[1]);
    __half h[4]; lanes(__tl_cvt_float4_to_half4(v4), h, 4);
    __half h2[2]; lanes(__tl_cvt_float2_to_half2(v2), h2, 2);
    __nv_bfloat16 b[4]; lanes(__tl_cvt_float4_to_bfloat164(v4), b, 4);
    __nv_bfloat16 b2[2]; lanes(__tl_cvt_float2_to_bfloat162(v2), b2, 2);
    unsigned char e4[4], e5[4], he4[4], e4b[2];
    lanes(__tl_cvt_float4_to_fp8x4<__NV_E4M3>(v4), e4, 4);
    lanes(__tl_cvt_float4_to_fp8x4<__NV_E5M2>(v4), e5, 4);
    lanes(__tl_cvt_float2_to_fp8x2<__NV_E4M3>(v2), e4b, 2);
    half4 hv(__float2half_rn(f[0]), __float2half_rn(f[1]), __float2half_rn(f[2]), __float2half_rn(f[3]));
    lanes(__tl_cvt_half4_to_fp8x4<__NV_E4M3>(hv), he4, 4);
    for (int l = 0; l < 4; ++l) {
      __half hs = __float2half_rn(f[l]);
      bad += memcmp(&h[l], &hs, 2) != 0;
      __nv_bfloat16 bs = __float2bfloat16_rn(f[l]);
      bad += memcmp(&b[l], &bs, 2) != 0;
      bad += e4[l] != __nv_cvt_float_to_fp8(f[l], __NV_SATFINITE, __NV_E4M3);
      bad += e5[l] != __nv_cvt_float_to_fp8(f[l], __NV_SATFINITE, __NV_E5M2);
      bad += he4[l] != __nv_cvt_halfraw_to_fp8(hs, __NV_SATFINITE, __NV_E4M3);
      if (l < 2) {
        bad += memcmp(&h2[l], &hs, 2) != 0 || memcmp(&b2[l], &bs, 2) != 0 || e4b[l] != e4[l];
      }
    }
    // widening: back from the narrow lanes, each lane as the scalar conversion gives it
    float w[2]; lanes(__tl_cvt_half2_to_float2(__halves2half2(h[0], h[1])), w, 2);
    bad += w[0] != __half2float(h[0]) || w[1] != __half2float(h[1]);
    lanes(__tl_cvt_bfloat162_to_float2(__halves2bfloat162(b[0], b[1])), w, 2);
    bad += w[0] != __bfloat162float(b[0]) || w[1] != __bfloat162float(b[1]);
    __nv_fp8x2_e4m3 p; p.__x = (unsigned short)(e4[0] | (e4[1] << 8));
    lanes(__tl_cvt_fp8x2_to_float2(p), w, 2);
    for (int l = 0; l < 2; ++l) { __nv_fp8_e4m3 s; s.__x = e4[l]; bad += !(w[l] == float(s) || (w[l] != w[l] && float(s) != float(s))); }
    __nv_fp8x4_e5m2 q; q.__x = e5[0] | (e5[1] << 8) | (e5[2] << 16) | ((unsigned)e5[3] << 24);
    __half hh[4]; lanes(__tl_cvt_fp8x4_to_half4(q), hh, 4);
    for (int l = 0; l < 4; ++l) { __nv_fp8_e5m2 s; s.__x = e5[l]; __half r = __half(s); bad += memcmp(&hh[l], &r, 2) != 0; }
  }
  printf("mismatches %d\n", bad);
  return bad != 0;
}
"""


def test_the_helpers_convert_each_lane_as_cuda_converts_one(tmp_path):
    """Every helper on 4096 vectors (normal, small, saturating values) equals CUDA's scalar
    conversion of each lane, lane i in element i: a helper with its halves swapped gives
    32768 mismatches. Compiled by nvcc for the host (no GPU needed)."""
    import subprocess

    from tilelang.cuda.codegen import CONVERT_HEADER

    nvcc = toolchain.nvcc_path()
    if nvcc is None:
        pytest.skip("nvcc is not installed")
    header = CONVERT_HEADER.read_text().replace("__device__ __forceinline__", "__host__ __device__ __forceinline__")
    (tmp_path / "tl_convert_host.h").write_text(header)
    (tmp_path / "check.cu").write_text(HOST_PROGRAM)
    subprocess.run([str(nvcc), "-std=c++17", "-o", str(tmp_path / "check"), str(tmp_path / "check.cu")],
                   check=True, capture_output=True, timeout=300)
    run = subprocess.run([str(tmp_path / "check")], check=False, capture_output=True, text=True, timeout=60)
    assert run.stdout.strip() == "mismatches 0", run.stdout + run.stderr


@pytest.mark.gpu
@pytest.mark.parametrize("fragments", [False, True], ids=["copy", "fragments"])
@pytest.mark.parametrize("lanes", [2, 4])
@pytest.mark.parametrize("source,target", [p[:2] for p in PAIRS])
def test_paired_conversions_on_the_gpu_equal_torch(source, target, lanes, fragments):
    torch = pytest.importorskip("torch")
    m = 128 * lanes
    kernel = tilelang.compile(copy_cast(m, source, target, fragments), target="cuda")
    a = (torch.randn(m, device="cuda") * 3).to(getattr(torch, source))
    b = torch.zeros(m, device="cuda", dtype=getattr(torch, target))
    kernel(a, b)
    torch.testing.assert_close(b, a.to(getattr(torch, target)), rtol=0, atol=0)


def shared_cast(m: int, source: str, target: str):
    """upstream's FP8 MLA decode: a T.copy between shared tiles of an 8-bit float and
    float16, which vectorizes to 8 or 16 lanes per thread."""

    @T.prim_func
    def main(A: T.Tensor((m,), source), B: T.Tensor((m,), target)):
        with T.Kernel(1, threads=128):
            narrow = T.alloc_shared((m,), source)
            wide = T.alloc_shared((m,), target)
            T.copy(A, narrow)
            T.copy(narrow, wide)
            T.copy(wide, B)

    return main


@pytest.mark.parametrize("lanes", [8, 16])
@pytest.mark.parametrize("source,target", [("float8_e4m3fn", "float16"), ("float8_e5m2", "float16"),
                                           ("float16", "float8_e4m3fn")])
def test_a_wide_fp8_cast_is_converted_four_lanes_at_a_time(source, target, lanes):
    """TVM printed the 8-lane cast as a reinterpretation of the bits, ``(uint4)(*(uint2*)
    p)`` (nvcc: no conversion from uint2 to uint4), and the 16-lane one through float32 x 16
    ("Cannot convert type float32x16 to CUDA type"); each is now stores of 4 lanes."""
    m = 128 * lanes
    artifact = tilelang.lower(shared_cast(m, source, target), target=SM90)
    kernel = artifact.device_source[artifact.device_source.index('extern "C" __global__'):]
    assert ("_to_fp8x4<" if target.startswith("float8") else "__tl_cvt_fp8x4_to_half4(") in kernel
    assert not re.search(r"\((uint[24])\)\(", kernel), kernel  # no reinterpretation of the bits
    given, held = _inputs(source, m)
    out = np.zeros(m, np.uint8 if target.startswith("float8") else target)
    lowered_kernel(artifact.device_mod)(given, out)
    if target.startswith("float8"):
        np.testing.assert_array_equal(out, fp8_bits(held, "e4m3"))
    else:
        np.testing.assert_array_equal(out, held.astype(target))
    if toolchain.nvcc_path() is not None:
        assert toolchain._compile_nvcc(artifact.device_source, "sm_90a", "wide_cast")[:4] == b"\x7fELF"


@pytest.mark.parametrize("source,target", [("float16", "float32"), ("float32", "float16"), ("float16", "float16")])
def test_a_copy_between_shared_tiles_keeps_them_apart(source, target):
    """The copy is the source tile's last use and the target tile's first: the shared-memory
    planner gave both the same bytes, so threads wrote converted elements over bytes others
    had still to read (float16 -> float32: wrong values here, a race on a GPU)."""
    m = 512
    artifact = tilelang.lower(shared_cast(m, source, target), target=SM90)
    offsets = re.findall(r"buf_dyn_shmem_ptr\) \+ \(\(\(\(int\)threadIdx.x\) \* \d+\) \+ (\d+)\)", artifact.device_source)
    assert offsets, artifact.device_source  # one of the tiles starts past the other
    given, held = _inputs(source, m)
    out = np.zeros(m, target)
    lowered_kernel(artifact.device_mod)(given, out)
    np.testing.assert_array_equal(out, held.astype(target))


@pytest.mark.gpu
@pytest.mark.parametrize("lanes", [8, 16])
def test_a_wide_fp8_cast_on_the_gpu_equals_torch(lanes):
    torch = pytest.importorskip("torch")
    kernel = tilelang.compile(shared_cast(128 * lanes, "float8_e4m3fn", "float16"), target="cuda")
    a = (torch.randn(128 * lanes, device="cuda") * 3).to(torch.float8_e4m3fn)
    b = torch.zeros(128 * lanes, device="cuda", dtype=torch.float16)
    kernel(a, b)
    torch.testing.assert_close(b, a.to(torch.float16), rtol=0, atol=0)
