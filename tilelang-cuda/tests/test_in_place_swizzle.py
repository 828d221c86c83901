"""Tiles kept as declared, swizzled in place (transform/in_place_swizzle.py): FlashMLA's
shape of kernel, whose KV ring the kernel fills at addresses it computes, run as lowered
(lowered_instructions) against numpy; the places each access moves to; and the tiles that
stay as declared. The GPU run is marked `gpu`."""

from __future__ import annotations

import re

import numpy as np
import pytest
import tilelang
import tilelang.language as T
import tvm
from test_lowered_emulation import SM80, SM90, run, small_ints
from tilelang.cuda.transform.in_place_swizzle import swizzled_column
from tvm import tirx


def ring_kernel(width: int = 128, step: int = 8):
    """S = Q K^T and O = P V over a 2-stage ring filled 16 bytes at a time by T.ptx_cp_async
    (``step`` elements apart: 8 keeps every copy on a whole 16-byte chunk), with Q and P
    through T.copy and column slices as operands; O leaves through a shared tile too."""

    @T.prim_func
    def ring(Q: T.Tensor((64, width), "float16"), KV: T.Tensor((2, 32, width), "float16"),
             S: T.Tensor((64, 32), "float32"), O: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            q_s = T.alloc_shared((64, width), "float16")
            kv_s = T.alloc_shared((2, 32, width), "float16")
            p_s = T.alloc_shared((64, 32), "float16")
            o_s = T.alloc_shared((64, 64), "float16")
            acc_s = T.alloc_fragment((64, 32), "float32")
            acc_o = T.alloc_fragment((64, 64), "float32")
            tx = T.get_thread_binding()
            T.copy(Q, q_s)
            for stage in T.serial(2):
                for r in T.serial(width // 32):
                    T.ptx_cp_async(T.access_ptr(kv_s[stage, tx // 4, r * 32 + tx % 4 * step], "w", 8),
                                   T.access_ptr(KV[stage, tx // 4, r * 32 + tx % 4 * step], "r", 8), 8)
            T.clear(acc_o)
            for stage in T.serial(2):
                T.clear(acc_s)
                T.gemm(q_s[:, 0:64], kv_s[stage, :, 0:64], acc_s, transpose_B=True)
                T.gemm(q_s[:, 64:width], kv_s[stage, :, 64:width], acc_s, transpose_B=True)
                T.copy(acc_s, S)
                T.copy(acc_s, p_s)
                T.gemm(p_s, kv_s[stage, :, 64:128], acc_o)
            T.copy(acc_o, o_s)
            T.copy(o_s, O)

    return ring


def expected(q64, kv64):
    scores = [q64 @ kv64[i].T for i in range(2)]
    out = sum(scores[i].astype(np.float16).astype(np.float64) @ kv64[i][:, 64:128] for i in range(2))
    return scores[1], out


@pytest.mark.parametrize("target", [SM80, SM90])
def test_a_ring_the_kernel_fills_itself_is_swizzled_in_place_and_stays_correct(target):
    artifact = tilelang.lower(ring_kernel(), target=target)
    source = artifact.device_source
    body = source[source.index('extern "C" __global__'):]
    assert body.count("tl_mma_m16n8k16_f16_f32(") >= 3
    # every B fragment comes from the ring, and each of its ldmatrix row addresses has the
    # 16-byte chunk XORed with the row; so do Q's (A of S = Q K^T); P's tile is padded
    loads = re.findall(r"tl_ldmatrix_x4(?:_trans)?\(.*", body)
    ring = [line for line in loads if "B_frag" in line]
    assert len(ring) >= 8 and all("^" in line for line in ring)
    assert any("^" in line for line in loads if "A_frag" in line)
    rng = np.random.default_rng(5)
    q, q64 = small_ints(rng, (64, 128))
    kv, kv64 = small_ints(rng, (2, 32, 128))
    s, o = np.zeros((64, 32), np.float32), np.zeros((64, 64), np.float16)
    run(artifact.device_mod, q, kv, s, o)
    want_s, want_o = expected(q64, kv64)
    np.testing.assert_array_equal(s, want_s)
    np.testing.assert_allclose(o.astype(np.float64), want_o, rtol=1e-3)


def test_a_copy_that_is_not_on_a_whole_chunk_keeps_the_ring_as_declared():
    """Copies 4 elements apart overlap 16-byte chunks: the swizzle could split a copy, so
    the ring keeps its declared rows (still correct: the old lowering)."""
    artifact = tilelang.lower(ring_kernel(step=4), target=SM80)
    body = artifact.device_source[artifact.device_source.index('extern "C" __global__'):]
    ring_loads = re.findall(r"tl_ldmatrix_x4_trans\(.*", body)
    assert ring_loads and not any("^" in line for line in ring_loads)


def test_rows_that_are_not_whole_128_byte_segments_stay_as_declared():
    """96 halves a row (192 bytes): the swizzle permutes chunks within 128-byte segments."""
    body = tilelang.lower(ring_kernel(width=96), target=SM80).device_source
    body = body[body.index('extern "C" __global__'):]
    assert not any("^" in line for line in re.findall(r"tl_ldmatrix_x4\(.*", body))


def test_the_swizzle_is_a_permutation_of_chunks_within_each_segment():
    """For each row, columns map one to one within their 128-byte segment, a chunk's 8
    halves stay together, and the eight rows of an ldmatrix at one column land in eight
    different chunks."""

    def place(row: int, col: int) -> int:
        moved = swizzled_column(tirx.IntImm("int32", row), tirx.IntImm("int32", col), 8)
        return int(tvm.sym.analyzer.Analyzer().simplify(moved).value)

    for row in range(16):
        moved = [place(row, col) for col in range(256)]
        assert sorted(moved) == list(range(256))
        assert all(c // 64 == m // 64 and c % 8 == m % 8 for c, m in zip(range(256), moved))
    for col in range(0, 64, 8):
        assert len({place(r, col) // 8 for r in range(8)}) == 8


def gemms_on_both_lowerings():
    """One tile read by a GEMM on tensor cores (as a slice, so kept as declared) and by a
    GEMM left to the shared SIMT lowering (its C is copied to another fragment), as
    upstream's example_gqa_bwd reads K_shared."""

    @T.prim_func
    def mixed(K: T.Tensor((64, 128), "float16"), Qm: T.Tensor((32, 128), "float16"),
              P: T.Tensor((32, 64), "float16"), S: T.Tensor((64, 32), "float16"), D: T.Tensor((32, 64), "float32")):
        with T.Kernel(1, threads=128):
            k_s = T.alloc_shared((64, 128), "float16")
            q_s = T.alloc_shared((32, 128), "float16")
            p_s = T.alloc_shared((32, 64), "float16")
            s_acc = T.alloc_fragment((64, 32), "float32")
            s_cast = T.alloc_fragment((64, 32), "float16")
            d_acc = T.alloc_fragment((32, 64), "float32")
            T.copy(K, k_s)
            T.copy(Qm, q_s)
            T.copy(P, p_s)
            T.clear(s_acc)
            T.gemm(k_s, q_s, s_acc, transpose_B=True)
            T.copy(s_acc, s_cast)
            T.copy(s_cast, S)
            T.clear(d_acc)
            T.gemm(p_s, k_s[:, 0:64], d_acc)
            T.copy(d_acc, D)

    return mixed


@pytest.mark.parametrize("target", [SM80, SM90])
def test_a_tile_a_simt_gemm_reads_stays_as_declared(target):
    """The SIMT GEMM reads the tile at its declared places, so the tile is not swizzled in
    place (it was: every row but each eighth read the wrong chunks, and example_gqa_bwd's
    dK and dV were wrong on the H200)."""
    artifact = tilelang.lower(gemms_on_both_lowerings(), target=target)
    rng = np.random.default_rng(8)
    (k, k64), (q, q64), (p, p64) = (small_ints(rng, shape) for shape in ((64, 128), (32, 128), (32, 64)))
    s, d = np.full((64, 32), np.nan, np.float16), np.full((32, 64), np.nan, np.float32)
    calls = run(artifact.device_mod, k, q, p, s, d)
    assert calls["tl_mma_m16n8k16_f16_f32"] > 0  # D = P K[:, :64] on tensor cores
    np.testing.assert_array_equal(s.astype(np.float64), k64 @ q64.T)
    np.testing.assert_array_equal(d, p64 @ k64[:, :64])


@pytest.mark.gpu
def test_a_ring_swizzled_in_place_on_the_gpu():
    import torch  # the gpu marker skips the test where torch sees no CUDA GPU

    kernel = tilelang.compile(ring_kernel())
    q = torch.randint(-3, 4, (64, 128), device="cuda").half()
    kv = torch.randint(-3, 4, (2, 32, 128), device="cuda").half()
    want_s, want_o = expected(q.double().cpu().numpy(), kv.double().cpu().numpy())
    for _ in range(10):
        s, o = torch.zeros(64, 32, device="cuda"), torch.zeros(64, 64, device="cuda", dtype=torch.float16)
        kernel(q, kv, s, o)
        np.testing.assert_array_equal(s.cpu().numpy(), want_s)
        np.testing.assert_allclose(o.double().cpu().numpy(), want_o, rtol=1e-3)


# -- a ring that T.tma_copy fills (upstream's minference): TMA writes the swizzle itself ----
def tma_ring_kernel(cols: int = 64, odd_buffer: bool = False):
    """Q K^T for 4 key blocks through a 2-stage ring of 3-d tiles: a producer branch fills
    each stage with T.tma_copy, the consumer branch reads stage slices as GEMM operands;
    mbarriers order them. Then the consumer stores a fifth block (twice the first) into
    stage 0 itself and multiplies it too: the ring has element stores, so it stays one 3-d
    tile, as upstream's minference kernel's does. Another shared buffer takes 1 KiB, or
    16 bytes with ``odd_buffer`` (the ring may then not start on 1 KiB)."""

    @T.prim_func
    def ring(Q: T.Tensor((64, cols), "float16"), K: T.Tensor((4, 64, cols), "float16"),
             S: T.Tensor((5, 64, 64), "float32")):
        with T.Kernel(1, threads=256):
            q_s = T.alloc_shared((64, cols), "float16")
            k_s = T.alloc_shared((2, 64, cols), "float16")
            flag = T.alloc_shared((4 if odd_buffer else 256,), "float32")
            acc = T.alloc_fragment((64, 64), "float32")
            bars = T.alloc_barrier([128] * 4)
            tx = T.get_thread_binding()
            T.copy(Q, q_s)
            if tx < 4:
                flag[tx] = 1.0
            if tx >= 128:
                for i in T.serial(4):
                    T.mbarrier_wait_parity(bars[i % 2 + 2], ((i & 3) >> 1) ^ 1)
                    T.tma_copy(K[i, :, :], k_s[i % 2, :, :], barrier=bars[i % 2])
                    T.mbarrier_arrive(bars[i % 2])
            else:
                for i in T.serial(4):
                    T.mbarrier_wait_parity(bars[i % 2], (i & 3) >> 1)
                    T.clear(acc)
                    T.gemm(q_s, k_s[i % 2, :, :], acc, transpose_B=True)
                    T.mbarrier_arrive(bars[i % 2 + 2])
                    T.copy(acc, S[i, :, :])
                for r, c in T.Parallel(64, cols):
                    k_s[0, r, c] = K[0, r, c] * T.float16(2)
                T.clear(acc)
                T.gemm(q_s, k_s[0, :, :], acc, transpose_B=True)
                T.copy(acc, S[4, :, :])

    return ring


def lowered_with_maps(func, monkeypatch):
    """(kernel body, {tensor: swizzle} of every tensor map the host encodes) of ``func``
    lowered for tvm_ffi on sm_90 (its host code encodes the maps)."""
    from test_explicit_hopper import lower as lower_for_backend
    from tilelang.cuda.transform import tma_copy

    encoded = {}
    original = tma_copy.encode_tensor_map

    def recording(var, buffer, rows, cols, swizzle=None, split=None):
        encoded[buffer.name] = swizzle
        return original(var, buffer, rows, cols, swizzle, split=split)

    monkeypatch.setattr(tma_copy, "encode_tensor_map", recording)
    source = lower_for_backend(func).kernel_source
    return source[source.index('extern "C" __global__'):], encoded


def test_a_ring_tma_fills_is_swizzled_in_place_by_the_boxes(monkeypatch):
    """Rows of 128 bytes: the boxes use TMA's 128-byte swizzle (CU_TENSOR_MAP_SWIZZLE_128B,
    3), which puts chunk c of row r at c ^ (r % 8), the in-place swizzle's place, so the
    ldmatrix reads of the ring follow it; each box checks its 1 KiB base when it runs."""
    body, encoded = lowered_with_maps(tma_ring_kernel(), monkeypatch)
    assert encoded == {"K": 3}
    ring = [line for line in re.findall(r"tl_ldmatrix_x4(?:_trans)?\(.*", body) if "B_frag" in line]
    assert ring and all("^" in line for line in ring)
    assert body.index("tl_check_swizzle_base(") < body.index("tl_tma_load_3d(")
    assert "tl_check_tma_destination(" not in body


@pytest.mark.parametrize("case", ["64-byte rows", "a buffer of 16 bytes"])
def test_a_ring_tma_fills_stays_as_declared_where_the_boxes_cannot_swizzle(monkeypatch, case):
    """Rows of 64 bytes (TMA's swizzle of 64 bytes is another pattern), or another shared
    buffer that is not whole KiB (the ring might not start on 1 KiB): unswizzled boxes."""
    func = tma_ring_kernel(cols=32) if case == "64-byte rows" else tma_ring_kernel(odd_buffer=True)
    body, encoded = lowered_with_maps(func, monkeypatch)
    assert encoded == {"K": None}
    assert "tl_check_tma_destination(" in body and "tl_check_swizzle_base(" not in body
    assert not any("^" in line for line in re.findall(r"tl_ldmatrix_x4(?:_trans)?\(.*", body))


@pytest.mark.gpu
@pytest.mark.parametrize("odd_buffer", [False, True], ids=["swizzled", "as-declared"])
def test_a_ring_tma_fills_on_the_gpu(odd_buffer):
    from test_explicit_hopper import sm90_torch

    torch = sm90_torch()
    kernel = tilelang.compile(tma_ring_kernel(odd_buffer=odd_buffer), execution_backend="tvm_ffi")
    q = torch.randint(-3, 4, (64, 64), device="cuda").half()
    k = torch.randint(-3, 4, (4, 64, 64), device="cuda").half()
    for _ in range(5):
        s = torch.full((5, 64, 64), float("nan"), device="cuda")
        kernel(q, k, s)
        keys = torch.cat([k, 2 * k[:1]]).float()
        torch.testing.assert_close(s, torch.einsum("md,knd->kmn", q.float(), keys), rtol=0, atol=0)
