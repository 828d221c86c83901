"""float8_e4m3fn / float8_e5m2 on the CPU backend (cpu/transform/fp8.py): bytes in memory,
float32 values in arithmetic, each conversion rounded as CUDA's satfinite conversions
round it; checked against torch's conversions on every code and on floats from 1e-9 to
1e9 (the two agree up to the saturation: torch turns what is beyond the largest finite
value into NaN or infinity, CUDA's __NV_SATFINITE into that value, which the references
clip to)."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang import LanguageError

torch = pytest.importorskip("torch")

FORMATS = [("float8_e4m3fn", torch.float8_e4m3fn, 448.0), ("float8_e5m2", torch.float8_e5m2, 57344.0)]


def _round_trip(dtype: str, n: int = 4096):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), dtype), C: T.Tensor((n,), "float32")):
        with T.Kernel(n // 256, threads=256) as bx:
            for i in T.Parallel(256):
                B[bx * 256 + i] = A[bx * 256 + i]
            for i in T.Parallel(256):
                C[bx * 256 + i] = B[bx * 256 + i]

    return main


def _floats(n: int = 4096) -> np.ndarray:
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(n) * 10.0 ** rng.integers(-9, 10, n)).astype(np.float32)
    a[:14] = [0.0, -0.0, 448.0, 464.0, 465.0, 57344.0, 61440.0, -np.inf, np.inf, np.nan, 2.0 ** -9,
              3 * 2.0 ** -10, 2.0 ** -17, 1e-40]  # ties, subnormals of both formats, a float32 subnormal
    return a


def _bits(t):
    return t.view(torch.uint8).numpy()


@pytest.mark.parametrize("dtype,torch_dtype,limit", FORMATS)
def test_float32_to_fp8_rounds_to_nearest_even_and_saturates(dtype, torch_dtype, limit):
    a = _floats()
    b, c = torch.zeros(a.size, dtype=torch_dtype), torch.zeros(a.size)
    tilelang.compile(_round_trip(dtype), target="cpu")(torch.from_numpy(a), b, c)
    want = torch.from_numpy(np.clip(a, -limit, limit)).to(torch_dtype)
    np.testing.assert_array_equal(_bits(b), _bits(want))
    np.testing.assert_array_equal(c.numpy(), want.float().numpy())  # NaN == NaN here


def _widen(dtype: str):
    @T.prim_func
    def main(B: T.Tensor((256,), dtype), C: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=256):
            for i in T.Parallel(256):
                C[i] = T.cast(B[i], "float32")

    return main


@pytest.mark.parametrize("dtype,torch_dtype,limit", FORMATS)
def test_every_fp8_code_widens_to_its_value(dtype, torch_dtype, limit):
    """Zero and the subnormals too (TVM's own fp8 legalization read 0x00 as 0.0078125)."""
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(torch_dtype)
    out = torch.zeros(256)
    tilelang.compile(_widen(dtype), target="cpu")(codes, out)
    np.testing.assert_array_equal(out.numpy(), codes.float().numpy())


def _arith(dtype: str, n: int = 1024):
    @T.prim_func
    def main(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), S: T.Tensor((n,), dtype), P: T.Tensor((n,), dtype),
             M: T.Tensor((n,), dtype)):
        with T.Kernel(n // 128, threads=128) as bx:
            for i in T.Parallel(128):
                k = bx * 128 + i
                S[k] = A[k] + B[k]
                P[k] = A[k] * B[k] - A[k]
                M[k] = T.max(A[k], B[k])

    return main


@pytest.mark.parametrize("dtype,torch_dtype,limit", FORMATS)
def test_fp8_arithmetic_is_float32_rounded_at_each_fp8_result(dtype, torch_dtype, limit):
    g = torch.Generator().manual_seed(1)
    a = (torch.randn(1024, generator=g) * 8).clamp(-limit, limit).to(torch_dtype)
    b = (torch.randn(1024, generator=g) * 8).clamp(-limit, limit).to(torch_dtype)
    s, p, m = (torch.zeros(1024, dtype=torch_dtype) for _ in range(3))
    tilelang.compile(_arith(dtype), target="cpu")(a, b, s, p, m)

    def fp8(x):
        return x.clamp(-limit, limit).to(torch_dtype)

    product = fp8(a.float() * b.float())
    for got, want in ((s, fp8(a.float() + b.float())), (p, fp8(product.float() - a.float())),
                      (m, torch.maximum(a.float(), b.float()).to(torch_dtype))):
        np.testing.assert_array_equal(_bits(got), _bits(want))


def _gemm(dtype: str, m: int = 64, n: int = 64, k: int = 128):
    @T.prim_func
    def main(A: T.Tensor((m, k), dtype), B: T.Tensor((n, k), dtype), C: T.Tensor((m, n), "float32")):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((m, k), dtype)
            b = T.alloc_shared((n, k), dtype)
            c = T.alloc_fragment((m, n), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.clear(c)
            T.gemm(a, b, c, transpose_B=True)
            T.copy(c, C)

    return main


@pytest.mark.parametrize("dtype,torch_dtype,limit", FORMATS)
def test_an_fp8_gemm_equals_torch_on_the_cpu(dtype, torch_dtype, limit):
    g = torch.Generator().manual_seed(2)
    a = torch.randn(64, 128, generator=g).to(torch_dtype)
    b = torch.randn(64, 128, generator=g).to(torch_dtype)
    c = torch.zeros(64, 64)
    tilelang.compile(_gemm(dtype), target="cpu")(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float().T, rtol=1e-5, atol=1e-5)


def test_e8m0_and_fp6_are_still_refused():
    @T.prim_func
    def main(A: T.Tensor((8,), "float8_e8m0fnu")):
        with T.Kernel(1, threads=8):
            for i in T.Parallel(8):
                A[i] = T.float8_e8m0fnu(1.0)

    with pytest.raises(LanguageError, match="buffer 'A' has dtype 'float8_e8m0fnu', which the CPU backend cannot "
                                            "compute with"):
        tilelang.compile(main, target="cpu")
