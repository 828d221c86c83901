"""Kernels that split the block's warps by thread index, as lowered and run in the emulator
(see test_lowered_emulation.py): upstream's warp splits (mHC) and FlashMLA-style warp
roles written as ifs. Each branch gets barriers over its own threads, its fragments dealt to
its threads, and its GEMMs on tensor cores over its warps; FlashMLA's operands (slices of
shared tiles, row vectors handed over in shared memory) stay on tensor cores."""

from __future__ import annotations

import re

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from test_lowered_emulation import SM80, SM90, run, small_ints


def warp_split_kernel():
    """upstream's mHC pre kernel, in small: warp 0 normalizes a row in shared memory while
    warps 1-2 stream a tile through shared memory and a fragment of their own."""

    @T.prim_func
    def split(A: T.Tensor((4, 4), "float32"), X: T.Tensor((4, 256), "float32"), W: T.Tensor((4,), "float32"),
              R: T.Tensor((4, 4), "float32"), Y: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=96):
            if T.get_thread_binding() < 32:
                m = T.alloc_shared((4, 4), "float32")
                total = T.alloc_shared((4,), "float32")
                T.copy(A, m)
                for j, k in T.Parallel(4, 4):
                    m[j, k] = m[j, k] * m[j, k]
                T.reduce_sum(m, total, dim=1)
                for j, k in T.Parallel(4, 4):
                    R[j, k] = m[j, k] / total[j]
            else:
                w = T.alloc_shared((4,), "float32")
                for j in T.Parallel(4):
                    w[j] = W[j] * 2.0
                acc = T.alloc_fragment((128,), "float32")
                for h in T.Pipelined(2, num_stages=2):
                    xs = T.alloc_shared((4, 128), "float32")
                    T.copy(X[0, h * 128], xs)
                    T.clear(acc)
                    for r in T.serial(4):
                        for c in T.Parallel(128):
                            acc[c] += w[r] * xs[r, c]
                    T.copy(acc, Y[h * 128])

    return split


def test_a_warp_split_kernel_gets_named_barriers_and_each_branch_its_threads():
    """Each branch's T.Parallel nests and fragments are dealt to the threads that take it
    (32 and 64 here, not the block's 96), and the barriers each branch needs among its own
    threads are named barriers over them (a __syncthreads() there would wait forever)."""
    artifact = tilelang.lower(warp_split_kernel(), target=SM80)
    source = artifact.device_source
    assert "tl_named_barrier_sync(8, 32)" in source and "tl_named_barrier_sync(9, 64)" in source
    rng = np.random.default_rng(0)
    a = rng.integers(1, 4, (4, 4)).astype(np.float32)
    x = rng.integers(-3, 4, (4, 256)).astype(np.float32)
    w = rng.integers(-2, 3, (4,)).astype(np.float32)
    r, y = np.zeros((4, 4), np.float32), np.zeros(256, np.float32)
    run(artifact.device_mod, a, x, w, r, y)
    np.testing.assert_allclose(r, a * a / (a * a).sum(axis=1, keepdims=True), rtol=1e-6)
    np.testing.assert_array_equal(y, (2 * w) @ x)


def three_way_split_kernel():
    """FlashMLA's role chain ``if tx < 128: ... elif tx < 256: ... else: ...`` in small: the
    elif branch is reached by threads 32..127 only and keeps 32..63."""

    @T.prim_func
    def chain(X: T.Tensor((32,), "float32"), Y: T.Tensor((32,), "float32"), P: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            if tx < 32:
                Y[tx] = X[tx]
            elif tx < 64:
                s = T.alloc_shared((32,), "float32")
                s[tx - 32] = X[tx - 32] * 2.0
                Y[tx - 32] = Y[tx - 32] + s[63 - tx]
            else:
                P[tx - 64] = T.cast(tx, "float32")

    return chain


def test_a_branch_of_an_else_chain_names_barriers_over_its_own_threads():
    """Its barrier counted 64 threads (``tx < 64`` read alone) where 32 arrive: on the
    H200, FlashMLA's second consumer waited forever."""
    source = tilelang.lower(three_way_split_kernel(), target=SM80).device_source
    assert re.findall(r"tl_named_barrier_sync\(\d+, (\d+)\)", source) == ["32"]


@pytest.mark.gpu
def test_a_warp_split_kernel_on_the_gpu():
    import torch  # the gpu marker skips the test where torch sees no CUDA GPU

    kernel = tilelang.compile(warp_split_kernel())
    rng = np.random.default_rng(1)
    a = torch.from_numpy(rng.integers(1, 4, (4, 4)).astype(np.float32)).cuda()
    x = torch.from_numpy(rng.integers(-3, 4, (4, 256)).astype(np.float32)).cuda()
    w = torch.from_numpy(rng.integers(-2, 3, (4,)).astype(np.float32)).cuda()
    for _ in range(20):  # the branches run at once on different warps: races would show
        r, y = torch.zeros((4, 4), device="cuda"), torch.zeros(256, device="cuda")
        kernel(a, x, w, r, y)
        torch.testing.assert_close(r, a * a / (a * a).sum(dim=1, keepdim=True))
        torch.testing.assert_close(y, (2 * w) @ x, rtol=0, atol=0)


def test_an_else_over_two_ranges_of_threads_is_refused_where_it_deals_a_tile():
    @T.prim_func
    def middle(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=96):
            tx = T.get_thread_binding()
            if tx >= 32 and tx < 64:
                B[tx - 32] = A[tx - 32]
            else:
                for i in T.Parallel(64):
                    B[i] = A[i] * 2.0

    with pytest.raises(tilelang.errors.LanguageError, match=r"the else branch of `if .*` runs on threads 0..31 and "
                                                           r"64..95, two ranges, which a T.Parallel in it cannot be dealt"):
        tilelang.lower(middle, target=SM80)


def consumer_fragment_kernel():
    """upstream's minference kernel in small: the accumulator is allocated for the whole
    block, but only the consumers (threads 0..63 of 96) touch it, and their GEMM reads a
    stage of a 3-d shared buffer; the other warp writes an output of its own."""

    @T.prim_func
    def roles(Q: T.Tensor((16, 16), "float32"), K: T.Tensor((2, 16, 16), "float32"), O: T.Tensor((16, 16), "float32"),
              P: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=96):
            q_s = T.alloc_shared((16, 16), "float32")
            k_s = T.alloc_shared((2, 16, 16), "float32")
            acc = T.alloc_fragment((16, 16), "float32")
            T.copy(Q, q_s)
            T.copy(K, k_s)
            tx = T.get_thread_binding()
            if tx >= 64:
                P[tx - 64] = T.cast(tx, "float32")
            else:
                T.clear(acc)
                for stage in T.serial(2):
                    T.gemm(q_s, k_s[stage, :, :], acc, transpose_B=True)
                for i, j in T.Parallel(16, 16):
                    acc[i, j] = acc[i, j] * 0.5
                T.copy(acc, O)

    return roles


def test_a_fragment_only_one_branch_touches_is_dealt_to_its_threads():
    """Dealt over the whole block, the consumers' nests would leave the points of threads
    64..95 unset (refused before: 'a T.Parallel over a register fragment inside a
    condition'); the fragment is sized and dealt over the 64 threads that use it."""
    artifact = tilelang.lower(consumer_fragment_kernel(), target=SM80)
    assert "float acc_ptr[4]" in artifact.device_source  # 256 points over 64 threads
    rng = np.random.default_rng(0)
    q = rng.integers(-3, 4, (16, 16)).astype(np.float32)
    k = rng.integers(-3, 4, (2, 16, 16)).astype(np.float32)
    o, p = np.zeros((16, 16), np.float32), np.zeros(32, np.float32)
    run(artifact.device_mod, q, k, o, p)
    np.testing.assert_array_equal(o, (q @ k[0].T + q @ k[1].T) * 0.5)
    np.testing.assert_array_equal(p, np.arange(64, 96, dtype=np.float32))


@pytest.mark.gpu
def test_a_consumer_fragment_on_the_gpu():
    import torch  # the gpu marker skips the test where torch sees no CUDA GPU

    kernel = tilelang.compile(consumer_fragment_kernel())
    q = torch.randint(-3, 4, (16, 16), device="cuda").float()
    k = torch.randint(-3, 4, (2, 16, 16), device="cuda").float()
    for _ in range(20):
        o, p = torch.zeros(16, 16, device="cuda"), torch.zeros(32, device="cuda")
        kernel(q, k, o, p)
        torch.testing.assert_close(o, (q @ k[0].T + q @ k[1].T) * 0.5, rtol=0, atol=0)
        torch.testing.assert_close(p, torch.arange(64, 96, device="cuda", dtype=torch.float32))


def branch_gemm_kernel():
    """A tensor-core-shaped GEMM that only threads 0..127 of 256 run (upstream's consumer
    branch without T.ws)."""

    @T.prim_func
    def branch_gemm(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 64), "float16"),
                    C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=256):
            a_s = T.alloc_shared((64, 32), "float16")
            b_s = T.alloc_shared((32, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.copy(A, a_s)
            T.copy(B, b_s)
            if T.get_thread_binding() < 128:
                T.clear(acc)
                T.gemm(a_s, b_s, acc)
                T.copy(acc, C)

    return branch_gemm


@pytest.mark.parametrize("target", [SM80, SM90])
def test_a_gemm_that_part_of_the_block_runs_computes_all_of_c(target):
    """Laid out on tensor cores over the block's 8 warps while 4 run it, half of C was never
    computed (zeros on the H200). The branch is a warp role: C spreads over its 4 warps, on
    mma.sync."""
    artifact = tilelang.lower(branch_gemm_kernel(), target=target)
    assert "tl_mma_m16n8k16_f16_f32(" in artifact.device_source
    rng = np.random.default_rng(0)
    a, a64 = small_ints(rng, (64, 32))
    b, b64 = small_ints(rng, (32, 64))
    c = np.zeros((64, 64), np.float32)
    run(artifact.device_mod, a, b, c)
    np.testing.assert_array_equal(c, a64 @ b64)


def two_role_gemm_kernel(second_lo: int = 128):
    """Upstream's FlashMLA-style roles without T.ws: two consumer branches, each computing
    its half of the output columns from shared tiles, and a branch of other threads."""

    @T.prim_func
    def two_roles(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 128), "float16"),
                  C: T.Tensor((64, 128), "float32"), P: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=384):
            a_s = T.alloc_shared((64, 32), "float16")
            b_l = T.alloc_shared((32, 64), "float16")
            b_r = T.alloc_shared((32, 64), "float16")
            acc_l = T.alloc_fragment((64, 64), "float32")
            acc_r = T.alloc_fragment((64, 64), "float32")
            T.copy(A, a_s)
            T.copy(B[:, 0:64], b_l)
            T.copy(B[:, 64:128], b_r)
            tx = T.get_thread_binding()
            if tx < 128:
                T.clear(acc_l)
                T.gemm(a_s, b_l, acc_l)
                T.copy(acc_l, C[:, 0:64])
            elif tx >= second_lo and tx < second_lo + 128:
                T.clear(acc_r)
                T.gemm(a_s, b_r, acc_r)
                for i, j in T.Parallel(64, 64):
                    acc_r[i, j] = acc_r[i, j] * 2.0
                T.copy(acc_r, C[:, 64:128])
            elif tx >= 256:
                P[tx - 256] = T.cast(tx, "float32")

    return two_roles


@pytest.mark.parametrize("target", [SM80, SM90])
def test_gemms_in_two_warp_roles_written_as_ifs_run_on_tensor_cores(target):
    """Each consumer branch is a role of 4 warps; the else-chain's ranges ([128, 256), then
    [256, 384)) come from the conditions before it. On sm_90 a role is a warpgroup and its
    tiles (filled by T.copy alone) take wgmma's layout."""
    artifact = tilelang.lower(two_role_gemm_kernel(), target=target)
    body = artifact.device_source[artifact.device_source.index('extern "C" __global__'):]
    if target == SM90:
        assert body.count("tl_wgmma_m64n64k16_f16_01(") >= 2 and "tl_mma_m16n8k16" not in body
    else:
        assert body.count("tl_mma_m16n8k16_f16_f32(") >= 2
    # the tiles every thread copied are read by each role: a barrier of the whole block
    # first (a role's named barrier orders only its own threads; without it, half of C was
    # wrong in 1 of 20 calls on the H200)
    source = artifact.device_source
    # the two roles' accumulators share one register array (each thread holds its own role's)
    assert len(re.findall(r"float acc_[lr]_ptr\[32\];", source)) == 1
    split = source.index("if (((int)threadIdx.x) < 128) {")
    assert source.rfind("__syncthreads();", 0, split) > source.index('extern "C" __global__')
    check_two_roles(artifact, seed=1)


def check_two_roles(artifact, seed: int) -> None:
    """Runs two_role_gemm_kernel as lowered: C = A B with its right half doubled, P the
    third branch's thread indices."""
    rng = np.random.default_rng(seed)
    a, a64 = small_ints(rng, (64, 32))
    b, b64 = small_ints(rng, (32, 128))
    c, p = np.zeros((64, 128), np.float32), np.zeros(128, np.float32)
    run(artifact.device_mod, a, b, c, p)
    want = a64 @ b64
    want[:, 64:] *= 2
    np.testing.assert_array_equal(c, want)
    np.testing.assert_array_equal(p, np.arange(256, 384, dtype=np.float32))


def test_gemms_in_branches_that_are_not_roles_of_one_size_stay_correct():
    """A second branch of [96, 224) does not start at a multiple of its 128 threads: no
    warp-role layout fits, so the GEMMs take the shared SIMT lowering, still correct."""
    artifact = tilelang.lower(two_role_gemm_kernel(second_lo=96), target=SM80)
    assert "tl_mma_m16n8k16_f16_f32(" not in artifact.device_source
    check_two_roles(artifact, seed=2)


@pytest.mark.gpu
def test_gemms_in_warp_roles_written_as_ifs_on_the_gpu():
    import torch  # the gpu marker skips the test where torch sees no CUDA GPU

    kernel = tilelang.compile(two_role_gemm_kernel())
    a = torch.randint(-3, 4, (64, 32), device="cuda").half()
    b = torch.randint(-3, 4, (32, 128), device="cuda").half()
    want = a.float() @ b.float()
    want[:, 64:] *= 2
    for _ in range(20):
        c, p = torch.zeros(64, 128, device="cuda"), torch.zeros(128, device="cuda")
        kernel(a, b, c, p)
        torch.testing.assert_close(c, want, rtol=0, atol=0)
        torch.testing.assert_close(p, torch.arange(256, 384, device="cuda", dtype=torch.float32))


def sliced_operands_kernel():
    """FlashMLA's operands: column slices of a shared Q, slices of one stage of a 3-d
    shared KV ring (K of S = Q K^T, N of O = S V), and a ring the kernel fills through
    T.access_ptr addresses (T.ptx_cp_async), so its layout must stay as declared."""

    @T.prim_func
    def sliced(Q: T.Tensor((64, 96), "float16"), KV: T.Tensor((2, 32, 96), "float16"),
               S: T.Tensor((64, 32), "float32"), O: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            q_s = T.alloc_shared((64, 96), "float16")
            kv_s = T.alloc_shared((2, 32, 96), "float16")
            p_s = T.alloc_shared((64, 32), "float16")
            acc_s = T.alloc_fragment((64, 32), "float32")
            acc_o = T.alloc_fragment((64, 64), "float32")
            tx = T.get_thread_binding()
            T.copy(Q, q_s)
            for stage in T.serial(2):
                for r in T.serial(3):
                    T.ptx_cp_async(T.access_ptr(kv_s[stage, tx // 4, r * 32 + tx % 4 * 8], "w", 8),
                                   T.access_ptr(KV[stage, tx // 4, r * 32 + tx % 4 * 8], "r", 8), 8)
            T.clear(acc_o)
            for stage in T.serial(2):
                T.clear(acc_s)
                T.gemm(q_s[:, 0:64], kv_s[stage, :, 0:64], acc_s, transpose_B=True)
                T.gemm(q_s[:, 64:96], kv_s[stage, :, 64:96], acc_s, transpose_B=True)
                T.copy(acc_s, S)
                T.copy(acc_s, p_s)
                T.gemm(p_s, kv_s[stage, :, 32:96], acc_o)
            T.copy(acc_o, O)

    return sliced


@pytest.mark.parametrize("target", [SM80, SM90])
def test_gemm_operands_that_are_slices_of_shared_tiles_run_on_tensor_cores(target):
    artifact = tilelang.lower(sliced_operands_kernel(), target=target)
    assert artifact.device_source.count("tl_mma_m16n8k16_f16_f32(") >= 3
    rng = np.random.default_rng(3)
    q, q64 = small_ints(rng, (64, 96))
    kv, kv64 = small_ints(rng, (2, 32, 96))
    s, o = np.zeros((64, 32), np.float32), np.zeros((64, 64), np.float32)
    run(artifact.device_mod, q, kv, s, o)
    scores = [q64 @ kv64[i].T for i in range(2)]
    np.testing.assert_array_equal(s, scores[1])
    want = sum(scores[i].astype(np.float16).astype(np.float64) @ kv64[i][:, 32:96] for i in range(2))
    np.testing.assert_allclose(o, want, rtol=1e-6)


@pytest.mark.gpu
def test_gemm_operands_that_are_slices_on_the_gpu():
    import torch  # the gpu marker skips the test where torch sees no CUDA GPU

    kernel = tilelang.compile(sliced_operands_kernel())
    q = torch.randint(-3, 4, (64, 96), device="cuda").half()
    kv = torch.randint(-3, 4, (2, 32, 96), device="cuda").half()
    scores = [q.float() @ kv[i].float().T for i in range(2)]
    want = sum(scores[i].half().float() @ kv[i][:, 32:96].float() for i in range(2))
    for _ in range(10):
        s, o = torch.zeros(64, 32, device="cuda"), torch.zeros(64, 64, device="cuda")
        kernel(q, kv, s, o)
        torch.testing.assert_close(s, scores[1], rtol=0, atol=0)
        torch.testing.assert_close(o, want, rtol=1e-6, atol=0)


def row_vectors_to_shared_kernel():
    """FlashMLA's consumers hand their row statistics to the other warpgroup through shared
    memory: ``T.copy(alpha_local, alpha_shared)`` and ``sum_shared[i] = sumexp[i]``."""

    @T.prim_func
    def rows_out(Q: T.Tensor((64, 32), "float16"), K: T.Tensor((32, 32), "float16"),
                 S: T.Tensor((64, 32), "float32"), M: T.Tensor((64,), "float32"), D: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128):
            q_s = T.alloc_shared((64, 32), "float16")
            k_s = T.alloc_shared((32, 32), "float16")
            m_shared = T.alloc_shared((64,), "float32")
            d_shared = T.alloc_shared((64,), "float32")
            acc_s = T.alloc_fragment((64, 32), "float32")
            m_i = T.alloc_fragment((64,), "float32")
            T.copy(Q, q_s)
            T.copy(K, k_s)
            T.clear(acc_s)
            T.gemm(q_s, k_s, acc_s, transpose_B=True)
            T.reduce_max(acc_s, m_i, dim=1)
            for i, j in T.Parallel(64, 32):
                acc_s[i, j] = acc_s[i, j] - m_i[i]
            T.copy(m_i, m_shared)
            for i in T.Parallel(64):
                d_shared[i] = m_i[i] * 2.0
            T.copy(acc_s, S)
            T.copy(m_shared, M)
            T.copy(d_shared, D)

    return rows_out


def test_row_vectors_copied_to_shared_memory_keep_the_row_family():
    """Such copies used to take the family off tensor cores, and its fragments (FlashMLA's
    S, 16 KiB) to shared memory, over the block's limit."""
    artifact = tilelang.lower(row_vectors_to_shared_kernel(), target=SM80)
    assert "tl_mma_m16n8k16_f16_f32(" in artifact.device_source
    assert "float acc_s_ptr[16]" in artifact.device_source  # 64 x 32 over 128 threads, in registers
    rng = np.random.default_rng(4)
    q, q64 = small_ints(rng, (64, 32))
    k, k64 = small_ints(rng, (32, 32))
    s, m, d = np.zeros((64, 32), np.float32), np.zeros(64, np.float32), np.zeros(64, np.float32)
    run(artifact.device_mod, q, k, s, m, d)
    scores = q64 @ k64.T
    np.testing.assert_array_equal(m, scores.max(axis=1))
    np.testing.assert_array_equal(d, 2 * scores.max(axis=1))
    np.testing.assert_array_equal(s, scores - scores.max(axis=1, keepdims=True))
