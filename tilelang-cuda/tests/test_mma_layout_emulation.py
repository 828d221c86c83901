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
from lowered_instructions import descriptor_address
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


def held_elements(layout: MMALayout, warp: int):
    """(lane, register, (row, col)) of every element of C that the threads of ``warp`` hold."""
    warp_m, warp_n = layout.warp_coords(warp)
    for lane in range(WARP):
        for mi in range(layout.mt):
            for ni in range(layout.nt):
                for h in range(2):
                    for v in range(2):
                        yield (lane, layout.c_register(mi, ni, h, v),
                               layout.c_position(lane, warp_m, warp_n, mi, ni, h, v))


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
        for lane, index, (r, c) in held_elements(layout, warp):
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


# -- wgmma (sm_90): shared-memory descriptors and the accumulator layout ----------------------
def descriptor_fields(desc: int) -> tuple[int, int, int, int]:
    """(start byte address, leading byte offset, stride byte offset, swizzle mode) of a
    wgmma matrix descriptor (PTX ISA, "Matrix Descriptor Format"), as tl_wgmma_desc packs it."""
    return ((desc & 0x3FFF) << 4, ((desc >> 16) & 0x3FFF) << 4, ((desc >> 32) & 0x3FFF) << 4, desc >> 62)


def pack_descriptor(start: int, lbo: int, sbo: int, mode: int) -> int:
    """tl_wgmma_desc of tl_device.h, in Python."""
    return ((start & 0x3FFFF) >> 4) | (((lbo >> 4) & 0x3FFF) << 16) | (((sbo >> 4) & 0x3FFF) << 32) | (mode << 62)


def canonical_address(desc: int, mn: int, k: int, k_major: bool, dtype_bytes: int) -> int:
    """The shared byte address the hardware reads for operand element (mn, k) of one
    wgmma, from the descriptor alone: the canonical layouts of the PTX ISA ("Shared Memory
    Matrix Layout"), as the lowered-IR emulator reads them (lowered_instructions.py)."""
    return int(descriptor_address(desc, mn, k, k_major, dtype_bytes))


LAYOUT_CASES = [  # rows, cols of the shared tile, K along its columns?, the wgmma's M or N extent
    (128, 64, True, 64), (128, 32, True, 64), (64, 128, False, 128), (32, 256, False, 256),
    (64, 64, False, 64), (32, 128, False, 64), (128, 16, True, 64), (64, 128, True, 64),
]


@pytest.mark.parametrize("swizzle", [True, False])
@pytest.mark.parametrize("rows,cols,k_along_cols,extent", LAYOUT_CASES)
def test_wgmma_descriptors_read_what_the_tile_stores(rows, cols, k_along_cols, extent, swizzle):
    """Every element of every wgmma (each 16-deep k step, each 64-row / N-column piece)
    read through the descriptor the pass builds is the element the tile layout stored
    there; the copies' vector order covers the tile once, 16 contiguous bytes per vector."""
    from tilelang.cuda.transform.mma_layout import CoreMatrixLayout, SwizzledLayout

    eb = 2
    if swizzle:
        layout = SwizzledLayout.choose(rows, cols, eb, None if k_along_cols else extent)
        if layout is None:
            pytest.skip("no swizzle fits")
    else:
        layout = CoreMatrixLayout(rows, cols, eb)
    stored = {layout.offset(r, c): (r, c) for r in range(rows) for c in range(cols)}
    assert len(stored) == rows * cols and max(stored) == rows * cols - 1  # a bijection onto the tile
    lbo, sbo = layout.strides(k_along_cols)
    k_total, mn_total = (cols, rows) if k_along_cols else (rows, cols)
    for kk in range(k_total // 16):
        for base in range(0, mn_total, extent):
            r0, c0 = (base, kk * 16) if k_along_cols else (kk * 16, base)
            desc = pack_descriptor(layout.start(r0, c0) * eb, lbo, sbo, layout.mode)
            for mn in range(extent):
                for k in range(16):
                    address = canonical_address(desc, mn, k, k_along_cols, eb)
                    expected = (base + mn, kk * 16 + k) if k_along_cols else (kk * 16 + k, base + mn)
                    assert stored[address // eb] == expected, (kk, base, mn, k)
    vectors = [layout.vector(q) for q in range(rows * cols * eb // 16)]
    assert sorted(layout.offset(r, c) for r, c in vectors) == list(range(0, rows * cols, 16 // eb))
    for r, c in vectors:  # a vector is 8 consecutive elements of one row, stored contiguously
        assert [layout.offset(r, c + i) for i in range(8)] == list(range(layout.offset(r, c), layout.offset(r, c) + 8))


def test_wgmma_copies_write_each_128_bytes_with_8_consecutive_threads():
    """Eight consecutive threads' 16-byte cp.async vectors land in one 128-byte line (a
    shared-memory wavefront without bank conflicts), for every layout."""
    from tilelang.cuda.transform.mma_layout import CoreMatrixLayout, SwizzledLayout

    for layout in (CoreMatrixLayout(128, 32, 2), SwizzledLayout(128, 64, 2, 128), SwizzledLayout(128, 32, 2, 64),
                   SwizzledLayout(64, 256, 2, 128)):
        for q0 in range(0, layout.size * 2 // 16, 8):
            lines = {layout.offset(*layout.vector(q)) * 2 // 128 for q in range(q0, q0 + 8)}
            assert len(lines) == 1, (layout, q0)


def wgmma_accumulator_position(warp_in_group: int, lane: int, reg: int) -> tuple[int, int]:
    """(row, column) of register ``reg`` of a thread within one wgmma.m64nNk16 D (PTX ISA,
    "Register Fragments: wgmma D"): rows 16 w + lane / 4 (+ 8 for the odd register pair),
    column 8 (reg / 4) + 2 (lane % 4) + reg % 2."""
    return (16 * warp_in_group + lane // 4 + 8 * (reg // 2 % 2), 8 * (reg // 4) + 2 * (lane % 4) + reg % 2)


@pytest.mark.parametrize("m,n,warps", [(128, 128, 4), (128, 256, 8), (256, 128, 8), (64, 64, 4), (128, 128, 8)])
def test_wgmma_accumulator_layout_matches_the_ptx_fragments(m, n, warps):
    """Each thread's register i of C, as WGMMALayout places it, is where the wgmma that
    writes that register (piece mi, accumulator d[i - mi * N / 2]) puts its result; every
    element of C is held exactly once."""
    from tilelang.cuda.transform.mma_layout import choose_wgmma_layout

    layout = choose_wgmma_layout(m, n, warps)
    seen = set()
    for warp in range(warps):
        warp_m, warp_n = layout.warp_coords(warp)
        group_m, group_n = warp // 4 // layout.groups_n, warp // 4 % layout.groups_n
        for lane in range(WARP):
            for mi in range(layout.mt):
                for ni in range(layout.nt):
                    for h in range(2):
                        for v in range(2):
                            reg = layout.c_register(mi, ni, h, v)
                            row, col = layout.c_position(lane, warp_m, warp_n, mi, ni, h, v)
                            piece_reg = reg - mi * layout.nt * 4  # the wgmma's own d[] index
                            r, c = wgmma_accumulator_position(warp % 4, lane, piece_reg)
                            assert (row, col) == (group_m * layout.wm + mi * 64 + r, group_n * layout.wn + c)
                            seen.add((row, col))
    assert len(seen) == m * n


# -- row families (flash-attention): row vectors and the accumulator as the next A operand ----
def scatter_to_threads(layout: MMALayout, tile: np.ndarray) -> np.ndarray:
    """regs[warp, lane, i]: the element of ``tile`` each thread holds in register i."""
    regs = np.zeros((layout.warps_m * layout.warps_n, WARP, layout.per_thread), tile.dtype)
    for warp in range(layout.warps_m * layout.warps_n):
        for lane, index, (r, c) in held_elements(layout, warp):
            regs[warp, lane, index] = tile[r, c]
    return regs


@pytest.mark.parametrize("m,k,n,warps", [(64, 64, 64, 4), (64, 32, 128, 4), (128, 64, 32, 4), (32, 16, 16, 2)])
def test_accumulator_registers_are_the_next_gemms_a_fragments(m, k, n, warps):
    """P (M x K, warps over rows only) held in the accumulator layout, its registers read
    as A fragments (pieces 2 kk and 2 kk + 1: 8 halves = 4 registers) by mma with B from
    ldmatrix: P @ V as numpy computes it."""
    p_layout, o_layout = MMALayout(m, k, warps, 1), MMALayout(m, n, warps, 1)
    rng = np.random.default_rng(m + k + n)
    P = rng.integers(-4, 5, (m, k)).astype(np.float64)
    V = rng.integers(-4, 5, (k, n)).astype(np.float64)
    p_regs = scatter_to_threads(p_layout, P)
    O = np.full((m, n), np.nan)
    for warp in range(warps):
        acc = np.zeros((WARP, o_layout.mt * o_layout.nt, 4))
        for kk in range(k // 16):
            b_frag = []
            for nj in range(o_layout.nt // 2):
                regs = ldmatrix_x4(V, [o_layout.b_address(l, 0, nj, kk, False) for l in range(WARP)], True)
                b_frag += [regs[:, 0:2], regs[:, 2:4]]
            for mi in range(o_layout.mt):
                base = (mi * p_layout.nt + 2 * kk) * 4  # what the pass passes as the A pointer
                a_frag = p_regs[warp, :, base:base + 8].reshape(WARP, 4, 2)
                for ni in range(o_layout.nt):
                    mma_m16n8k16(a_frag, b_frag[ni], acc[:, mi * o_layout.nt + ni])
        for lane, index, (r, c) in held_elements(o_layout, warp):
            O[r, c] = acc[lane].reshape(-1)[index]
    np.testing.assert_array_equal(O, P @ V)


@pytest.mark.parametrize("m,n,warps", [(64, 64, 4), (128, 32, 4), (32, 64, 2)])
def test_row_reduction_over_quads_gives_every_lane_its_rows(m, n, warps):
    """A row vector element (mi, h) of a thread is row warp x wm + 16 mi + lane / 4 + 8 h;
    reducing the thread's own columns of those rows, then across lanes l ^ 1 and l ^ 2
    (the xor shuffles), gives each lane the row's maximum."""
    from tilelang.cuda.transform.row_families import RowVector

    layout = MMALayout(m, n, warps, 1)
    S = np.random.default_rng(m * n).standard_normal((m, n))
    regs = scatter_to_threads(layout, S)
    row_vec = RowVector(None, layout)
    for warp in range(warps):
        own = np.full((WARP, row_vec.per_thread), -np.inf)
        for lane in range(WARP):
            for mi in range(layout.mt):
                for h in range(2):
                    for ni in range(layout.nt):
                        for v in range(2):
                            own[lane, RowVector.register(mi, h)] = max(own[lane, RowVector.register(mi, h)],
                                                                       regs[warp, lane, layout.c_register(mi, ni, h, v)])
        for lanes in (1, 2):
            own = np.maximum(own, own[[lane ^ lanes for lane in range(WARP)]])
        for lane in range(WARP):
            for mi in range(layout.mt):
                for h in range(2):
                    row, _ = layout.c_position(lane, warp, 0, mi, 0, h, 0)
                    assert own[lane, RowVector.register(mi, h)] == S[row].max()
