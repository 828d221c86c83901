"""A kernel's own bfloat16 storage on the CPU rounds as a bfloat16 store does (torch's
``.bfloat16()``, CUDA's ``__float2bfloat16_rn``): to nearest, ties to even, NaN kept.

TVM's BF16ComputeLegalize holds such buffers (and bfloat16 names) as float32; without
cpu/transform/bf16_round.py they kept the unrounded float32 value."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
import torch

CPU_TARGETS = ["llvm", "c"]
N = 64


def _values_needing_rounding() -> np.ndarray:
    """float32 values whose low 16 bits are not zero: ties to even both ways, carries into
    the exponent, overflow to infinity, signed zeros and NaNs with low payload bits."""
    bits = np.array([
        0x3F808000, 0x3F818000, 0x3F80_8001, 0x3F80_7FFF,  # ties to even (down, up), near ties
        0x3FFF_FFFF, 0x7F7F_FFFF, 0xFF7F_FFFF,  # carry into the exponent; overflow to +-inf
        0x0000_0001, 0x8000_8000, 0x7F80_0000, 0xFF80_0000,  # denormals, infinities
        0x7F80_0001, 0xFF80_0001, 0x7FC0_0000,  # NaNs (one with only low payload bits)
    ], dtype=np.uint32).view(np.float32)
    rest = np.random.default_rng(0).standard_normal(N - bits.size).astype(np.float32) * 37.0
    return np.concatenate([bits, rest])


def _as_bf16(x: np.ndarray) -> np.ndarray:
    return torch.from_numpy(x).bfloat16().float().numpy()


def _assert_same_floats(got: np.ndarray, expected: np.ndarray) -> None:
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    keep = ~np.isnan(expected)
    np.testing.assert_array_equal(got[keep].view(np.uint32), expected[keep].view(np.uint32))


def _through_bf16(scope: str):
    @T.prim_func
    def kernel(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as _:
            if scope == "fragment":
                tile = T.alloc_fragment((N,), "bfloat16")
            elif scope == "shared":
                tile = T.alloc_shared((N,), "bfloat16")
            else:
                tile = T.alloc_local((N,), "bfloat16")
            for i in T.Parallel(N):
                tile[i] = T.cast(X[i], "bfloat16")
            for i in T.Parallel(N):
                Y[i] = T.cast(tile[i], "float32")

    return kernel


@pytest.mark.parametrize("target", CPU_TARGETS)
@pytest.mark.parametrize("scope", ["fragment", "shared", "local"])
def test_store_into_bf16_tile_rounds(target, scope):
    x = _values_needing_rounding()
    kernel = tilelang.compile(_through_bf16(scope), out_idx=[-1], target=target)
    _assert_same_floats(kernel(x), _as_bf16(x))


@T.prim_func
def _product_in_fragment(A: T.Tensor((N,), "bfloat16"), B: T.Tensor((N,), "bfloat16"),
                         C: T.Tensor((N,), "float32")):
    with T.Kernel(1, threads=N) as _:
        frag = T.alloc_fragment((N,), "bfloat16")
        for i in T.Parallel(N):
            frag[i] = A[i] * B[i]
        for i in T.Parallel(N):
            C[i] = T.cast(frag[i], "float32")


@pytest.mark.parametrize("target", CPU_TARGETS)
def test_bf16_product_in_fragment_is_rounded(target):
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(N, generator=gen).bfloat16()
    b = torch.randn(N, generator=gen).bfloat16()
    kernel = tilelang.compile(_product_in_fragment, out_idx=[-1], target=target)
    exact = a.float() * b.float()  # exact: 8-bit mantissas multiply into 16 bits
    assert not torch.equal(exact.bfloat16().float(), exact), "the inputs need no rounding"
    torch.testing.assert_close(kernel(a, b), exact.bfloat16().float(), rtol=0, atol=0)


@T.prim_func
def _scalars(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"), Z: T.Tensor((N,), "float32")):
    with T.Kernel(1, threads=1) as _:
        acc = T.alloc_var("bfloat16")
        for i in T.serial(N):
            acc = T.cast(X[i], "bfloat16")
            Y[i] = T.cast(acc, "float32")
            named = T.cast(X[i] * 3.0, "bfloat16")
            Z[i] = T.cast(named, "float32")


@pytest.mark.parametrize("target", CPU_TARGETS)
def test_bf16_var_and_bound_name_round(target):
    x = _values_needing_rounding()
    kernel = tilelang.compile(_scalars, out_idx=[-2, -1], target=target)
    y, z = kernel(x)
    _assert_same_floats(y, _as_bf16(x))
    with np.errstate(over="ignore", invalid="ignore"):  # inf * 3, NaN * 3
        tripled = x * np.float32(3.0)
    _assert_same_floats(z, _as_bf16(tripled))


@T.prim_func
def _vectorized(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
    with T.Kernel(1, threads=1) as _:
        tile = T.alloc_fragment((N,), "bfloat16")
        for i in T.vectorized(N):
            tile[i] = T.cast(X[i], "bfloat16")
        for i in T.vectorized(N):
            Y[i] = T.cast(tile[i], "float32")


def test_vectorized_store_rounds_lane_by_lane():
    x = _values_needing_rounding()
    kernel = tilelang.compile(_vectorized, out_idx=[-1], target="cpu")
    _assert_same_floats(kernel(x), _as_bf16(x))


@pytest.mark.parametrize("target", CPU_TARGETS)
def test_each_bf16_operation_rounds_its_result(target):
    """``A[i] * B[i] * G[i]`` with A, B bfloat16 and G float32 (upstream's gdn wy_fast):
    the bfloat16 product is rounded before the float32 one, as CUDA's operator* rounds it."""
    @T.prim_func
    def main(A: T.Tensor((N,), "bfloat16"), B: T.Tensor((N,), "bfloat16"), G: T.Tensor((N,), "float32"),
             C: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N):
            i = T.get_thread_binding()
            C[i] = A[i] * B[i] * G[i]

    rng = np.random.default_rng(3)
    a, b = (torch.from_numpy(rng.standard_normal(N).astype(np.float32)).bfloat16() for _ in "ab")
    g = rng.standard_normal(N).astype(np.float32)
    c = np.zeros(N, np.float32)
    tilelang.compile(main, target=target)(a, b, g, c)
    want = (a * b).float().numpy() * g  # torch rounds the bfloat16 product, as CUDA does
    _assert_same_floats(c, want)
    assert not np.array_equal(want, a.float().numpy() * b.float().numpy() * g)  # the rounding shows
