"""The mma.sync m16n8k16 register layout of a block's accumulator tile, and the row
padding that keeps ldmatrix bank-conflict free. Pure index math: every formula takes IR
expressions or Python ints (``//`` and ``%`` are floordiv and floormod on both), so the
lowering builds its IR from them and tests check them against the PTX ISA in numpy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

WARP = 32
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

    def warp_coords(self, warp: Any) -> tuple[Any, Any]:
        return warp // self.warps_n, warp % self.warps_n

    def a_address(self, lane: Any, warp_m: Any, mi: Any, kk: Any, trans_a: bool) -> tuple[Any, Any]:
        """(row, col) in A's shared tile of the row this lane gives ldmatrix.x4 for the
        A fragment of piece ``mi``, k step ``kk``. Matrix q = lane // 8 covers rows
        m0 + 8 (q % 2) and k columns 8 (q // 2) of the 16x16 operand; ``.trans`` when A
        is stored [k][m]."""
        m0 = warp_m * self.wm + mi * 16 + (lane // 8) % 2 * 8
        k0 = kk * 16 + lane // 16 * 8
        return (k0 + lane % 8, m0) if trans_a else (m0 + lane % 8, k0)

    def b_address(self, lane: Any, warp_n: Any, nj: Any, kk: Any, trans_b: bool) -> tuple[Any, Any]:
        """(row, col) in B's shared tile for ldmatrix.x4 of two 8-column pieces (2 nj,
        2 nj + 1): matrix q covers n columns 8 (q // 2) and k rows 8 (q % 2); ``.trans``
        when B is stored [k][n] (mma wants B column-major)."""
        n0 = warp_n * self.wn + nj * 16 + lane // 16 * 8
        k0 = kk * 16 + (lane // 8) % 2 * 8
        return (n0 + lane % 8, k0) if trans_b else (k0 + lane % 8, n0)

    def c_position(self, lane: Any, warp_m: Any, warp_n: Any, mi: Any, ni: Any, h: Any, v: Any) -> tuple[Any, Any]:
        """(row, col) of C held in accumulator register 2h + v of piece (mi, ni)."""
        return (warp_m * self.wm + mi * 16 + lane // 4 + h * 8,
                warp_n * self.wn + ni * 8 + lane % 4 * 2 + v)

    def c_register(self, mi: Any, ni: Any, h: Any, v: Any) -> Any:
        """Index of that element in the thread's accumulator array."""
        return ((mi * self.nt + ni) * 2 + h) * 2 + v


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
