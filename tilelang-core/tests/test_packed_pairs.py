"""Upstream's packed pair ops (``T.add2`` ... ``T.abs2``, testing/python/cuda/
test_cuda_f32x2_intrinsics.py's kernels): each is the lane-wise operation on a two-lane
vector, so the CPU target (LLVM's vectors) runs them; tilelang-cuda's tests check the CUDA
lowering. Compared with torch on the same inputs: exactly for + - * max min abs, and within
one rounding for the fused multiply-add."""

from __future__ import annotations

import pytest
import tilelang
import tilelang.language as T
import torch
from tilelang.testing.upstream_kernels import PAIR_OPS, pair_kernel

M = 16
DTYPES = ["float32", "float16", "bfloat16"]


REFERENCE = {"add2": torch.add, "sub2": torch.sub, "mul2": torch.mul, "max2": torch.maximum,
             "min2": torch.minimum, "abs2": torch.abs, "fma2": lambda a, b, c: a * b + c}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(PAIR_OPS))
def test_packed_pair_ops_equal_torch_on_the_cpu(name, dtype):
    arity, reference = PAIR_OPS[name], REFERENCE[name]
    kernel = tilelang.compile(pair_kernel(name, dtype, M), out_idx=[arity], target="cpu")
    inputs = [torch.randn(M * 2, generator=torch.Generator().manual_seed(i), dtype=getattr(torch, dtype))
              for i in range(arity)]
    tolerance = {"atol": 1e-2, "rtol": 1e-2} if name == "fma2" and dtype != "float32" else {}
    torch.testing.assert_close(kernel(*inputs), reference(*inputs), **tolerance)


@pytest.mark.parametrize("name", sorted(PAIR_OPS))
def test_packed_pair_ops_refuse_mixed_pairs_and_scalars(name):
    from tvm import tirx

    op, arity = getattr(T, name), PAIR_OPS[name]
    half, bf16 = tirx.Var("x", "float16x2"), tirx.Var("y", "bfloat16x2")
    if arity > 1:  # upstream's test: ValueError matching "same dtype"
        with pytest.raises(ValueError, match=rf"T.{name}: the operands must have the same dtype, got float16x2, "
                                             r"bfloat16x2"):
            op(half, bf16, *[half] * (arity - 2))
    with pytest.raises(ValueError, match=rf"T.{name}: takes a pair of float32x2, float16x2, bfloat16x2 .*got float32"):
        op(*[tirx.Var("s", "float32")] * arity)


@pytest.mark.parametrize("name,expected", [("max2", [2.0, 1.0]), ("min2", [2.0, 1.0])])
def test_a_nan_lane_gives_the_other_operand_for_float32_pairs(name, expected):
    kernel = tilelang.compile(pair_kernel(name, "float32", M), out_idx=[PAIR_OPS[name]], target="cpu")
    a, b = torch.tensor([float("nan"), 1.0] * 16), torch.tensor([2.0, float("nan")] * 16)
    torch.testing.assert_close(kernel(a, b)[:2], torch.tensor(expected))

