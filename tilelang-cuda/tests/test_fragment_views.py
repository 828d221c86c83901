"""T.reshape / T.view of a fragment on the GPU (upstream's reshape tests): the fragment's
per-thread array replaced its allocation, and the view was left over nothing ("Buffer
A_local is used before its definition"). The views become accesses of the fragment;
checked in the interpreter against numpy, with nvcc, and on a GPU."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from lowered_instructions import lowered_kernel
from tilelang.cuda import toolchain
from tilelang.errors import LanguageError

SM90 = {"kind": "cuda", "arch": "sm_90"}


def reshaped_copy(N, M, dtype):
    @T.prim_func
    def main(A: T.Tensor((N // M, M), dtype), B: T.Tensor((N,), dtype)):
        with T.Kernel(1, threads=32):
            A_shared = T.alloc_shared((N // M, M), dtype)
            A_local = T.alloc_fragment((N // M, M), dtype)
            B_shared = T.alloc_shared((N,), dtype)
            T.copy(A, A_shared)
            T.copy(A_shared, A_local)
            T.copy(T.reshape(A_local, [N]), B_shared)
            T.copy(B_shared, B)

    return main


def reduced_after_reshape(N, M, dtype):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N // M,), dtype)):
        with T.Kernel(1, threads=32):
            A_shared = T.alloc_shared((N,), dtype)
            A_local = T.alloc_fragment((N,), dtype)
            B_local = T.alloc_fragment((N // M,), dtype)
            T.copy(A, A_shared)
            T.copy(A_shared, A_local)
            T.reduce_max(T.reshape(A_local, [N // M, M]), B_local, dim=1)
            T.copy(B_local, B)

    return main


def grouped_sum(tile_m=2, hidden=192, group=6, threads=128):
    """Upstream's straddle regression: a (2, 192) fragment reshaped to (2, 6, 32), summed
    over its last axis (groups straddle the threads' rows)."""
    @T.prim_func
    def main(A: T.Tensor((tile_m, hidden), "float32"), B: T.Tensor((tile_m, group), "float32")):
        with T.Kernel(1, threads=threads):
            src = T.alloc_fragment((tile_m, hidden), "float32")
            dst = T.alloc_fragment((tile_m, group), "float32")
            for i, j in T.Parallel(tile_m, hidden):
                src[i, j] = A[i, j]
            T.reduce_sum(T.reshape(src, (tile_m, group, hidden // group)), dst, dim=2)
            for i, g in T.Parallel(tile_m, group):
                B[i, g] = dst[i, g]

    return main


def emulate(func, *arrays):
    artifact = tilelang.lower(func, target=SM90)
    if toolchain.nvcc_path() is not None:
        assert toolchain._compile_nvcc(artifact.device_source, "sm_90", "fragment_view")[:4] == b"\x7fELF"
    lowered_kernel(artifact.device_mod)(*arrays)


@pytest.mark.parametrize("n,m", [(1024, 32), (256, 64)])
def test_a_reshaped_fragment_is_copied_in_row_major_order(n, m):
    a = np.random.default_rng(0).standard_normal((n // m, m)).astype("float32")
    b = np.zeros(n, "float32")
    emulate(reshaped_copy(n, m, "float32"), a, b)
    np.testing.assert_array_equal(b, a.reshape(-1))


@pytest.mark.parametrize("n,m", [(1024, 32), (512, 64)])
def test_a_reduction_over_a_reshaped_fragment(n, m):
    a = np.random.default_rng(1).standard_normal(n).astype("float32")
    b = np.zeros(n // m, "float32")
    emulate(reduced_after_reshape(n, m, "float32"), a, b)
    np.testing.assert_array_equal(b, a.reshape(n // m, m).max(axis=1))


def test_a_grouped_sum_over_a_three_dimensional_reshape():
    a = np.arange(1, 2 * 192 + 1, dtype="float32").reshape(2, 192)
    b = np.zeros((2, 6), "float32")
    emulate(grouped_sum(), a, b)
    np.testing.assert_allclose(b, a.reshape(2, 6, 32).sum(axis=2), rtol=1e-6)


def test_a_view_of_a_fragment_as_another_type_is_refused():
    @T.prim_func
    def main(A: T.Tensor((64,), "float16"), B: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            A_local = T.alloc_fragment((64,), "float16")
            T.copy(A, A_local)
            T.copy(T.view(A_local, [32], "float32"), B)

    with pytest.raises(LanguageError, match=r"T.view / T.reshape of the fragment 'A_local' as float32 of shape \[32\]: on the GPU a view "
                                            r"of a fragment may only reshape it"):
        tilelang.lower(main, target=SM90)


@pytest.mark.gpu
def test_reshaped_fragments_on_the_gpu():
    torch = pytest.importorskip("torch")
    a = torch.randn(32, 32, device="cuda")
    out = tilelang.compile(reshaped_copy(1024, 32, "float32"), out_idx=[-1], target="cuda")(a)
    torch.testing.assert_close(out, a.reshape(-1), rtol=0, atol=0)
    x = torch.randn(1024, device="cuda", dtype=torch.float16)
    out = tilelang.compile(reduced_after_reshape(1024, 32, "float16"), out_idx=[-1], target="cuda")(x)
    torch.testing.assert_close(out, x.reshape(32, 32).max(dim=1).values, rtol=0, atol=0)
    a = torch.arange(1, 2 * 192 + 1, dtype=torch.float32, device="cuda").reshape(2, 192)
    out = tilelang.compile(grouped_sum(), out_idx=[-1], target="cuda")(a)
    torch.testing.assert_close(out, a.reshape(2, 6, 32).sum(dim=2), rtol=1e-6, atol=1e-3)
