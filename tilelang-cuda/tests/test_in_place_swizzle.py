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
