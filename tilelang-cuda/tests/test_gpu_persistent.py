"""Persistent GEMM on a real GPU (marked `gpu`): upstream's
examples/gemm/example_gemm_persistent.py kernel (T.Persistent, and its hand-written wave
loop) against torch, with one block per SM and with a few blocks that each walk many
tiles (the TMA ring then runs on across tiles: test_persistent_ring.py checks its protocol
without a GPU), on tile-aligned sizes and with tail tiles in M, N and K.

Tolerance as the other fp16 GEMM tests (fp16 inputs, fp32 accumulation, fp16 output):
rtol 1e-2, atol 5e-2.
"""

from __future__ import annotations

import pytest
import tilelang
import tilelang.language as T

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu


@tilelang.jit
def matmul_persistent(A, B, block_M, block_N, block_K, threads, num_stages, sm_num, use_persistent_primitive=True,
                      dtype=T.float16, accum_dtype=T.float32):
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), dtype)
    B: T.Tensor((K, N), dtype)
    C = T.empty((M, N), dtype)
    m_blocks = T.ceildiv(M, block_M)
    n_blocks = T.ceildiv(N, block_N)
    waves = T.ceildiv(m_blocks * n_blocks, sm_num)
    group_size = 8
    with T.Kernel(sm_num, threads=threads) as (block_id):
        A_shared = T.alloc_shared((block_M, block_K), dtype)
        B_shared = T.alloc_shared((block_K, block_N), dtype)
        C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
        C_shared = T.alloc_shared((block_M, block_N), dtype)
        if use_persistent_primitive:
            for bx, by in T.Persistent([T.ceildiv(M, block_M), T.ceildiv(N, block_N)], sm_num, block_id):
                T.clear(C_local)
                for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                    T.copy(A[bx * block_M, k * block_K], A_shared)
                    T.copy(B[k * block_K, by * block_N], B_shared)
                    T.gemm(A_shared, B_shared, C_local)
                T.copy(C_local, C_shared)
                T.copy(C_shared, C[bx * block_M, by * block_N])
        else:
            for w in T.serial(waves):
                tile_id = sm_num * w + block_id
                bx = (tile_id // group_size) % m_blocks
                by = (tile_id % group_size) + (tile_id // group_size) // m_blocks * group_size
                if bx * block_M < M and by * block_N < N:
                    T.clear(C_local)
                    for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                        T.copy(A[bx * block_M, k * block_K], A_shared)
                        T.copy(B[k * block_K, by * block_N], B_shared)
                        T.gemm(A_shared, B_shared, C_local)
                    T.copy(C_local, C_shared)
                    T.copy(C_shared, C[bx * block_M, by * block_N])
    return C


TILES = [pytest.param((128, 256, 64, 256, 3), id="128x256x64-t256-s3"),
         pytest.param((128, 128, 32, 128, 3), id="128x128x32-t128-s3")]
SIZES = [pytest.param((1024, 1536, 512), id="1024x1536x512"),
         pytest.param((1000, 1400, 520), id="tails-1000x1400x520")]


def _sms() -> int:
    return torch.cuda.get_device_properties(0).multi_processor_count


@pytest.mark.parametrize("blocks", ["sms", 5])
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("tile", TILES)
def test_persistent_gemm_matches_torch(tile, size, blocks):
    M, N, K = size
    bM, bN, bK, threads, stages = tile
    sm_num = _sms() if blocks == "sms" else blocks
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = matmul_persistent(a, b, bM, bN, bK, threads, stages, sm_num)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize("backend", ["tvm_ffi", "nvrtc"])
def test_upstream_wave_loop_and_execution_backends(backend):
    # upstream's hand-written spelling: its wave count has no term for group padding, so the
    # tile columns must be a multiple of the group (8 of 256 here) to cover every tile
    M, N, K = 1024, 2048, 512
    func = matmul_persistent.get_tir(M=M, N=N, K=K, block_M=128, block_N=256, block_K=64, threads=256,
                                     num_stages=3, sm_num=7, use_persistent_primitive=False)
    kernel = tilelang.compile(func, target="cuda", execution_backend=backend)  # out_idx: its T.empty
    source = kernel.get_kernel_source()
    assert "tl_tma_load_2d" in source and "tma_consumed" in source, "expected the carried TMA ring"
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(kernel(a, b).float(), a.float() @ b.float(), rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize("plain_read", [False, True], ids=["q-by-tma", "q-copied"])
def test_a_tile_loaded_once_per_tile_matches_torch(plain_read):
    """test_persistent_ring.q_times_k: Q copied once per tile before the K ring, loaded by the
    TMA producer (or, read outside the GEMMs too, copied by the consumers); 3 blocks walk
    8 tiles. S = Q (sum of K's blocks)^T, minus each row's max (+ Q itself)."""
    from test_persistent_ring import q_times_k

    kernel = tilelang.compile(q_times_k(plain_read), out_idx=[-1], target="cuda")
    q, k = (torch.randn(2, 512, 128, device="cuda", dtype=torch.float16) for _ in range(2))
    s = q.float() @ k.float().reshape(2, 4, 128, 128).sum(1).transpose(1, 2)
    expected = s - s.amax(-1, keepdim=True) + (q.float() if plain_read else 0)
    torch.testing.assert_close(kernel(q, k), expected, rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize("blocks", ["sms", 5])
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("spelling", ["scheduler", "scheduler_coord"])
def test_tile_scheduler_gemm_matches_torch(spelling, size, blocks):
    """T.PersistentTileScheduler's two spellings (tilelang.testing.kernels.persistent_gemm),
    panels of 8 tile columns, the last narrower: every tile once, the TMA ring carried."""
    from tilelang.testing.kernels import persistent_gemm

    M, N, K = size
    sm_num = _sms() if blocks == "sms" else blocks
    kernel = tilelang.compile(persistent_gemm(M, N, K, 128, 128, 32, 128, 3, sm_num, spelling), out_idx=[-1],
                              target="cuda")
    assert "tma_consumed" in kernel.get_kernel_source(), "expected the carried TMA ring"
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(kernel(a, b).float(), a.float() @ b.float(), rtol=1e-2, atol=5e-2)
