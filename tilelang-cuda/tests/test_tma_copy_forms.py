"""T.tma_copy forms beyond a ring's loads: a copy the lowering cannot take (its error keeps
its type and message through the nested pass sequence), upstream's TMA store (shared to
global), which is a copy by the calling threads here, the padded-tile names it reads in a
function of two kernels, and copies into a column slice of a shared tile (a box per row)."""

from __future__ import annotations

import re

import explicit_hopper_kernels as kernels
import numpy as np
import pytest
import tilelang
import tilelang.language as T
from lowered_instructions import lowered_kernel
from test_explicit_hopper import kernel_body, lower, sm90_torch
from tilelang.backend.module import create_backend_context
from tilelang.cuda import toolchain
from tilelang.engine.lower import lower_with_context as lower_artifact
from tilelang.errors import CompileError, LanguageError


def one_row_tma_copy(m: int = 256, k: int = 1024, threads: int = 256):
    """Upstream's test_tilelang_language_tma_copy block kernel: one row of A per block, a
    single-row T.tma_copy (``A[pid, 0:K]``)."""

    @T.prim_func
    def main(A: T.Tensor((m, k), "float32"), B: T.Tensor((m // threads,), "float32")):
        with T.Kernel(m // threads, threads=threads) as pid:
            tid = T.get_thread_binding()
            a_shared = T.alloc_shared((1, k), "float32")
            mbar = T.alloc_barrier([threads])
            T.tma_copy(A[pid, 0:k], a_shared[0, 0:k], barrier=mbar)
            T.mbarrier_arrive(mbar)
            T.mbarrier_wait_parity(mbar, 0)
            if tid == 0:
                B[pid] = a_shared[0, 0]

    return main


def per_warp_tma_copy(m: int = 32, k: int = 1024, threads: int = 256, scope: int = 32):
    """Upstream's per-warp leader kernel: each warp loads its own row into its own slot,
    completing its own barrier, its first thread issuing (leader_scope_threads=32)."""
    warps = threads // 32

    @T.prim_func
    def main(A: T.Tensor((m, k), "float32"), B: T.Tensor((m,), "float32")):
        with T.Kernel(m // warps, threads=threads) as pid:
            tid = T.get_thread_binding()
            warp = tid // 32
            row = pid * warps + warp
            a_shared = T.alloc_shared((warps, k), "float32")
            mbars = T.alloc_barrier([32] * warps)
            T.tma_copy(A[row, 0:k], a_shared[warp, 0:k], barrier=mbars[warp], leader_scope_threads=scope)
            T.mbarrier_arrive(mbarrier=mbars[warp])
            T.mbarrier_wait_parity(mbarrier=mbars[warp], parity=0)
            if tid % 32 == 0:
                B[row] = a_shared[warp, k - 1]

    return main


def test_an_error_raised_inside_a_nested_pass_keeps_its_type_and_message():
    """A pass's error raised in a structural_map callback, under the overlap trial's nested
    pass sequence, reached the user as "RuntimeError ... Error in pass:
    tl.cuda.OverlapWherePays" followed by the whole module's TVMScript."""

    @T.prim_func
    def main(A: T.Tensor((4, 64, 64), "float16"), B: T.Tensor((2, 64, 64), "float16")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((2, 64, 64), "float16")
            bar = T.alloc_barrier(128)
            T.tma_copy(A[0:2, :, :], S, barrier=bar)
            T.barrier_arrive(bar)
            T.barrier_wait(bar, 0)
            T.copy(S, B)

    with pytest.raises(CompileError) as info:
        lower(main)
    assert str(info.value) == ("kernel 'main': T.tma_copy into S: the copy must be a 2-d tile (a slice of rows x "
                               "columns of the global tensor into the last two dimensions of the shared one) or one "
                               "row of it")


def test_a_single_row_tma_copy_is_one_box_of_one_row():
    """``A[pid, 0:1024]`` into ``a_shared[0, 0:1024]``: a 1 x 1024 box, in four pieces of 256
    floats (a box dimension holds at most 256), expecting the row's 4096 bytes."""
    body = kernel_body(lower(one_row_tma_copy(m=512)).device_source)
    assert re.findall(r"tl_mbarrier_expect_tx_no_arrive\(\(&\(barriers_ptr\[0\]\)\), (\d+)\);", body) == ["4096"]
    assert re.findall(r"tl_tma_load_3d\(\(&\(a_shared_ptr\[0\]\)\), \(\(unsigned long long\)\(&\(A_tensor_map\)\)\), "
                      r"\(&\(barriers_ptr\[0\]\)\), 0, 0, (.*)\);", body) == ["((int)blockIdx.x)"]


def test_leader_scope_threads_elects_the_first_thread_of_each_warp():
    body = kernel_body(lower(per_warp_tma_copy()).device_source)
    issued = body[body.index("tl_mbarrier_expect_tx_no_arrive") - 60:body.index("tl_tma_load_3d")]
    assert "if ((((int)threadIdx.x) % 32) == 0) {" in issued
    assert re.findall(r"tl_tma_load_3d\(\(&\(a_shared_ptr\[\(\(\(\(int\)threadIdx.x\) >> 5\) \* 1024\)\]\)\), .*, 0, 0, "
                      r"\(\(\(\(int\)blockIdx.x\) \* 8\) \+ \(\(\(int\)threadIdx.x\) >> 5\)\)\);", body)
    # without the scope, the block's first thread alone issues the copy
    assert "% 32) == 0) {\n    tl_mbarrier_expect_tx" not in kernel_body(lower(one_row_tma_copy()).device_source)


def test_leader_scope_threads_is_checked():
    with pytest.raises(LanguageError, match=r"T\.tma_copy\(leader_scope_threads=48\): the threads of each "
                       r"leader-election scope, a positive multiple of the warp size \(32\)"):
        per_warp_tma_copy(scope=48)
    with pytest.raises(CompileError, match=r"T\.tma_copy\(leader_scope_threads=256\) in a role of 96 threads "
                       r"\(0\.\.95\): the scope must divide the role's threads"):
        lower(per_warp_tma_copy(threads=96, m=6, scope=256))
    with pytest.raises(LanguageError, match=r"eviction_policy='evict_often'\): one of evict_normal, evict_first, "
                       r"evict_last"):
        @T.prim_func
        def main(A: T.Tensor((64, 64), "float16")):
            with T.Kernel(1, threads=128):
                S = T.alloc_shared((64, 64), "float16")
                bar = T.alloc_barrier(128)
                T.tma_copy(A, S, barrier=bar, eviction_policy="evict_often")


@pytest.mark.gpu
@pytest.mark.parametrize("make", [one_row_tma_copy, per_warp_tma_copy])
def test_row_tma_copies_match_torch(make):
    torch = sm90_torch()
    if make is one_row_tma_copy:  # two blocks, each a row: B[pid] = A[pid, 0]
        kernel = tilelang.compile(make(m=512), out_idx=[1], target="cuda", execution_backend="tvm_ffi")
        a = torch.randn(512, 1024, device="cuda")
        expected = a[:2, 0]
    else:  # B[row] = A[row, -1], each warp its own row
        kernel = tilelang.compile(make(), out_idx=[1], target="cuda", execution_backend="tvm_ffi")
        a = torch.randn(32, 1024, device="cuda")
        expected = a[:, -1]
    torch.testing.assert_close(kernel(a), expected, rtol=0, atol=0)


def gemm_with_tma_store(n: int = 128, block: int = 64, block_k: int = 32):
    """Upstream's test_tilelang_language_tma_store kernel: C through a shared tile, stored
    with T.tma_copy(shared, global) and T.tma_store_wait()."""

    @T.prim_func
    def main(A: T.Tensor((n, n), "float16"), B: T.Tensor((n, n), "float16"), C: T.Tensor((n, n), "float16")):
        with T.Kernel(n // block, n // block, threads=128) as (bx, by):
            A_shared = T.alloc_shared((block, block_k), "float16")
            B_shared = T.alloc_shared((block_k, block), "float16")
            C_shared = T.alloc_shared((block, block), "float16")
            C_local = T.alloc_fragment((block, block), "float32")
            T.clear(C_local)
            for k in T.Pipelined(n // block_k, num_stages=2):
                T.copy(A[by * block, k * block_k], A_shared)
                T.copy(B[k * block_k, bx * block], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C_shared)
            T.tma_copy(C_shared, C[by * block, bx * block])
            T.tma_store_wait()

    return main


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_a_tma_store_of_a_gemms_tile_is_a_copy_through_shared_memory(arch):
    artifact = lower_artifact(gemm_with_tma_store(), create_backend_context({"kind": "cuda", "arch": arch},
                                                                           execution_backend=None), out_idx=[])
    if arch == "sm_80":  # (the emulator has no TMA, which sm_90's loads take)
        rng = np.random.default_rng(0)
        a, b = (rng.integers(-3, 4, (128, 128)).astype("float16") for _ in range(2))
        c = np.zeros((128, 128), "float16")
        lowered_kernel(artifact.device_mod)(a, b, c)
        np.testing.assert_array_equal(c, (a.astype("float32") @ b.astype("float32")).astype("float16"))
    if toolchain.nvcc_path() is not None:
        source = artifact.device_source
        assert toolchain._compile_nvcc(source, toolchain.arch_for_source(source, arch), "tma_store")[:4] == b"\x7fELF"


def test_a_function_of_two_kernels_with_padded_tiles_of_their_own():
    """The tensor-core pass names each kernel's padded tiles (for T.tma_copy); upstream's
    fused MoE launches two GEMM kernels, whose different names were refused as a conflict."""

    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32"),
             D: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((64, 64), "float16")
            b = T.alloc_shared((64, 64), "float16")
            c = T.alloc_fragment((64, 64), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.clear(c)
            T.gemm(a, b, c)
            T.copy(c, C)
        with T.Kernel(1, threads=128):
            a2 = T.alloc_shared((64, 64), "float16")
            b2 = T.alloc_shared((64, 64), "float16")
            d = T.alloc_fragment((64, 64), "float32")
            T.copy(A, a2)
            T.copy(B, b2)
            T.clear(d)
            T.gemm(a2, b2, d, transpose_B=True)
            T.copy(d, D)

    rng = np.random.default_rng(0)
    a, b = (rng.integers(-3, 4, (64, 64)).astype(np.float16) for _ in range(2))
    c, d = np.zeros((64, 64), np.float32), np.zeros((64, 64), np.float32)
    device_mod = tilelang.lower(main, target={"kind": "cuda", "arch": "sm_80"}).device_mod
    for index in (0, 1):  # the kernels in launch order, each given the function's arguments
        lowered_kernel(device_mod, index)(a, b, c, d)
    np.testing.assert_array_equal(c, a.astype(np.float32) @ b.astype(np.float32))
    np.testing.assert_array_equal(d, a.astype(np.float32) @ b.astype(np.float32).T)


def test_a_tma_copy_into_a_column_slice_is_a_box_per_row():
    """A box lands as a dense block of shared memory, so a tile that fills 64 of a shared
    row's 256 columns is written one row at a time: 32 boxes of 1 x 64 for each of the
    four slices (each on its own barrier, 4096 bytes), then the last 32 rows whole."""
    body = kernel_body(lower(kernels.column_slice_tma()).device_source)
    boxes = re.findall(r"tl_tma_load_3d\(\(&\(a_s_ptr\[(\d+)\]\)\), \(\(unsigned long long\)\(&\((\w+)\)\)\), "
                       r"\(&\(barriers_ptr\[(\d)\]\)\), (\d+), (\d+), \(\(int\)blockIdx.x\)\);", body)
    slices = [(int(o), int(b), int(c), int(r)) for o, m, b, c, r in boxes if m == "A_tensor_map"]
    assert slices == [(r * 256 + j * 64, j, j * 64, r) for j in range(4) for r in range(32)]
    assert [b[:3] for b in boxes if b[1] != "A_tensor_map"] == [("8192", "A_tensor_map_1", "4")]
    assert re.findall(r"tl_mbarrier_expect_tx_no_arrive\(\(&\(barriers_ptr\[\d\]\)\), (\d+)\);", body) == \
        ["4096"] * 4 + ["16384"]


def test_a_column_slice_of_rows_off_128_byte_boundaries_is_refused():
    @T.prim_func
    def main(A: T.Tensor((64, 200), "float16"), B: T.Tensor((64, 200), "float16")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((64, 200), "float16")
            bar = T.alloc_barrier(128)
            T.tma_copy(A[:, 64:128], S[:, 64:128], barrier=bar)
            T.barrier_arrive(bar)
            T.barrier_wait(bar, 0)
            T.copy(S, B)

    with pytest.raises(CompileError, match=r"T\.tma_copy into S\[\.\.\., 64:64 \+ 64\] of rows of 200 float16 "
                       r"elements: a box per row needs .* shared rows of a multiple of 128 bytes"):
        lower(main)


@pytest.mark.gpu
def test_column_slice_tma_matches_torch():
    torch = sm90_torch()
    kernel = tilelang.compile(kernels.column_slice_tma(), target="cuda", execution_backend="tvm_ffi")
    a = torch.randn(2, 64, 256, device="cuda", dtype=torch.float16)
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.testing.assert_close(b, a, rtol=0, atol=0)
