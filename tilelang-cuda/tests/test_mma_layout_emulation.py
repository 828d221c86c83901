"""The tensor-core lowering's index math, checked on the CPU against the PTX ISA.

`MMALayout` gives the row each lane hands to ldmatrix for the A and B fragments and where
each accumulator register sits in C; the pass builds its IR from the same functions. Here
ldmatrix and mma.sync m16n8k16 are emulated in numpy from their definitions in the PTX
ISA ("Warp-level matrix load instruction: ldmatrix", "Matrix Fragments for
mma.m16n8k16 with floating point type"), driven by those functions exactly as the
generated kernel drives the instructions — so a wrong address or register mapping shows
up as a wrong product here, without a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest
from tilelang.cuda.transform.mma_layout import MMALayout, choose_layout

WARP = 32


def ldmatrix_x4(tile: np.ndarray, rows: list[tuple[int, int]], trans: bool) -> np.ndarray:
    """regs[lane, i] = the 2 halves thread ``lane`` receives in register i. ``rows[l]`` is
    the (row, col) of the 8-element row that lane l addresses: lanes 8i..8i+7 give the
    rows of matrix i. Thread t gets row t // 4, columns 2 (t % 4) and + 1 of each matrix
    (of its transpose with .trans)."""
    regs = np.zeros((WARP, 4, 2), tile.dtype)
    for i in range(4):
        matrix = np.stack([tile[r, c:c + 8] for r, c in rows[8 * i:8 * i + 8]])
        if trans:
            matrix = matrix.T
        for t in range(WARP):
            regs[t, i] = matrix[t // 4, 2 * (t % 4):2 * (t % 4) + 2]
    return regs


def mma_m16n8k16(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    """c[lane] (4 floats) += A (16x16) @ B (16x8), from the lanes' fragments:
    A reg j holds row g + 8 (j % 2), columns 2t + 8 (j // 2) + {0, 1};
    B reg j holds column g, rows 2t + 8 j + {0, 1}; C reg j holds row g + 8 (j // 2),
    column 2t + j % 2 (g = lane // 4, t = lane % 4)."""
    A, B = np.zeros((16, 16)), np.zeros((16, 8))
    for lane in range(WARP):
        g, t = lane // 4, lane % 4
        for j in range(4):
            A[g + 8 * (j % 2), 2 * t + 8 * (j // 2):2 * t + 8 * (j // 2) + 2] = a[lane, j]
        for j in range(2):
            B[2 * t + 8 * j:2 * t + 8 * j + 2, g] = b[lane, j]
    D = A @ B
    for lane in range(WARP):
        g, t = lane // 4, lane % 4
        for j in range(4):
            c[lane, j] += D[g + 8 * (j // 2), 2 * t + j % 2]


def emulate_gemm(layout: MMALayout, a_tile: np.ndarray, b_tile: np.ndarray, k: int,
                 trans_a: bool, trans_b: bool) -> np.ndarray:
    """The block's product as the generated kernel computes it, scattered back into C."""
    C = np.full((layout.m, layout.n), np.nan)
    for warp in range(layout.warps_m * layout.warps_n):
        warp_m, warp_n = layout.warp_coords(warp)
        acc = np.zeros((WARP, layout.mt * layout.nt, 4))
        for kk in range(k // 16):
            a_frag = [ldmatrix_x4(a_tile, [layout.a_address(l, warp_m, mi, kk, trans_a) for l in range(WARP)],
                                  trans_a) for mi in range(layout.mt)]
            b_frag = []
            for nj in range(layout.nt // 2):  # one x4 load: registers of pieces 2nj and 2nj + 1
                regs = ldmatrix_x4(b_tile, [layout.b_address(l, warp_n, nj, kk, trans_b) for l in range(WARP)],
                                   not trans_b)
                b_frag += [regs[:, 0:2], regs[:, 2:4]]
            for mi in range(layout.mt):
                for ni in range(layout.nt):
                    view = acc[:, mi * layout.nt + ni]
                    mma_m16n8k16(a_frag[mi], b_frag[ni], view)
        for lane in range(WARP):
            for mi in range(layout.mt):
                for ni in range(layout.nt):
                    for h in range(2):
                        for v in range(2):
                            r, c = layout.c_position(lane, warp_m, warp_n, mi, ni, h, v)
                            index = layout.c_register(mi, ni, h, v)
                            assert np.isnan(C[r, c]), f"C[{r}, {c}] is held by two threads"
                            C[r, c] = acc[lane].reshape(-1)[index]
    assert not np.isnan(C).any(), "some elements of C are held by no thread"
    return C


@pytest.mark.parametrize("m,n,k,warps", [(128, 128, 32, 4), (64, 64, 32, 4), (128, 128, 64, 8),
                                         (32, 64, 16, 2), (64, 32, 48, 1)])
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (False, True), (True, False), (True, True)])
def test_emulated_tensor_core_gemm_matches_numpy(m, n, k, warps, trans_a, trans_b):
    layout = choose_layout(m, n, warps)
    assert layout is not None
    rng = np.random.default_rng(m + n + k + warps)
    A = rng.integers(-4, 5, (m, k)).astype(np.float64)  # small integers: exact sums
    B = rng.integers(-4, 5, (k, n)).astype(np.float64)
    a_tile = A.T.copy() if trans_a else A  # the shared tile as stored
    b_tile = B.T.copy() if trans_b else B
    np.testing.assert_array_equal(emulate_gemm(layout, a_tile, b_tile, k, trans_a, trans_b), A @ B)


def test_emulation_catches_a_wrong_mapping():
    """The check has teeth: swapping the two 8-row halves of the A operand breaks it."""

    class Broken(MMALayout):
        def a_address(self, lane, warp_m, mi, kk, trans_a):
            row, col = super().a_address(lane ^ 8, warp_m, mi, kk, trans_a)
            return row, col

    layout = Broken(64, 64, 2, 2)
    A, B = np.arange(64 * 32).reshape(64, 32) % 7 - 3.0, np.arange(32 * 64).reshape(32, 64) % 5 - 2.0
    assert not np.array_equal(emulate_gemm(layout, A, B, 32, False, False), A @ B)
