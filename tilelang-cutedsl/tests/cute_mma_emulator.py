"""Stand-ins for the CuTe pieces of the warp-level MMA path (cute_emulator.py's extension):
2-D tensor views through layouts and swizzles, tiled copies, tiled MMAs, ``cute.gemm``.

They model what the generated code must get right — each view's shape, strides, swizzle and
offset (the operands' orientation, the stage a ring reads), and that every k block a GEMM
uses was copied into its fragment first — not how CuTe deals elements to threads: a
partition gives thread ``t`` the elements ``t, t + T, t + 2T, ...`` of the tile in row-major
order (T threads), the same for every partition of the same shape, so the generated code is
correct here exactly when it is consistent. Copies land at once (cp.async groups and
proxy fences are no-ops: the stage ring's schedule is checked in test_cutedsl_stages.py). For
the warpgroup (sm_90) path, a GMMA-layout tile is stored stage by stage in row-major order
of CuTe's (M or N, K) coordinates — any layout does, as long as the copies and the MMA
agree on the coordinates — and the MMA reads it directly (no fragments to load)."""

from __future__ import annotations

import types
from typing import Any

import numpy as np


class View:
    """A 2-D tensor: ``data[offset + swizzle(r * s0 + c * s1)]``."""

    def __init__(self, data: np.ndarray, offset: int, layout: Layout2) -> None:
        self.data, self.offset, self.layout = data, offset, layout
        self.shape = layout.shape

    def _at(self, index: Any) -> int:
        r, c = (int(i) for i in index)
        if not (0 <= r < self.shape[0] and 0 <= c < self.shape[1]):
            raise IndexError(f"({r}, {c}) outside a {self.shape} view")
        off = r * self.layout.stride[0] + c * self.layout.stride[1]
        return self.offset + (self.layout.swizzle(off) if self.layout.swizzle else off)

    def __getitem__(self, index: Any) -> Any:
        return self.data[self._at(index)]

    def __setitem__(self, index: Any, value: Any) -> None:
        self.data[self._at(index)] = value

    def block(self, kb: int) -> np.ndarray:
        """Columns kb*16 .. kb*16+15 (a k block of an (M or N, K) operand view)."""
        rows, cols = np.meshgrid(np.arange(self.shape[0]), kb * 16 + np.arange(16), indexing="ij")
        if cols.max() >= self.shape[1]:
            raise IndexError(f"k block {kb} outside a {self.shape} view")
        off = rows * self.layout.stride[0] + cols * self.layout.stride[1]
        return self.data[self.offset + (self.layout.swizzle(off) if self.layout.swizzle else off)].astype(np.float32)


class Layout2:
    def __init__(self, shape: tuple[int, int], stride: tuple[int, int], swizzle: Any = None) -> None:
        self.shape, self.stride, self.swizzle = shape, stride, swizzle


class Identity:
    def __init__(self, shape: tuple[int, int]) -> None:
        self.shape = shape

    def __getitem__(self, index: Any) -> tuple[int, int]:
        return tuple(int(i) for i in index)


def _threads() -> int:
    from cute_emulator import _STATE

    return _STATE.threads


def _tid() -> int:
    from cute_emulator import _STATE

    return _STATE.tidx[0]


class Partition:
    """Thread t's elements of a 2-D tile: element e is row-major index t + e * T."""

    def __init__(self, tile: Any, tid: int) -> None:
        self.tile, self.tid = tile, tid
        self.size = tile.shape[0] * tile.shape[1] // _threads()

    def _coord(self, e: Any) -> tuple[int, int]:
        linear = self.tid + int(e) * _threads()
        return linear // self.tile.shape[1], linear % self.tile.shape[1]

    def __getitem__(self, e: Any) -> Any:
        return self.tile[self._coord(e)]

    def __setitem__(self, e: Any, value: Any) -> None:
        self.tile[self._coord(e)] = value


class Fragment:
    """An A or B operand fragment: the k blocks copied into it so far."""

    def __init__(self, view: View) -> None:
        self.view = view
        self.loaded: dict[int, np.ndarray] = {}

    def __getitem__(self, index: Any) -> tuple[Fragment, int]:
        return self, int(index[2])


class Source:
    def __init__(self, view: View) -> None:
        self.view = view

    def __getitem__(self, index: Any) -> tuple[View, int]:
        return self.view, int(index[2])


class ThrMma:
    def __init__(self, mma: Any, tid: Any) -> None:
        self.mma, self.tid = mma, int(tid)

    def partition_A(self, view: View) -> View:
        return view

    partition_B = partition_A

    def partition_C(self, tile: Any) -> Partition:
        return Partition(tile, self.tid)


class StagedLayout:
    """sm90_utils.make_smem_layout_a/b: (M or N, K, stages)."""

    def __init__(self, rows: int, k: int, stages: int) -> None:
        self.rows, self.k, self.stages = rows, k, stages
        self.size = rows * k * stages
        self.outer, self.inner = self, None


class StagedTensor:
    def __init__(self, data: np.ndarray, layout: StagedLayout) -> None:
        self.data, self.layout = data, layout

    def __getitem__(self, index: Any) -> View:
        stage = int(index[2])
        size = self.layout.rows * self.layout.k
        return View(self.data, stage * size, Layout2((self.layout.rows, self.layout.k), (self.layout.k, 1)))


class Descriptors:
    """A wgmma operand: the staged tile itself, indexed [None, None, k block, stage]."""

    def __init__(self, tile: StagedTensor) -> None:
        self.tile = tile

    def __getitem__(self, index: Any) -> tuple[str, View, int]:
        return "smem", self.tile[None, None, index[3]], int(index[2])


class TiledMma:
    def set(self, field: Any, value: Any) -> None:
        pass

    def get_slice(self, tid: Any) -> ThrMma:
        return ThrMma(self, tid)

    def partition_shape_C(self, shape: tuple[int, int]) -> tuple[int, int]:
        return shape

    def make_fragment_C(self, shape: tuple[int, int]) -> Any:
        from cute_emulator import _Layout, _Tensor

        size = shape[0] * shape[1] // _threads()
        return _Tensor(np.zeros(size, np.float32), _Layout(size))

    def make_fragment_A(self, view: Any) -> Any:
        return Descriptors(view) if isinstance(view, StagedTensor) else Fragment(view)

    make_fragment_B = make_fragment_A


class TiledCopy:
    def get_slice(self, tid: Any) -> TiledCopy:
        return self

    def partition_S(self, view: View) -> Source:
        return Source(view)

    def partition_D(self, view: View) -> View:
        return view

    def retile(self, fragment: Fragment) -> Fragment:
        return fragment


def _copy(atom: Any, src: Any, dst: Any) -> None:
    if isinstance(src, Source):  # a tiled global -> shared copy: thread t moves t, t + T, ...
        tile, rows, cols = dst, dst.shape[0], dst.shape[1]
        for linear in range(_tid(), rows * cols, _threads()):
            tile[linear // cols, linear % cols] = src.view[linear // cols, linear % cols]
        return
    (view, kb), (fragment, kb2) = src, dst  # ldmatrix: one k block into a fragment
    assert kb == kb2, f"k block {kb} copied into the fragment's block {kb2}"
    fragment.loaded[kb] = view.block(kb)


def _operand(x: Any) -> np.ndarray:
    if x[0] == "smem":  # wgmma: straight from the tile
        return x[1].block(x[2])
    fragment, kb = x
    if kb not in fragment.loaded:
        raise AssertionError(f"cute.gemm reads k block {kb} of a fragment that was never copied into")
    return fragment.loaded[kb]


def _gemm(mma: Any, d: Any, a: Any, b: Any, c: Any) -> None:
    product = _operand(a) @ _operand(b).T  # (M, 16) x (N, 16)^T
    tid, threads, cols = _tid(), _threads(), product.shape[1]
    for e in range(len(d.data)):
        linear = tid + e * threads
        d[e] = c[e] + product[linear // cols, linear % cols]


def make_layout(shape: Any, stride: Any = None) -> Any:
    from cute_emulator import _Layout

    if isinstance(shape, tuple):
        return Layout2(shape, stride if stride is not None else (shape[1], 1))
    return _Layout(int(shape))


def make_composed_layout(swizzle: Any, offset: int, layout: Any) -> Any:
    from cute_emulator import _Layout

    if isinstance(layout, Layout2):
        return Layout2(layout.shape, layout.stride, swizzle)
    return _Layout(layout.size, swizzle)


def make_tensor(data: Any, layout: Any) -> Any:
    from cute_emulator import _Iter, _make_tensor

    if isinstance(layout, Layout2):
        it = data if isinstance(data, _Iter) else _Iter(data)
        return View(it.data, it.offset, layout)
    return _make_tensor(data, layout)


def namespace() -> dict[str, Any]:
    """The names cute_emulator's ``cute`` gains."""
    nvgpu = types.SimpleNamespace(
        warp=types.SimpleNamespace(MmaF16BF16Op=lambda *a, **k: None, LdMatrix8x8x16bOp=lambda *a, **k: None),
        cpasync=types.SimpleNamespace(CopyG2SOp=lambda *a, **k: None),
        LoadCacheMode=types.SimpleNamespace(GLOBAL=None), warpgroup=WARPGROUP,
        OperandMajorMode=types.SimpleNamespace(K="K", MN="MN"),
    )
    return {
        "nvgpu": nvgpu, "make_layout": make_layout, "make_composed_layout": make_composed_layout,
        "make_tensor": make_tensor, "make_identity_tensor": Identity,
        "make_tiled_mma": lambda *a, **k: TiledMma(), "make_copy_atom": lambda *a, **k: None,
        "make_tiled_copy_A": lambda *a: TiledCopy(), "make_tiled_copy_B": lambda *a: TiledCopy(),
        "make_tiled_copy_tv": lambda *a: TiledCopy(), "copy": _copy, "gemm": _gemm,
        "size": lambda t: t.size if isinstance(t, Partition) else len(t.data),
    }


def _smem_layout(role: str) -> Any:
    def make(layout: Any, mnk: tuple[int, int, int], dtype: Any, stages: int) -> StagedLayout:
        return StagedLayout(mnk[0] if role == "a" else mnk[1], mnk[2], stages)

    return make


MODULES = {
    "sm90_utils": types.SimpleNamespace(make_trivial_tiled_mma=lambda *a, **k: TiledMma(),
                                        make_smem_layout_a=_smem_layout("a"), make_smem_layout_b=_smem_layout("b")),
    "utils": types.SimpleNamespace(LayoutEnum=types.SimpleNamespace(ROW_MAJOR="K", COL_MAJOR="MN")),
}
WARPGROUP = types.SimpleNamespace(fence=lambda: None, commit_group=lambda: None, wait_group=lambda n: None,
                                  Field=types.SimpleNamespace(ACCUMULATE=None))
ARCH = {"cp_async_commit_group": lambda: None, "cp_async_wait_group": lambda n: None,
        "fence_proxy": lambda *a, **k: None}
