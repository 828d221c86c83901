"""Stand-ins for the TMA stage ring's CuTe pieces (cute_emulator.py's extension, for
tilelang.cutedsl.tma_ring): mbarriers with real phases, and TMA boxes that land at once.

An mbarrier counts arrivals and transaction bytes the way PTX defines it (ISA, "mbarrier"):
a phase completes when every expected arrival came and the expected bytes arrived, and
``mbarrier_wait(bar, parity)`` returns once the phase of that parity has completed (the
barrier's completed-phase count has the other parity). The block's Python threads really
wait on it, so a wrong parity, a stage released too early or never, or a box on the wrong
barrier shows up as a wrong result or a deadlock (reported after a timeout), not as luck.
A TMA atom is the global tensor seen in the tile's coordinates; ``local_tile`` picks the
tile, and the copy (by lane 0 of the warp that reaches it, as ``elect.sync`` picks one) moves
it into the stage, then completes its bytes on the barrier.
wgmma runs at once (its groups are no-ops), so the emulator cannot see a stage released
while a wgmma still reads it: the ring's wait_group(1) before each release is pinned by
the source tests instead."""

from __future__ import annotations

import threading
from typing import Any

import cute_mma_emulator
import numpy as np

TIMEOUT = 20.0  # seconds a thread waits on one phase before the ring is declared deadlocked


class MBarrier:
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.count = self.pending = self.tx = self.phase = 0

    def init(self, count: int) -> None:
        with self.cond:
            self.count = self.pending = int(count)
            self.tx = self.phase = 0

    def _settle(self) -> None:
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.count
            self.cond.notify_all()

    def arrive(self, tx: int = 0) -> None:
        with self.cond:
            if self.pending <= 0:
                raise AssertionError("an arrival on an mbarrier whose phase expects no more")
            self.tx += int(tx)
            self.pending -= 1
            self._settle()

    def complete_tx(self, nbytes: int) -> None:
        with self.cond:
            self.tx -= int(nbytes)
            if self.tx < 0:
                raise AssertionError(f"a TMA box completed {nbytes} bytes the barrier did not expect")
            self._settle()

    def wait(self, parity: Any) -> None:
        with self.cond:
            if not self.cond.wait_for(lambda: self.phase % 2 != int(parity) % 2, TIMEOUT):
                raise AssertionError(f"mbarrier wait for parity {int(parity)} never returned "
                                     f"(phase {self.phase}, {self.pending} arrivals and {self.tx} bytes missing)")


class BarrierPointer:
    def __init__(self, barriers: list[MBarrier], index: int = 0) -> None:
        self.barriers, self.index = barriers, index

    def __add__(self, k: Any) -> BarrierPointer:
        return BarrierPointer(self.barriers, self.index + int(k))

    def get(self) -> MBarrier:
        return self.barriers[self.index]


def allocate_array(block: dict[str, Any], key: int, num: int) -> BarrierPointer:
    """The block's ``key``-th shared allocation, as mbarriers (one list per block)."""
    while len(block["smem"]) <= key:
        block["smem"].append([MBarrier() for _ in range(int(num))])
    return BarrierPointer(block["smem"][key])


class Atom:
    """A TMA atom: the box shape; its global tensor travels beside it."""

    def __init__(self, shape: tuple[int, int]) -> None:
        self.shape = shape


def make_tiled_tma_atom(op: Any, view: Any, smem_layout: Any, shape: tuple[int, int]) -> tuple[Atom, Any]:
    return Atom(shape), view


def local_tile(tensor: Any, shape: tuple[int, int], index: tuple[Any, Any]) -> Any:
    layout = tensor.layout
    offset = tensor.offset + sum(int(i) * s * st for i, s, st in zip(index, shape, layout.stride))
    return cute_mma_emulator.View(tensor.data, offset, cute_mma_emulator.Layout2(shape, layout.stride))


def _tid() -> int:
    from cute_emulator import _STATE

    return int(_STATE.tidx[0])


def copy(atom: Any, src: Any, dst: Any, tma_bar_ptr: Any = None) -> None:
    """A TMA copy is issued by the lane ``elect.sync`` picks of the warp that reaches it (CuTe
    DSL's lowering): here lane 0, so a copy reached by one lane alone other than 0 is lost."""
    if tma_bar_ptr is None:
        return cute_mma_emulator._copy(atom, src, dst)
    if _tid() % 32:
        return None
    if src.shape != dst.shape:
        raise AssertionError(f"a TMA box of {src.shape} into a {dst.shape} stage")
    for r in range(src.shape[0]):
        for c in range(src.shape[1]):
            dst[r, c] = src[r, c]
    tma_bar_ptr.get().complete_tx(src.shape[0] * src.shape[1] * np.dtype(src.data.dtype).itemsize)
    return None


def extend(cute: Any) -> None:
    """Adds the TMA ring's names to cute_emulator's ``cute`` namespace."""
    cpasync = cute.nvgpu.cpasync
    cpasync.CopyBulkTensorTileG2SOp = lambda *a, **k: None
    cpasync.make_tiled_tma_atom = make_tiled_tma_atom
    cpasync.tma_partition = lambda atom, coord, layout, smem, gmem: (smem, gmem)
    vars(cute).update(CopyAtom=Atom, slice_=lambda layout, coord: layout, local_tile=local_tile,
                      group_modes=lambda t, begin, end: t, copy=copy)


ARCH = {
    "mbarrier_init": lambda ptr, count: ptr.get().init(count),
    "mbarrier_init_fence": lambda: None,
    "mbarrier_arrive_and_expect_tx": lambda ptr, nbytes: ptr.get().arrive(nbytes),
    "mbarrier_arrive": lambda ptr: ptr.get().arrive(),
    "mbarrier_wait": lambda ptr, parity: ptr.get().wait(parity),
    "warp_idx": lambda: _tid() // 32, "lane_idx": lambda: _tid() % 32, "make_warp_uniform": lambda x: x,
}
