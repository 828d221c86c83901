"""CuTe DSL text for the TMA stage rings of tma_ring.py: the mbarriers, the boxes a thread
issues, and the host half (``make_tiled_tma_atom`` in the launch function, whose
descriptor reaches the kernel as a ``__grid_constant__`` argument). The smem layout given
to the atom is the one the kernel allocates for the tile (gemm.py's GMMA layout, one
stage), so the box's swizzle is the wgmma's."""

from __future__ import annotations

from typing import Any

TMA_OP = "cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp()"


def barriers(ring: str, stages: int, arrivals: int) -> list[str]:
    """``stages`` full barriers (one arrival: the issuing thread's, plus the bytes) and
    ``stages`` empty ones (every thread arrives when its GEMM of the stage is done),
    initialized by one thread; the barrier before publishes them and keeps a previous
    ring's last waits ahead of the initialization."""
    return [
        "cute.arch.sync_threads()",
        f"{ring} = smem.allocate_array(cutlass.Int64, {2 * stages}, byte_alignment=8)",
        "if cute.arch.thread_idx()[0] == 0:",
        f"    for s_{ring} in cutlass.range_constexpr({stages}):",
        f"        cute.arch.mbarrier_init({ring} + s_{ring}, 1)",
        f"        cute.arch.mbarrier_init({ring} + {stages} + s_{ring}, {arrivals})",
        "cute.arch.mbarrier_init_fence()",
        "cute.arch.sync_threads()",
    ]


def box(site: str, atom: str, tensor: str, tile: str, stage: str, shape: tuple[int, int], index: tuple[str, str],
        barrier: str) -> list[str]:
    """The TMA boxes of one tile: the global tile ``index`` (in tiles of ``shape``) of the
    atom's tensor into stage ``stage`` of ``tile``, completing on ``barrier``."""
    return [
        f"gT_{site} = cute.local_tile({tensor}, {shape}, ({index[0]}, {index[1]}))",
        (f"tTs_{site}, tTg_{site} = cute.nvgpu.cpasync.tma_partition({atom}, 0, cute.make_layout(1), "
         f"cute.group_modes({tile}[None, None, {stage}], 0, 2), cute.group_modes(gT_{site}, 0, 2))"),
        f"cute.copy({atom}, tTg_{site}, tTs_{site}, tma_bar_ptr={barrier})",
    ]


def host_atom(atom: str, tensor: str, pointer: str, view: tuple[tuple[int, int], tuple[int, int]],
              smem_layout: str, shape: tuple[int, int]) -> list[str]:
    """The launch function's TMA atom and coordinate tensor for one (tensor, tile) pair:
    the global tensor seen in the tile's (M or N, K) coordinates."""
    dims, stride = view
    return [
        f"{atom}_view = cute.make_tensor({pointer}, cute.make_layout({dims}, stride={stride}))",
        (f"{atom}, {tensor} = cute.nvgpu.cpasync.make_tiled_tma_atom({TMA_OP}, {atom}_view, "
         f"cute.slice_({smem_layout}, (None, None, 0)), {shape})"),
    ]


def tile_shape(tile: dict[str, Any]) -> tuple[int, int]:
    """A wgmma tile's (M or N, K) extent."""
    m, n, k = tile["mnk"]
    return (m if tile["role"] == "a" else n, k)


def global_view(tile: dict[str, Any], height: int, ld: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """A row-major (height, ld) tensor in the tile's (M or N, K) coordinates."""
    if tile["k_major"]:
        return (height, ld), (ld, 1)
    return (ld, height), (1, ld)
