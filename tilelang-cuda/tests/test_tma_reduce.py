"""T.atomic_add(global tile, shared tile, use_tma=True) as TMA bulk reductions on sm_90
(transform/tma_reduce.py): the source the backend prints, the cases that keep element
atomics, nvcc, and the sums on the GPU (marked gpu) against torch."""

from __future__ import annotations

import re

import pytest
import tilelang
import tilelang.language as T
from tilelang.cuda import toolchain

SM80 = {"kind": "cuda", "arch": "sm_80"}
SM90 = {"kind": "cuda", "arch": "sm_90"}
HAS_NVCC = toolchain.nvcc_path() is not None


def tile_add(dtype: str = "float32", use_tma: bool = True, order: str | None = None, part: bool = False,
             threads_if: bool = False, blocks: int = 4, rows: int = 32, cols: int = 64, repeat: int = 1):
    """Every block adds its ``rows`` x ``cols`` tile of A (the block's rows, shifted by one
    block each repeat, so blocks add into each other's rows) to C."""
    kwargs = {"memory_order": order} if order else {}

    @T.prim_func
    def main(A: T.Tensor((blocks * rows, cols), dtype), C: T.Tensor((blocks * rows, cols), dtype)):
        with T.Kernel(blocks, threads=128) as bx:
            tile = T.alloc_shared((rows * 2 if part else rows, cols), dtype)
            T.copy(A[bx * rows, 0], tile[0:rows, :] if part else tile)
            for r in T.serial(repeat):
                dst = C[((bx + r) % blocks) * rows:((bx + r) % blocks) * rows + rows, :]
                if threads_if:
                    if T.get_thread_binding() < 64:
                        T.atomic_add(dst, tile, use_tma=use_tma, **kwargs)
                else:
                    T.atomic_add(dst, tile[0:rows, :] if part else tile, use_tma=use_tma, **kwargs)

    return main


def body(source: str) -> str:
    return source[source.index('extern "C" __global__'):]


def test_a_shared_tile_is_added_by_one_bulk_reduction_from_sm90():
    artifact = tilelang.lower(tile_add(), target=SM90)
    source = body(artifact.device_source)
    assert "const __grid_constant__ CUtensorMap C_reduce_map" in source
    calls = re.findall(r"tl_tma_store_add_2d\(\(&\(\w+\[0\]\)\), \(\(unsigned long long\)\(&\(C_reduce_map\)\)\), "
                       r"0, \(\(\(int\)blockIdx.x\) \* 32\)\);", source)
    assert len(calls) == 1, source
    # issued by one thread between two barriers, after the writers' proxy fence; the
    # element atomics stay for a tile that is not 128-byte aligned
    fence, check, issue = (source.index(s) for s in ("tl_fence_proxy_async();", "tl_tma_smem_aligned(",
                                                      "tl_tma_store_add_2d("))
    assert fence < check < issue and "if ((tl_thread_x() == 0))" in source[check:issue]
    assert "tl_tma_store_commit_and_wait_read();" in source[issue:]
    assert source.count("atomicAdd(") == 1 and source.index("} else {") > issue


@pytest.mark.parametrize("case", ["sm_80", "float64", "memory order", "part of a tile", "some threads",
                                  "tl.disable_tma_lower"])
def test_element_atomics_where_boxes_cannot_add(case):
    """Below sm_90, an element type cp.reduce.async.bulk lacks, an ordered add, a tile that
    is part of its shared buffer (not its row-major whole), and an add only some threads
    reach (a block barrier would hang): the element atomics, exactly as without use_tma."""
    args = {"sm_80": {}, "float64": {"dtype": "float64"}, "memory order": {"order": "release"},
            "part of a tile": {"part": True}, "some threads": {"threads_if": True}, "tl.disable_tma_lower": {}}[case]
    target = SM80 if case == "sm_80" else SM90
    configs = {"tl.disable_tma_lower": True} if case == "tl.disable_tma_lower" else None
    with_tma = tilelang.lower(tile_add(**args), target=target, pass_configs=configs).device_source
    without = tilelang.lower(tile_add(**{**args, "use_tma": False}), target=target).device_source
    assert "tl_tma_store_add" not in body(with_tma) and "atomicAdd" in body(with_tma)
    assert body(with_tma) == body(without)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32", "uint32", "uint64"])
def test_every_element_type_of_the_instruction_is_served(dtype):
    assert "tl_tma_store_add_2d(" in body(tilelang.lower(tile_add(dtype), target=SM90).device_source)


@pytest.mark.skipif(not HAS_NVCC, reason="nvcc is not installed")
def test_nvcc_compiles_the_bulk_reductions():
    source = tilelang.lower(tile_add("bfloat16", repeat=2), target=SM90).device_source
    assert toolchain._compile_nvcc(source, "sm_90a", "tma_reduce")[:4] == b"\x7fELF"


def four_d_add(rows: int = 64, dim: int = 192):
    """upstream's flash-attention backward: dQ[b, rows, h, :] += a shared tile, per head."""
    @T.prim_func
    def main(X: T.Tensor((2, 128, 4, dim), "float32"), Y: T.Tensor((2, 128, 4, dim), "float32")):
        with T.Kernel(4, 128 // rows, 2, threads=128) as (bx, by, bz):
            tile = T.alloc_shared((rows, dim), "float32")
            T.copy(X[bz, by * rows:(by + 1) * rows, bx, :], tile)
            for h in T.serial(4):  # every head's rows get every block's tile of its column
                T.atomic_add(Y[bz, by * rows:(by + 1) * rows, h, :], tile, use_tma=True)

    return main


def test_a_slice_of_a_4d_tensor_is_one_box():
    source = body(tilelang.lower(four_d_add(), target=SM90).device_source)
    assert re.search(r"tl_tma_store_add_4d\(.*Y_reduce_map\)\)\), 0, \w+, \(\(\(int\)blockIdx.y\) \* 64\), "
                     r"\(\(int\)blockIdx.z\)\);", source), source


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32"])
def test_bulk_reductions_sum_every_blocks_tiles_on_the_gpu(dtype):
    torch = pytest.importorskip("torch")
    blocks, rows, cols, repeat = 8, 32, 64, 5
    kernel = tilelang.compile(tile_add(dtype, blocks=blocks, repeat=repeat), target="cuda")
    assert "tl_tma_store_add_2d(" in kernel.get_kernel_source()
    g = torch.Generator().manual_seed(0)
    if dtype == "int32":
        a = torch.randint(-100, 100, (blocks * rows, cols), generator=g, dtype=torch.int32)
    else:  # small integers: every sum exact in the type, whatever the order of the adds
        a = torch.randint(-4, 5, (blocks * rows, cols), generator=g).to(getattr(torch, dtype))
    c = torch.zeros_like(a)
    a, c = a.cuda(), c.cuda()
    kernel(a, c)
    tiles = a.view(blocks, rows, cols).double()
    expected = sum(torch.roll(tiles, r, dims=0) for r in range(repeat)).view(blocks * rows, cols)
    torch.testing.assert_close(c.double(), expected, rtol=0, atol=0)


@pytest.mark.gpu
def test_bulk_reductions_into_a_4d_tensor_on_the_gpu():
    torch = pytest.importorskip("torch")
    kernel = tilelang.compile(four_d_add(), target="cuda")
    x = torch.randint(-4, 5, (2, 128, 4, 192), generator=torch.Generator().manual_seed(1)).float().cuda()
    y = torch.zeros_like(x)
    kernel(x, y)
    torch.testing.assert_close(y, x.sum(dim=2, keepdim=True).expand_as(x), rtol=0, atol=0)


def test_the_host_encodes_one_tensor_map_per_destination():
    """The adds of a loop into one tensor with the same box share one map."""
    source = body(tilelang.lower(tile_add(repeat=3), target=SM90).device_source)
    assert "C_reduce_map" in source and not re.search(r"C_reduce_map_?\d", source)
