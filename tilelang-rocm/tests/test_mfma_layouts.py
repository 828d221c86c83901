"""``tilelang.rocm.intrinsics``: upstream's MFMA operand maps. Each is one-to-one onto 64
lanes x its registers and inverts its partner; the 16-bit ones are the CDNA3 ISA's operand
layout of v_mfma_f32_16x16x16f16, the layout hip_mfma.h (this backend's GEMM) loads by: lane
l holds A[l % 16][4 (l / 16) + r], B[4 (l / 16) + r][l % 16] and C[4 (l / 16) + r][l % 16]."""

from __future__ import annotations

import pytest
import tilelang.language as T
from tilelang.rocm.intrinsics import get_mma_micro_size, make_mfma_swizzle_layout
from tilelang.rocm.intrinsics import mfma_layout as ml

A_MAPS = {  # k: (forward, inverse)
    4: (ml.shared_16x4_to_local_64x1_layout_A, ml.thread_id_shared_access_64x1_to_16x4_layout_A),
    16: (ml.shared_16x16_to_local_64x4_layout_A, ml.thread_id_shared_access_64x4_to_16x16_layout_A),
    32: (ml.shared_16x32_to_local_64x8_layout_A, ml.thread_id_shared_access_64x8_to_16x32_layout_A),
    64: (ml.shared_16x64_to_local_64x16_layout_A, ml.thread_id_shared_access_64x16_to_16x64_layout_A),
}


@pytest.mark.parametrize("k", sorted(A_MAPS))
def test_a_maps_are_one_to_one_and_invert(k):
    forward, inverse = A_MAPS[k]
    seen = set()
    for i in range(16):
        for j in range(k):
            lane, register = forward(i, j)
            assert 0 <= lane < 64 and 0 <= register < k // 4
            seen.add((lane, register))
            assert inverse(lane, register) == (i, j)
    assert len(seen) == 64 * (k // 4)


def test_16x16x16_maps_are_the_isa_operand_layout():
    for lane in range(64):
        for r in range(4):
            assert ml.shared_16x16_to_local_64x4_layout_A(lane % 16, 4 * (lane // 16) + r) == (lane, r)
            assert ml.shared_16x16_to_local_64x4_layout_B(4 * (lane // 16) + r, lane % 16) == (lane, r)
            assert ml.shared_16x16_to_local_64x4_layout_C(4 * (lane // 16) + r, lane % 16) == (lane, r)
            assert ml.thread_id_shared_access_64x4_to_16x16_layout_B(lane, r) == (4 * (lane // 16) + r, lane % 16)


def test_b_maps_mirror_the_a_maps():
    for k, b in ((4, ml.shared_4x16_to_local_64x1_layout_B), (32, ml.shared_32x16_to_local_64x8_layout_B),
                 (64, ml.shared_64x16_to_local_64x16_layout_B)):
        assert all(b(kk, n) == A_MAPS[k][0](n, kk) for kk in range(k) for n in range(16))


def test_micro_sizes_and_the_swizzle_request():
    assert get_mma_micro_size("float16") == (16, 16, 16) and get_mma_micro_size("int8") == (16, 16, 32)
    from tvm import tirx

    buffer = tirx.decl_buffer((32, 64), "float16", name="A_shared", scope="shared")
    layout = make_mfma_swizzle_layout(buffer)
    assert layout.buffer.same_as(buffer) and layout.width == 128


def test_a_fragment_from_the_maps_covers_one_wavefront():
    fragment = T.Fragment([16, 16], forward_thread_fn=lambda i, j: ml.shared_16x16_to_local_64x4_layout_A(i, j)[0],
                          forward_index_fn=lambda i, j: ml.shared_16x16_to_local_64x4_layout_A(i, j)[1])
    assert fragment.get_thread_size() == 64
