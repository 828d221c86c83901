"""``tilelang.cuda.intrinsics.layout``: upstream's mma.sync operand maps, checked three ways:
each is one-to-one onto 32 lanes x its registers and inverts its ``mma_load`` partner; the
16-bit A map equals the PTX ISA's m16n8k16 fragment table written out here; and the
registers the emitter's ldmatrix leaves in each lane (lowered-IR emulator) hold exactly the
elements the maps name."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from lowered_instructions import lowered_kernel
from tilelang.cuda.intrinsics.layout import get_mma_micro_size
from tilelang.cuda.intrinsics.layout import mma_layout as ml
from tilelang.cuda.intrinsics.macro.mma_macro_generator import TensorCoreIntrinEmitter

SM80 = {"kind": "cuda", "arch": "sm_80"}

# (tile rows, tile cols, registers per lane, forward map, inverse map)
OPERAND_MAPS = {
    "a_tf32": (16, 8, 4, ml.shared_16x8_to_mma_a_32x4_layout, ml.mma_load_a_32x4_to_shared_16x8_layout),
    "a_16bit": (16, 16, 8, ml.shared_16x16_to_mma_a_32x8_layout, ml.mma_load_a_32x8_to_shared_16x16_layout),
    "a_8bit": (16, 32, 16, ml.shared_16x32_to_mma_a_32x16_layout, ml.mma_load_a_32x16_to_shared_16x32_layout),
    "a_4bit": (16, 64, 32, ml.shared_16x64_to_mma_a_32x32_layout, ml.mma_load_a_32x32_to_shared_16x64_layout),
    "b_tf32": (16, 8, 4, ml.shared_16x8_to_mma_b_32x4_layout, ml.mma_load_b_32x4_to_shared_16x8_layout),
    "b_16bit": (16, 16, 8, ml.shared_16x16_to_mma_b_32x8_layout, ml.mma_load_b_32x8_to_shared_16x16_layout),
    "b_8bit": (16, 32, 16, ml.shared_16x32_to_mma_b_32x16_layout, ml.mma_load_b_32x16_to_shared_16x32_layout),
}


@pytest.mark.parametrize("name", OPERAND_MAPS)
def test_operand_maps_are_one_to_one_and_invert_their_loads(name):
    rows, cols, registers, forward, inverse = OPERAND_MAPS[name]
    seen = {}
    for i in range(rows):
        for j in range(cols):
            lane, register = forward(i, j)
            assert 0 <= lane < 32 and 0 <= register < registers
            seen[lane, register] = (i, j)
            assert inverse(lane, register) == (i, j)
    assert len(seen) == 32 * registers


def test_the_16bit_a_map_is_the_ptx_fragment_table():
    # PTX ISA, "Matrix Fragments for mma.m16n8k16" (.f16/.bf16 A): groupID = lane >> 2,
    # threadID_in_group = lane % 4; a_i: row groupID for a0, a1, a4, a5, else groupID + 8;
    # col threadID_in_group * 2 + (i & 1) for i < 4, that + 8 for i >= 4
    for lane in range(32):
        group, t = lane >> 2, lane % 4
        for i in range(8):
            row = group if i in (0, 1, 4, 5) else group + 8
            col = t * 2 + (i & 1) + (8 if i >= 4 else 0)
            assert ml.shared_16x16_to_mma_a_32x8_layout(row, col) == (lane, i)


def test_transposed_maps_and_upstream_aliases():
    assert ml.shared_16x16_to_mma_a_32x8_layout_trans(5, 3) == ml.shared_16x16_to_mma_a_32x8_layout(3, 5)
    assert ml.shared_32x16_to_mma_b_32x16_layout_trans(20, 9) == ml.shared_16x32_to_mma_b_32x16_layout(9, 20)
    assert ml.shared_16x16_to_mma_32x8_layout_sr_a is ml.shared_16x16_to_mma_a_32x8_layout
    assert ml.shared_16x32_to_mma_32x16_layout_rs_b is ml.shared_32x16_to_mma_b_32x16_layout_trans
    assert get_mma_micro_size("float16") == (16, 16, 16) and get_mma_micro_size("int8") == (16, 16, 32)


def test_the_accumulator_map_is_the_emitters():
    emitter = TensorCoreIntrinEmitter(a_dtype="float16", b_dtype="float16", accum_dtype="float32",
                                      block_row_warps=1, block_col_warps=1, warp_row_tiles=16,
                                      warp_col_tiles=16, chunk=16)
    for lane in range(32):
        for register in range(8):
            assert ml.mma_store_32x8_to_shared_16x16_layout(lane, register) == \
                tuple(int(x) for x in emitter.store_index(lane, register))


def _fragments_kernel(dtype: str):
    """Each lane's registers after the emitter's ldmatrix of a 16 x k A tile and a 16 x k
    (N x K) B tile: ``OutA[lane, r] = A_local[r]``."""
    k = get_mma_micro_size(dtype)[2]
    emitter = TensorCoreIntrinEmitter(a_dtype=dtype, b_dtype=dtype, accum_dtype="int32" if dtype == "int8" else
                                      "float32", b_transposed=True, block_row_warps=1, block_col_warps=1,
                                      warp_row_tiles=16, warp_col_tiles=16, chunk=k)
    la, lb = emitter.local_size_a, emitter.local_size_b * emitter.warp_cols

    @T.prim_func
    def fragments(A: T.Tensor((16, k), dtype), B: T.Tensor((16, k), dtype), OutA: T.Tensor((32, la), dtype),
                  OutB: T.Tensor((32, lb), dtype)):
        with T.Kernel(1, threads=32):
            A_shared = T.alloc_shared((16, k), dtype)
            B_shared = T.alloc_shared((16, k), dtype)
            A_local = T.alloc_local((la,), dtype)
            B_local = T.alloc_local((lb,), dtype)
            tx = T.get_thread_binding()
            for i, j in T.Parallel(16, k):
                A_shared[i, j] = A[i, j]
                B_shared[i, j] = B[i, j]
            emitter.ldmatrix_a(A_local, A_shared, 0)
            emitter.ldmatrix_b(B_local, B_shared, 0)
            for r in T.serial(la):
                OutA[tx, r] = A_local[r]
            for r in T.serial(lb):
                OutB[tx, r] = B_local[r]

    return fragments, k, la, lb


@pytest.mark.parametrize("dtype", ["float16", "int8"])
def test_the_emitters_ldmatrix_fills_registers_as_the_maps_say(dtype):
    fragments, k, la, lb = _fragments_kernel(dtype)
    a = np.arange(16 * k).reshape(16, k).astype(dtype)  # every element distinct (int8 wraps: still a check)
    b = (np.arange(16 * k).reshape(16, k) * 3 + 1).astype(dtype)
    out_a, out_b = np.zeros((32, la), dtype), np.zeros((32, lb), dtype)
    lowered_kernel(tilelang.lower(fragments, target=SM80).device_mod)(a, b, out_a, out_b)
    load_a = {"float16": ml.mma_load_a_32x8_to_shared_16x16_layout, "int8": ml.mma_load_a_32x16_to_shared_16x32_layout}
    load_b = {"float16": ml.mma_load_b_32x8_to_shared_16x16_layout, "int8": ml.mma_load_b_32x16_to_shared_16x32_layout}
    want_a = np.array([[a[load_a[dtype](lane, r)] for r in range(la)] for lane in range(32)])
    want_b = np.array([[b[load_b[dtype](lane, r)] for r in range(lb)] for lane in range(32)])
    np.testing.assert_array_equal(out_a, want_a)
    np.testing.assert_array_equal(out_b, want_b)


def test_a_fragment_from_the_maps_covers_one_warp():
    # upstream's plot_layout example builds its base fragment this way
    from tvm.tirx import IndexMap

    inverse = IndexMap.from_func(ml.shared_16x16_to_mma_32x8_layout_sr_a, index_dtype="int32")
    fragment = T.Fragment([16, 16], forward_thread_fn=lambda i, j: inverse.map_indices([i, j])[0],
                          forward_index_fn=lambda i, j: inverse.map_indices([i, j])[1])
    assert fragment.get_thread_size() == 32
    assert fragment.repeat([2, 1], repeat_on_thread=True).replicate(2).get_thread_size() == 128
