"""Arithmetic on fp8 tensors (transform/fp8_arith.py): CUDA's fp8 types are storage types,
so each operation is computed in float32 and rounded back; nvcc compiles what it refused
before ("no instance of overloaded function min"), and on a GPU the results equal torch's
(exactly: small integers are fp8 values, and min / max / clamp of fp8 values are fp8 values)."""

from __future__ import annotations

import pytest
import tilelang
import tilelang.language as T
from tilelang.cuda import toolchain

SM90 = {"kind": "cuda", "arch": "sm_90"}
OPS = {
    "max": lambda a, b, dtype: T.max(a, b),
    "min": lambda a, b, dtype: T.min(a, b),
    "clamp": lambda a, b, dtype: T.clamp(a, T.cast(-1.0, dtype), T.cast(1.0, dtype)),
    "add_mul": lambda a, b, dtype: a + b * a,
}


def fp8_kernel(dtype: str, op: str, vector: int = 1):
    @T.prim_func
    def main(A: T.Tensor((1024,), dtype), B: T.Tensor((1024,), dtype), C: T.Tensor((1024,), dtype)):
        with T.Kernel(8, threads=128 // vector) as bx:
            for i in T.Parallel(128 // vector):
                for v in T.vectorized(vector):
                    k = bx * 128 + i * vector + v
                    C[k] = OPS[op](A[k], B[k], dtype)

    return main


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("vector", [1, 4])
def test_fp8_arithmetic_is_computed_in_float32(dtype, op, vector):
    source = tilelang.lower(fp8_kernel(dtype, op, vector), target=SM90).device_source
    body = source[source.index('extern "C" __global__'):]
    assert "(float" in body  # the operands widened to float32 (float or float4)
    if toolchain.nvcc_path() is not None:
        assert toolchain._compile_nvcc(source, "sm_90", f"fp8_{op}")[:4] == b"\x7fELF"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("op", sorted(OPS))
def test_fp8_arithmetic_on_the_gpu(dtype, op):
    torch = pytest.importorskip("torch")
    kernel = tilelang.compile(fp8_kernel(dtype, op, 4 if op != "add_mul" else 1), target="cuda")
    fp8 = getattr(torch, dtype)
    a = torch.randint(-4, 5, (1024,), device="cuda").float().to(fp8)
    b = torch.randint(-4, 5, (1024,), device="cuda").float().to(fp8)
    c = torch.empty(1024, device="cuda", dtype=fp8)
    kernel(a, b, c)
    x, y = a.float(), b.float()
    expected = {"max": torch.maximum(x, y), "min": torch.minimum(x, y), "clamp": x.clamp(-1, 1),
                "add_mul": x + (y * x).to(fp8).float()}[op].to(fp8).float()
    torch.testing.assert_close(c.float(), expected, atol=0, rtol=0)
