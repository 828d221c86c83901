"""T.infinity of every floating type that has one (TVM's own knew float16/32/64 only:
"Cannot decide infinity for type T.bfloat16"); finite formats are refused with the fix."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.errors import LanguageError

torch = pytest.importorskip("torch")


def fill_inf(dtype):
    @T.prim_func
    def main(A: T.Tensor((32,), dtype)):
        with T.Kernel(1, threads=32):
            T.fill(A, T.infinity(dtype))

    return main


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_infinity_fills_on_the_cpu(dtype):
    kernel = tilelang.compile(fill_inf(dtype), target="cpu")
    out = torch.zeros(32, dtype=getattr(torch, dtype))
    kernel(out)
    assert torch.isinf(out).all() and (out > 0).all()


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float4_e2m1fn"])
def test_a_finite_format_has_no_infinity(dtype):
    with pytest.raises(LanguageError, match=rf"T.infinity: {dtype} has no infinity \(a finite format\); "
                                            rf"use T.max_value\('{dtype}'\)"):
        T.infinity(dtype)


def test_infinity_needs_a_floating_type():
    with pytest.raises(LanguageError, match=r"T.infinity: int32 is not a scalar floating type"):
        T.infinity(T.int32)
    # fp8: the encoding itself (CUDA's float -> fp8 conversion saturates inf to 57344)
    e5m2 = T.infinity(T.float8_e5m2)
    assert str(e5m2.ty.dtype) == "float8_e5m2" and int(e5m2.args[0].value) == 0x7C
    assert np.isinf(np.array([0x7C], np.uint8).view(ml_dtypes.float8_e5m2).astype(np.float32))[0]
