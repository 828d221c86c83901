"""The mma.sync m16n8k16 register layout of a block's accumulator tile, and the row
padding that keeps ldmatrix bank-conflict free. Pure index math: every formula takes IR
expressions or Python ints (``//`` and ``%`` are floordiv and floormod on both), so the
lowering builds its IR from them and tests check them against the PTX ISA in numpy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

WARP = 32


def cells_as_elements(cells: Any, elem_bytes: int) -> Any:
    """A k offset in ldmatrix's 16-bit cells (a multiple of 8) as a count of elements of
    ``elem_bytes`` (1, 2 or 4)."""
    return cells * (2 // elem_bytes) if elem_bytes <= 2 else cells // (elem_bytes // 2)


CHUNK_BYTES = 16  # one ldmatrix row, one cp.async vector


@dataclass(frozen=True)
class MMALayout:
    """An M x N float32 accumulator spread over warps_m x warps_n warps."""

    m: int
    n: int
    warps_m: int
    warps_n: int

    @property
    def wm(self) -> int:
        return self.m // self.warps_m

    @property
    def wn(self) -> int:
        return self.n // self.warps_n

    @property
    def mt(self) -> int:  # 16-row pieces per warp
        return self.wm // 16

    @property
    def nt(self) -> int:  # 8-column pieces per warp
        return self.wn // 8

    @property
    def per_thread(self) -> int:
        return self.mt * self.nt * 4

    @property
    def column_splits(self) -> int:  # warps side by side over one row
        return self.warps_n

    def warp_coords(self, warp: Any) -> tuple[Any, Any]:
        return warp // self.warps_n, warp % self.warps_n

    def a_address(self, lane: Any, warp_m: Any, mi: Any, kk: Any, trans_a: bool,
                  elem_bytes: int = 2) -> tuple[Any, Any]:
        """(row, col) in A's shared tile of the row this lane gives ldmatrix.x4 for the
        A fragment of piece ``mi``, k step ``kk``. Matrix q = lane // 8 covers rows
        m0 + 8 (q % 2) and k columns 8 (q // 2) of the 16x16 operand; ``.trans`` when A
        is stored [k][m]. ``elem_bytes`` other than 2 (K-major tiles only): the m16n8k32
        fragments of 8-bit types hold two bytes of K, and the m16n8k8 TF32 ones half a
        word, where the 16-bit ones hold a half."""
        m0 = warp_m * self.wm + mi * 16 + (lane // 8) % 2 * 8
        k0 = cells_as_elements(kk * 16 + lane // 16 * 8, elem_bytes)
        return (k0 + lane % 8, m0) if trans_a else (m0 + lane % 8, k0)

    def b_address(self, lane: Any, warp_n: Any, nj: Any, kk: Any, trans_b: bool,
                  elem_bytes: int = 2) -> tuple[Any, Any]:
        """(row, col) in B's shared tile for ldmatrix.x4 of two 8-column pieces (2 nj,
        2 nj + 1): matrix q covers n columns 8 (q // 2) and k rows 8 (q % 2); ``.trans``
        when B is stored [k][n] (mma wants B column-major). ``elem_bytes`` as for A."""
        n0 = warp_n * self.wn + nj * 16 + lane // 16 * 8
        k0 = cells_as_elements(kk * 16 + (lane // 8) % 2 * 8, elem_bytes)
        return (n0 + lane % 8, k0) if trans_b else (k0 + lane % 8, n0)

    def c_position(self, lane: Any, warp_m: Any, warp_n: Any, mi: Any, ni: Any, h: Any, v: Any) -> tuple[Any, Any]:
        """(row, col) of C held in accumulator register 2h + v of piece (mi, ni)."""
        return (warp_m * self.wm + mi * 16 + lane // 4 + h * 8,
                warp_n * self.wn + ni * 8 + lane % 4 * 2 + v)

    def c_register(self, mi: Any, ni: Any, h: Any, v: Any) -> Any:
        """Index of that element in the thread's accumulator array."""
        return ((mi * self.nt + ni) * 2 + h) * 2 + v


@dataclass
class Accumulator:
    """A fragment kept in a tensor-core layout (the tensor-core pass's state): ``regs`` is
    the per-thread register array that replaces it."""

    old: Any
    layout: MMALayout | WGMMALayout
    regs: Any = None


def choose_layout(m: int, n: int, warps: int) -> MMALayout | None:
    """The squarest warp grid whose warp tiles are multiples of 16 x 16 (B fragments are
    loaded 16 columns at a time), or None."""
    best = None
    for warps_m in range(1, warps + 1):
        if warps % warps_m:
            continue
        warps_n = warps // warps_m
        if m % warps_m or n % warps_n or (m // warps_m) % 16 or (n // warps_n) % 16:
            continue
        layout = MMALayout(m, n, warps_m, warps_n)
        key = (abs(layout.wm - layout.wn), -layout.wm)
        if best is None or key < best[0]:
            best = (key, layout)
    return None if best is None else best[1]


def padded_row(cols: int, dtype_bytes: int) -> int:
    """Row length (elements) that puts 8 consecutive rows' 16-byte chunks in distinct
    banks: the row's chunk count must be odd."""
    chunk = CHUNK_BYTES // dtype_bytes
    if cols % chunk:
        return cols
    return cols if (cols // chunk) % 2 else cols + chunk


WARPGROUP = 4  # warps that issue one wgmma together (sm_90)
WGMMA_M = 64  # rows of one wgmma.m64nNk16
WGMMA_MAX_N = 256


@dataclass(frozen=True)
class WGMMALayout:
    """An M x N float32 accumulator spread over groups_m x groups_n warpgroups, in the
    wgmma.m64nNk16 accumulator layout (PTX ISA, "Register Fragments and Shared Memory
    Matrix Layouts", wgmma D): warp w of a warpgroup holds rows 16 w .. 16 w + 15 of
    every 64-row piece; within them a lane holds what mma.m16n8 would (rows l/4 and
    l/4 + 8, columns 2(l%4) and 2(l%4)+1 of every 8 columns). Register order
    ``((mi * nt + ni) * 2 + h) * 2 + v`` is the order wgmma numbers them, piece by piece.

    Same interface as MMALayout: ``warp_coords`` gives (4 x warpgroup row + warp in the
    warpgroup, warpgroup column)."""

    m: int
    n: int
    groups_m: int
    groups_n: int

    @property
    def wm(self) -> int:  # rows of one warpgroup's tile
        return self.m // self.groups_m

    @property
    def wn(self) -> int:  # columns of one warpgroup's tile: the wgmma's N
        return self.n // self.groups_n

    @property
    def mt(self) -> int:  # 64-row wgmma pieces per warpgroup
        return self.wm // WGMMA_M

    @property
    def nt(self) -> int:  # 8-column groups in one wgmma
        return self.wn // 8

    @property
    def per_thread(self) -> int:
        return self.mt * self.nt * 4

    @property
    def column_splits(self) -> int:  # warpgroups side by side over one row
        return self.groups_n

    def warp_coords(self, warp: Any) -> tuple[Any, Any]:
        group = warp // WARPGROUP
        return group // self.groups_n * WARPGROUP + warp % WARPGROUP, group % self.groups_n

    def c_position(self, lane: Any, warp_m: Any, warp_n: Any, mi: Any, ni: Any, h: Any, v: Any) -> tuple[Any, Any]:
        return (warp_m // WARPGROUP * self.wm + mi * WGMMA_M + warp_m % WARPGROUP * 16 + lane // 4 + h * 8,
                warp_n * self.wn + ni * 8 + lane % 4 * 2 + v)

    def c_register(self, mi: Any, ni: Any, h: Any, v: Any) -> Any:
        return ((mi * self.nt + ni) * 2 + h) * 2 + v


def choose_wgmma_layout(m: int, n: int, warps: int) -> WGMMALayout | None:
    """Warpgroups over the tile, widest wgmma (largest N, at most 256) first, or None."""
    if warps % WARPGROUP:
        return None
    groups = warps // WARPGROUP
    best = None
    for groups_m in range(1, groups + 1):
        if groups % groups_m:
            continue
        layout = WGMMALayout(m, n, groups_m, groups // groups_m)
        if m % groups_m or n % layout.groups_n or layout.wm % WGMMA_M or layout.wn % 16 or \
                layout.wn > WGMMA_MAX_N:
            continue
        if best is None or layout.wn > best.wn:
            best = layout
    return best


@dataclass(frozen=True)
class CoreMatrixLayout:
    """A rows x cols shared tile stored as 8-row x 16-byte core matrices, wgmma's
    no-swizzle canonical layout: core matrices of one 8-row group side by side (128 bytes
    apart), groups ``cols`` x 16 bytes apart. Element (r, c) is at element offset
    ``offset(r, c)``; 16-byte vector q of the tile dealt as (row r = 8 (q // (8 x chunks
    per row)) + q % 8, chunk (q // 8) % chunks per row) lands at q x 16 bytes, so
    cp.async writes are contiguous.

    The wgmma descriptor's leading byte offset is the distance between core matrices along
    K, the stride byte offset along M/N (the same for K-major and MN-major operands in the
    no-swizzle mode; CUTLASS cute's canonical GMMA layouts): ``strides(k_along_cols)``."""

    rows: int
    cols: int
    dtype_bytes: int

    @property
    def chunk(self) -> int:
        return CHUNK_BYTES // self.dtype_bytes

    @property
    def size(self) -> int:
        return self.rows * self.cols

    def offset(self, r: Any, c: Any) -> Any:
        chunk = self.chunk
        return r // 8 * (8 * self.cols) + c // chunk * (8 * chunk) + r % 8 * chunk + c % chunk

    def vector(self, q: Any) -> tuple[Any, Any]:
        """(row, col) of the q-th 16-byte vector in storage order."""
        per_row = self.cols // self.chunk
        return q // (8 * per_row) * 8 + q % 8, q // 8 % per_row * self.chunk

    mode = 0  # no swizzle

    def start(self, r: Any, c: Any) -> Any:
        return self.offset(r, c)

    def strides(self, k_along_cols: bool) -> tuple[int, int]:
        """(leading, stride) byte offsets of a wgmma descriptor for this tile."""
        between_chunks, between_groups = 8 * CHUNK_BYTES, self.cols * 8 * self.dtype_bytes
        return (between_chunks, between_groups) if k_along_cols else (between_groups, between_chunks)

    @staticmethod
    def fits(rows: int, cols: int, dtype_bytes: int) -> bool:
        return rows % 8 == 0 and cols % (CHUNK_BYTES // dtype_bytes) == 0


SWIZZLE_MODES = {128: 1, 64: 2, 32: 3}  # descriptor bits 62-63 per swizzle width (bytes)


@dataclass(frozen=True)
class SwizzledLayout:
    """A rows x cols shared tile in wgmma's swizzled canonical layout: the tile is cut into
    column blocks ``width`` bytes wide (32, 64 or 128), each stored as ``rows`` lines of
    ``width`` bytes; within every 8 x width atom, the 16-byte chunk index of line r is
    XORed with r's bits (CUTLASS cute's Swizzle<B, 4, 3> on byte addresses: bits 4.. of
    the address ^= bits 7..). The same storage serves K-major operands (cols = K: a 16-deep
    k step lies inside one line) and MN-major ones (rows = K). The swizzle is applied by
    the hardware to absolute shared addresses, so every stage must start on an 8 x width
    boundary (``align``).

    Descriptor strides: K-major — stride byte offset 8 x width (8-row groups), leading
    unused inside an atom (set to the block stride); MN-major — leading byte offset the
    stride between column blocks, stride byte offset 8 x width (8-row groups of K)."""

    rows: int
    cols: int
    dtype_bytes: int
    width: int

    @property
    def size(self) -> int:
        return self.rows * self.cols

    @property
    def align(self) -> int:
        return 8 * self.width

    def _bytes(self, r: Any, c: Any) -> Any:
        per_line = self.width // self.dtype_bytes
        return c // per_line * (self.rows * self.width) + r * self.width + c % per_line * self.dtype_bytes

    def start(self, r: Any, c: Any) -> Any:
        """Element offset of (r, c) before the swizzle: what a descriptor's start holds."""
        return self._bytes(r, c) // self.dtype_bytes

    def offset(self, r: Any, c: Any) -> Any:
        """Element offset where (r, c) is stored: the chunk index XOR the line's bits."""
        per_line = self.width // self.dtype_bytes
        chunk_elems = CHUNK_BYTES // self.dtype_bytes
        chunks = self.width // CHUNK_BYTES
        line = c // per_line * self.rows + r  # lines are `width` bytes: 8 // (128 // width) per 128 bytes
        bits = line * self.width // 128 % chunks
        chunk = (c % per_line) // chunk_elems
        return line * per_line + _xor(chunk, bits, chunks) * chunk_elems + c % chunk_elems

    def vector(self, q: Any) -> tuple[Any, Any]:
        """(row, col) of the q-th 16-byte vector in storage order (lines, then blocks)."""
        chunks = self.width // CHUNK_BYTES
        per_line = self.width // self.dtype_bytes
        block = q // (self.rows * chunks)
        return q // chunks % self.rows, block * per_line + q % chunks * (CHUNK_BYTES // self.dtype_bytes)

    def strides(self, k_along_cols: bool) -> tuple[int, int]:
        block = self.rows * self.width
        return (block, 8 * self.width)

    @property
    def mode(self) -> int:
        return SWIZZLE_MODES[self.width]

    @staticmethod
    def choose(rows: int, cols: int, dtype_bytes: int, mn_width: int | None = None) -> SwizzledLayout | None:
        """The widest swizzle whose lines a row fills (and, for an MN-major operand, that
        each wgmma's ``mn_width`` columns start on a line), or None."""
        if rows % 8:
            return None
        for width in (128, 64, 32):
            if (cols * dtype_bytes) % width:
                continue
            if mn_width is not None and (mn_width * dtype_bytes) % width:
                continue
            return SwizzledLayout(rows, cols, dtype_bytes, width)
        return None


def _xor(a: Any, b: Any, bound: int) -> Any:
    """a ^ b for 0 <= a, b < bound (a power of two), on ints or IR (TIR has bitwise_xor)."""
    if isinstance(a, int) and isinstance(b, int):
        return a ^ b
    from tvm import tirx

    return tirx.bitwise_xor(a, b)
