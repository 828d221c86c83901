"""Tile operations on the CPU against numpy: copy (edges included), fill/clear, gemm with
transposes, reductions, cumsum, Pipelined, and the errors for tiles that do not fit."""

from __future__ import annotations

import time

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang import LanguageError
from tilelang.testing.kernels import split_k_gemm, tile_gemm

rng = np.random.default_rng(1)


def cpu(func, out_idx=(-1,)):
    return tilelang.compile(func, out_idx=list(out_idx), target="cpu")


def tiled_gemm(M, N, K, trans_a=False, trans_b=False, bM=32, bN=32, bK=16, dtype="float32"):
    return tile_gemm(M, N, K, bM, bN, bK, trans_a, trans_b, dtype)


@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (False, True), (True, False), (True, True)])
@pytest.mark.parametrize("mnk", [(64, 64, 32), (70, 45, 33)])
def test_gemm_with_transposes_and_edge_tiles(trans_a, trans_b, mnk):
    M, N, K = mnk
    a = rng.standard_normal((K, M) if trans_a else (M, K)).astype("float32")
    b = rng.standard_normal((N, K) if trans_b else (K, N)).astype("float32")
    out = cpu(tiled_gemm(M, N, K, trans_a, trans_b))(a, b)
    np.testing.assert_allclose(out, (a.T if trans_a else a) @ (b.T if trans_b else b), rtol=1e-4, atol=1e-4)


def test_gemm_fp16_inputs_accumulate_in_fp32():
    a = rng.standard_normal((64, 48)).astype("float16")
    b = rng.standard_normal((48, 40)).astype("float16")
    out = cpu(tiled_gemm(64, 40, 48, dtype="float16"))(a, b)
    np.testing.assert_allclose(out, a.astype("float32") @ b.astype("float32"), rtol=1e-3, atol=1e-3)



def test_gemm_bf16_inputs_with_edge_tiles():
    torch = pytest.importorskip("torch")
    a = torch.randn(40, 32, dtype=torch.bfloat16)  # numpy has no bfloat16: torch CPU tensors
    b = torch.randn(32, 24, dtype=torch.bfloat16)
    out = cpu(tiled_gemm(40, 24, 32, dtype="bfloat16"))(a, b)
    torch.testing.assert_close(out, a.float() @ b.float(), rtol=1e-4, atol=1e-4)  # exact products, fp32 sums

def reductions(M, N, kind, dim, clear):
    out_shape = (M,) if dim == 1 else (N,)

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), R: T.Tensor(out_shape, "float32")):
        with T.Kernel(1, threads=32) as _:
            x = T.alloc_fragment((M, N), "float32")
            r = T.alloc_fragment(out_shape, "float32")
            T.copy(X, x)
            if not clear:
                T.fill(r, 1.0)
            T.reduce(x, r, kind, dim=dim, clear=clear)
            T.copy(r, R)

    return main


NUMPY_REDUCE = {
    "max": lambda x, d: x.max(axis=d), "min": lambda x, d: x.min(axis=d),
    "sum": lambda x, d: x.sum(axis=d), "abssum": lambda x, d: np.abs(x).sum(axis=d),
    "absmax": lambda x, d: np.abs(x).max(axis=d),
}


@pytest.mark.parametrize("kind", sorted(NUMPY_REDUCE))
@pytest.mark.parametrize("dim", [0, 1])
def test_reductions(kind, dim):
    x = rng.standard_normal((12, 20)).astype("float32")
    np.testing.assert_allclose(cpu(reductions(12, 20, kind, dim, True))(x), NUMPY_REDUCE[kind](x, dim), rtol=1e-5,
                               atol=1e-5)  # a sum near 0 has no relative precision


@pytest.mark.parametrize("kind,combine", [("sum", lambda a, b: a + b), ("max", np.maximum)])
def test_reductions_without_clear_accumulate_into_the_destination(kind, combine):
    x = rng.standard_normal((8, 16)).astype("float32")
    expected = combine(np.ones(8, "float32"), NUMPY_REDUCE[kind](x, 1))
    np.testing.assert_allclose(cpu(reductions(8, 16, kind, 1, False))(x), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum(reverse):
    @T.prim_func
    def main(X: T.Tensor((6, 10), "float32"), Y: T.Tensor((6, 10), "float32")):
        with T.Kernel(1, threads=32) as _:
            x = T.alloc_shared((6, 10), "float32")
            T.copy(X, x)
            T.cumsum(x, dim=1, reverse=reverse)
            T.copy(x, Y)

    x = rng.standard_normal((6, 10)).astype("float32")
    expected = np.flip(np.cumsum(np.flip(x, 1), 1), 1) if reverse else np.cumsum(x, 1)
    np.testing.assert_allclose(cpu(main)(x), expected, rtol=1e-5, atol=1e-6)


def test_copy_of_an_edge_tile_reads_zeros_and_writes_only_in_range():
    @T.prim_func
    def main(X: T.Tensor((10, 10), "float32"), Y: T.Tensor((10, 10), "float32"), Z: T.Tensor((12, 12), "float32")):
        with T.Kernel(3, 3, threads=32) as (bx, by):
            t = T.alloc_shared((4, 4), "float32")
            T.fill(t, 7.0)  # what a copy that skipped its zero fill would leave
            T.copy(X[by * 4, bx * 4], t)
            T.copy(t, Z[by * 4, bx * 4])  # the whole tile, the part outside X included
            for i, j in T.Parallel(4, 4):
                t[i, j] = t[i, j] + 1.0
            T.copy(t, Y[by * 4, bx * 4])

    x = rng.standard_normal((10, 10)).astype("float32")
    y, z = cpu(main, out_idx=(1, 2))(x)
    np.testing.assert_allclose(y, x + 1, rtol=1e-6)  # an unguarded write past column 9 lands in the next row
    np.testing.assert_array_equal(z[:10, :10], x)
    np.testing.assert_array_equal(z[10:, :], 0)  # the edge tiles' rows and columns outside X read as zero
    np.testing.assert_array_equal(z[:, 10:], 0)


def test_fill_and_slices():
    @T.prim_func
    def main(Y: T.Tensor((8, 8), "float32")):
        with T.Kernel(1, threads=32) as _:
            T.fill(Y[0:4, 0:8], 3.0)
            T.clear(Y[4:8, 0:8])

    y = np.full((8, 8), -1.0, "float32")
    cpu(main, out_idx=())(y)
    np.testing.assert_array_equal(y, np.concatenate([np.full((4, 8), 3.0), np.zeros((4, 8))]).astype("float32"))


def test_gemm_shape_mismatch_is_named():
    @T.prim_func
    def main(A: T.Tensor((16, 8), "float32"), B: T.Tensor((4, 16), "float32"), C: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=32) as _:
            c = T.alloc_fragment((16, 16), "float32")
            T.gemm(A, B, c)
            T.copy(c, C)

    with pytest.raises(LanguageError, match=r"T.gemm: shapes do not agree: A \[16, 8\], B \[4, 16\], C \[16, 16\]"):
        cpu(main)


def staged_gemm(M=32, N=24, K=16):
    """upstream's pipelined kernels pass one stage of a 3-d shared buffer to T.gemm
    (``T.gemm(Q_shared, K_shared[stage, :, :], acc, transpose_B=True)``)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((2, N, K), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=32) as _:
            a_s = T.alloc_shared((M, K), "float32")
            b_s = T.alloc_shared((2, N, K), "float32")
            c = T.alloc_fragment((M, N), "float32")
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.clear(c)
            for stage in T.serial(2):
                T.gemm(a_s, b_s[stage, :, :], c, transpose_B=True)
            T.copy(c, C)

    return main


def test_gemm_of_a_stage_of_a_3d_shared_buffer():
    a = rng.standard_normal((32, 16)).astype("float32")
    b = rng.standard_normal((2, 24, 16)).astype("float32")
    out = cpu(staged_gemm())(a, b)
    np.testing.assert_allclose(out, a @ b[0].T + a @ b[1].T, rtol=1e-4, atol=1e-4)


def test_gemm_of_a_region_that_is_not_a_matrix_is_named():
    @T.prim_func
    def main(A: T.Tensor((16, 8), "float32"), B: T.Tensor((2, 8, 16), "float32"), C: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=32) as _:
            c = T.alloc_fragment((16, 16), "float32")
            T.gemm(A, B[0:2, :, :], c)
            T.copy(c, C)

    with pytest.raises(LanguageError, match=r"T.gemm: A, B and C must be 2-d tiles \(a region of B has extents "
                                            r"\[2, 8, 16\]: only the last two may be other than 1\)"):
        cpu(main)


def test_copy_shape_mismatch_is_named():
    @T.prim_func
    def main(A: T.Tensor((16, 8), "float32"), B: T.Tensor((8, 8), "float32")):
        with T.Kernel(1, threads=32) as _:
            T.copy(A[0:16, 0:8], B[0:8, 0:8])

    with pytest.raises(LanguageError, match=r"T.copy: source tile \[16, 8\] and destination tile \[8, 8\] differ"):
        cpu(main, out_idx=())


def test_reduce_dim_out_of_range():
    with pytest.raises(LanguageError, match=r"T.reduce_sum: dim 2 is out of range for a 2-d tile"):
        @T.prim_func
        def main(A: T.Tensor((4, 4), "float32"), B: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32) as _:
                T.reduce_sum(A, B, dim=2)


# -- T.atomic_add -----------------------------------------------------------------------------
def histogram(n, bins, block=64):
    """Every block adds its elements' counts into one shared histogram."""

    @T.prim_func
    def main(X: T.Tensor((n,), "int32"), H: T.Tensor((bins,), "int32")):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    T.atomic_add(H[X[bx * block + i]], 1)

    return main


def test_atomic_add_of_elements_from_every_block():
    # 3125 blocks into 17 bins: were the blocks spread over the thread pool, their plain
    # read-modify-writes (the CPU lowers atomics to them) would lose updates. How often a
    # race shows depends on the cores free at the time, so the next test pins the rule
    # itself; this one checks the counts, repeated while that takes under a second.
    n, bins = 200_000, 17
    kernel = cpu(histogram(n, bins), out_idx=())
    start = time.monotonic()
    for _ in range(20):
        x = rng.integers(0, bins, n).astype("int32")
        h = np.zeros(bins, "int32")
        kernel(x, h)
        np.testing.assert_array_equal(h, np.bincount(x, minlength=bins))
        if time.monotonic() - start > 1.0:
            break


def test_a_kernel_with_atomics_runs_its_blocks_on_one_thread():
    """The CPU's rule for atomics (launch_to_loops.py): no parallel launch in the compiled
    code of a kernel that uses them, while the same grid without them has one."""

    @T.prim_func
    def scatter(X: T.Tensor((200_000,), "int32"), Y: T.Tensor((200_000,), "int32")):
        with T.Kernel(T.ceildiv(200_000, 64), threads=64) as bx:
            for i in T.Parallel(64):
                if bx * 64 + i < 200_000:
                    Y[bx * 64 + i] = X[bx * 64 + i] + 1

    parallel_launch = "TVMBackendParallelLaunch"
    assert parallel_launch in cpu(scatter, out_idx=()).artifact.host_source
    assert parallel_launch not in cpu(histogram(200_000, 17), out_idx=()).artifact.host_source


def test_atomic_add_of_tiles_accumulates_split_k():
    M, N, K = 70, 45, 64
    a, b = rng.standard_normal((M, K)).astype("float32"), rng.standard_normal((K, N)).astype("float32")
    c = np.ones((M, N), "float32")  # added to, not overwritten
    cpu(split_k_gemm(M, N, K, 4, bM=32, bN=32, bK=16, dtype="float32"), out_idx=())(a, b, c)
    np.testing.assert_allclose(c, 1 + a @ b, rtol=1e-4, atol=1e-4)


def test_atomic_add_return_prev_of_a_tile_is_refused_with_the_alternative():
    from tvm import tirx

    with pytest.raises(LanguageError, match=r"return_prev=True needs one element, such as B\[i\]"):
        T.atomic_add(tirx.decl_buffer((4,), "float32", name="B"), 1, return_prev=True)


def test_layout_annotation_keeps_cpu_results():
    from tilelang.layout import make_swizzled_layout

    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as _:
            S = T.alloc_shared((64, 64), "float32")
            T.annotate_layout({S: make_swizzled_layout(S)})
            T.copy(A, S)
            for i, j in T.Parallel(64, 64):
                B[i, j] = S[j, i]

    a = rng.standard_normal((64, 64)).astype("float32")
    np.testing.assert_array_equal(cpu(main)(a), a.T)


def test_a_half_precision_accumulator_sums_each_gemm_in_float32():
    # upstream's fp16-accumulating GEMMs: summed product by product in fp16, 8% of the
    # outputs of upstream's kernel GEMM test were off by more than 1e-2 on the H200

    @T.prim_func
    def gemm16(A: T.Tensor((16, 256), T.float16), B: T.Tensor((256, 16), T.float16), C: T.Tensor((16, 16), T.float16)):
        with T.Kernel(1, threads=32):
            A_s = T.alloc_shared((16, 256), T.float16)
            B_s = T.alloc_shared((256, 16), T.float16)
            C_l = T.alloc_fragment((16, 16), T.float16)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C_l, clear_accum=True)
            T.copy(C_l, C)

    rng = np.random.default_rng(11)
    a = rng.standard_normal((16, 256)).astype("float16")
    b = rng.standard_normal((256, 16)).astype("float16")
    c = np.zeros((16, 16), "float16")
    tilelang.compile(gemm16, target="cpu")(a, b, c)
    expected = (a.astype("float32") @ b.astype("float32")).astype("float16")
    np.testing.assert_allclose(c.astype("float32"), expected.astype("float32"), rtol=2e-3, atol=2e-3)
