"""T.gemm on CuTe MMA atoms (tilelang.cutedsl.gemm): which GEMMs take them (warpgroup MMA on
sm_90 for stage rings of whole tiles, warp-level mma.sync otherwise), the CuTe DSL they
print, the operand swizzles, and — where NVIDIA CuTe DSL is installed — that
``cute.compile`` turns the source into PTX with wgmma or mma.sync + ldmatrix, and cp.async,
for sm_90a (CuTe DSL compiles for an arch given by CUTE_DSL_ARCH without a GPU)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest
import tilelang
import tilelang.language as T
from cute_kernels import row_sum_of_product
from tilelang.cutedsl.gemm import operand_swizzle, warp_grid
from tilelang.testing.kernels import tile_gemm

CUTE = importlib.util.find_spec("cutlass") is not None


def source(kernel, arch: str = "sm_80", **configs) -> str:
    target = {"kind": "cuda", "arch": arch, "keys": ["cutedsl", "cuda", "gpu"]}
    return tilelang.lower(kernel, target=target, pass_configs=configs or None).device_source


def test_warp_grid_is_the_squarest_fit() -> None:
    assert warp_grid(128, 128, 4) == (2, 2)
    assert warp_grid(128, 64, 4) == (2, 2)
    assert warp_grid(256, 64, 8) == (4, 2)
    assert warp_grid(16, 64, 4) == (1, 4)
    assert warp_grid(48, 48, 4) is None  # 48 is not a multiple of 32 (two warps) nor of 64 (four)


@pytest.mark.parametrize("cols", [16, 32, 64, 128, 256])
def test_operand_swizzle_spreads_ldmatrix_rows_over_all_banks(cols: int) -> None:
    """ldmatrix reads 8 rows x 16 bytes at one column unit: the 8 addresses must fall in 8
    distinct 16-byte bank groups (of the 8 in a 128-byte line), for every unit and row block."""
    bits, base, shift = operand_swizzle(cols)

    def swizzle(offset: int) -> int:
        return offset ^ (((offset >> (base + shift)) & ((1 << bits) - 1)) << base)

    for row0 in range(0, 64, 8):
        for unit in range(cols // 8):
            groups = {(swizzle((row0 + r) * cols + unit * 8) * 2 // 16) % 8 for r in range(8)}
            assert len(groups) == 8, (cols, row0, unit, groups)
    assert operand_swizzle(24) is None and operand_swizzle(8) is None


def test_fp16_gemm_prints_tiled_mma_ldmatrix_and_cp_async() -> None:
    src = source(tile_gemm(256, 256, 128, 128, 128, 32, stages=3))
    assert ("cute.make_tiled_mma(cute.nvgpu.warp.MmaF16BF16Op(cutlass.Float16, cutlass.Float32, (16, 8, 16)), "
            "cute.make_layout((2, 2, 1)), permutation_mnk=(32, 32, 16))") in src
    assert "Cl = tiled_mma_0.make_fragment_C(tiled_mma_0.partition_shape_C((128, 128)))" in src
    assert "cute.nvgpu.warp.LdMatrix8x8x16bOp(False, 4)" in src  # A (M, K): K-major
    assert "cute.nvgpu.warp.LdMatrix8x8x16bOp(True, 4)" in src  # B (K, N): N-major, transposed
    assert "cute.gemm(tiled_mma_0, Cl, rA_" in src
    assert "cute.nvgpu.cpasync.CopyG2SOp(cache_mode=cute.nvgpu.LoadCacheMode.GLOBAL)" in src
    # T.Pipelined(num_stages=3): a ring of three stages per tile, one tile in flight behind
    # the one being read (stages.py; its schedule is checked in test_cutedsl_stages.py)
    assert src.count("cute.arch.cp_async_wait_group(1)") == 1 and src.count("cute.arch.cp_async_wait_group(0)") == 1
    # the operand tiles are swizzled, and their views in the GEMM use the same swizzle
    assert ("As = smem.allocate_tensor(cutlass.Float16, cute.make_composed_layout(cute.make_swizzle(2, 3, 3), 0, "
            "cute.make_layout(12288)), byte_alignment=1024)") in src
    assert "Bs = smem.allocate_tensor(cutlass.Float16, cute.make_composed_layout(cute.make_swizzle(3, 3, 4)" in src
    assert ("cute.make_tensor((Bs.iterator + ((_tl_floormod(k, 3)) * 4096)).align(1024), cute.make_composed_layout("
            "cute.make_swizzle(3, 3, 4), 0, cute.make_layout((128, 32), stride=(1, 128))))") in src
    # whole tiles: no bounds checks on the result
    assert "tDc_" not in src and "tDg_" in src


def test_transposed_operands_change_the_views_not_the_atoms() -> None:
    src = source(tile_gemm(128, 128, 64, 64, 64, 32, trans_a=True, trans_b=True))
    assert "cute.nvgpu.warp.LdMatrix8x8x16bOp(True, 4)" in src and "LdMatrix8x8x16bOp(False, 4)" in src
    assert "cute.make_layout((64, 32), stride=(1, 64))" in src  # A stored (K, M)
    assert "cute.make_layout((64, 32), stride=(32, 1))" in src  # B stored (N, K)


def test_edge_tiles_keep_guarded_copies_and_bounded_stores() -> None:
    src = source(tile_gemm(200, 136, 72, 64, 64, 32))
    assert "cute.gemm(" in src and "CopyG2SOp" not in src  # partial tiles: T.copy's own lowering
    assert "if (by * 64) + tDc_" in src and "< 200 and (bx * 64) + tDc_" in src and "< 136:" in src
    # the guarded loads of the edge tiles read offset 0 where the guard is false
    assert "A_ptr[cutlass.select_(" in src


def test_other_gemms_keep_the_simt_lowering_or_are_staged() -> None:
    assert "make_tiled_mma" not in source(tile_gemm(64, 64, 32, dtype="float32"))  # no fp32 atom
    assert "make_tiled_mma" not in source(tile_gemm(48, 48, 32, 48, 48, 32))  # no warp grid fits

    # an accumulator read by a reduction: MMA atoms through shared memory (staged.py)
    src = source(row_sum_of_product())
    assert "Cl_stage = smem.allocate_tensor(cutlass.Float32" in src and "cute.gemm(tiled_mma_0, acc_" in src


def test_epilogue_nests_walk_the_accumulator_registers() -> None:
    """relu(A @ B + bias[j]) in a T.Parallel nest at the nest's own indices: a loop over the
    thread's accumulator elements, each at its (row, column) in the MMA layout."""

    @T.prim_func
    def gemm_bias_relu(A: T.Tensor((128, 64), "float16"), B: T.Tensor((64, 128), "float16"),
                       bias: T.Tensor((128,), "float32"), C: T.Tensor((128, 128), "float32")):
        with T.Kernel(1, threads=128):
            As = T.alloc_shared((128, 64), "float16")
            Bs = T.alloc_shared((64, 128), "float16")
            Cl = T.alloc_fragment((128, 128), "float32")
            T.clear(Cl)
            T.copy(A, As)
            T.copy(B, Bs)
            T.gemm(As, Bs, Cl)
            for i, j in T.Parallel(128, 128):
                Cl[i, j] = T.max(Cl[i, j] + bias[j], 0.0)
            T.copy(Cl, C)

    src = source(gemm_bias_relu)
    assert "Cl_coord = tiled_mma_0_thr.partition_C(cute.make_identity_tensor((128, 128)))" in src
    assert "for e in cutlass.range_constexpr(0, 128):" in src  # 128 x 128 over 128 threads, unrolled
    assert "j = Cl_coord[e][1]" in src and "Cl[e] = cutlass.max((Cl[e] + bias_ptr[j])" in src


def test_clear_accum_fills_before_the_product() -> None:
    @T.prim_func
    def main(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            As = T.alloc_shared((64, 32), "float16")
            Bs = T.alloc_shared((32, 64), "float16")
            Cl = T.alloc_fragment((64, 64), "float32")
            T.copy(A, As)
            T.copy(B, Bs)
            T.gemm(As, Bs, Cl, clear_accum=True)
            T.copy(Cl, C)

    src = source(main)
    assert src.index("Cl.fill(cutlass.Float32(0.0))") < src.index("cute.gemm(")


def test_sm90_stage_rings_take_warpgroup_mma() -> None:
    src = source(tile_gemm(256, 256, 128, 128, 128, 32, stages=3), arch="sm_90", **{"tl.disable_tma_lower": True})
    assert ("tiled_mma_0 = sm90_utils.make_trivial_tiled_mma(cutlass.Float16, cutlass.Float16, "
            "cute.nvgpu.OperandMajorMode.K, cute.nvgpu.OperandMajorMode.MN, cutlass.Float32, (1, 1, 1), "
            "tiler_mn=(64, 128))") in src
    assert "tiled_mma_0.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, True)" in src
    assert ("As_layout = sm90_utils.make_smem_layout_a(utils.LayoutEnum.ROW_MAJOR, (128, 128, 32), "
            "cutlass.Float16, 3)") in src
    assert ("Bs_layout = sm90_utils.make_smem_layout_b(utils.LayoutEnum.COL_MAJOR, (128, 128, 32), "
            "cutlass.Float16, 3)") in src
    assert "swizzle=As_layout.inner" in src and "partition_D(Bs[None, None, _tl_floormod((k + 2), 3)])" in src
    # cp.async writes through the generic proxy, wgmma reads through the async one
    wait = src.index("cute.arch.cp_async_wait_group(1)")
    assert src.index('cute.arch.fence_proxy("async.shared", space="cta")', wait) < src.index("sync_threads()", wait)
    assert src.count("cute.nvgpu.warpgroup.wait_group(0)") == 1 and "LdMatrix" not in src


def test_sm90_stage_rings_load_by_tma() -> None:
    """tma_ring.py: TMA boxes on full/empty mbarriers, one issuing thread, no block barrier in
    the main loop, a stage released only after wait_group(1) says its wgmma group is done."""
    src = source(tile_gemm(256, 256, 128, 128, 128, 32, stages=3), arch="sm_90")
    assert "cp_async" not in src and "CopyG2SOp" not in src
    assert "tma_bar_0 = smem.allocate_array(cutlass.Int64, 6, byte_alignment=8)" in src
    assert "cute.arch.mbarrier_init(tma_bar_0 + 3 + s_tma_bar_0, 128)" in src  # empty: every thread
    assert ("main_kernel(A_ptr: cute.Tensor, B_ptr: cute.Tensor, C_ptr: cute.Tensor, tma_0: cute.CopyAtom, "
            "tma_0_tensor: cute.Tensor, tma_1: cute.CopyAtom, tma_1_tensor: cute.Tensor)") in src
    assert ("tma_1_view = cute.make_tensor(p1, cute.make_layout((256, 128), stride=(1, 256)))") in src  # B as (N, K)
    assert "cute.local_tile(tma_1_tensor, (128, 32), (bx, (k + 2)))" in src
    loop = src[src.index("for k in range"):src.index("cute.nvgpu.warpgroup.wait_group(0)")]
    assert "sync_threads" not in loop
    assert loop.index("wait_group(1)") < loop.index("cute.arch.mbarrier_arrive(tma_bar_0 + 3")
    assert loop.index("mbarrier_wait(tma_bar_0 + 0 +") < loop.index("cute.gemm(")
    # 2 tiles x 128 x 32 halves per stage
    assert "cute.arch.mbarrier_arrive_and_expect_tx(tma_bar_0 + (0), 16384)" in src
    # upstream's pass config keeps the cp.async ring
    assert "tma_bar" not in source(tile_gemm(256, 256, 128, 128, 128, 32, stages=3), arch="sm_90",
                                   **{"tl.disable_tma_lower": True})


def test_sm90_falls_back_to_mma_sync() -> None:
    assert "MmaF16BF16Op" in source(tile_gemm(200, 136, 72, 64, 64, 32), arch="sm_90")  # edge tiles: no ring
    assert "MmaF16BF16Op" in source(tile_gemm(256, 256, 128, 64, 64, 32, threads=64, stages=3), arch="sm_90")
    assert "MmaF16BF16Op" in source(tile_gemm(256, 256, 128, 128, 128, 32, stages=3), arch="sm_90",
                                    **{"tl.disable_wgmma": True})
    assert "wgmma" not in source(tile_gemm(256, 256, 128, 128, 128, 32, stages=3), arch="sm_100")


@pytest.mark.skipif(not CUTE, reason="NVIDIA CuTe DSL (nvidia-cutlass-dsl) is not installed")
@pytest.mark.parametrize("shape", [(256, 256, 128, 128, 128, 32, False, False, "sm_80"),
                                   (256, 256, 128, 128, 128, 32, False, False, "sm_90-relu"),
                                   (200, 136, 72, 64, 64, 32, False, False, "sm_90"),
                                   (128, 128, 64, 64, 64, 32, True, True, "sm_80"),
                                   (512, 384, 256, 128, 128, 64, True, True, "sm_90"),
                                   (256, 256, 128, 64, 64, 32, False, True, "sm_90")])
def test_cute_compile_gives_tensor_core_ptx_for_sm90(shape, tmp_path) -> None:
    """In a subprocess: CUTE_DSL_ARCH is read when cutlass is imported."""
    *dims, ta, tb, arch = shape
    arch, relu = arch.split("-")[0], arch.endswith("-relu")
    kernel = tile_gemm(*dims, trans_a=ta, trans_b=tb, stages=3, relu=relu)
    (tmp_path / "kernel_cute.py").write_text(source(kernel, arch=arch))
    script = textwrap.dedent(f"""
        import cuda.bindings.driver as cuda, cutlass
        from cutlass import cute
        from cutlass.cute.runtime import make_ptr
        from tilelang.cutedsl.execution_backend import import_source
        module = import_source(__import__("pathlib").Path({str(tmp_path / "kernel_cute.py")!r}), "gemm")
        ptrs = [make_ptr(t, 1 << 20, cute.AddressSpace.gmem, assumed_align=16)
                for t in (cutlass.Float16, cutlass.Float16, cutlass.Float32)]
        print(cute.compile(module.launch, *ptrs, cuda.CUstream(0)).artifacts.PTX)
    """)
    env = dict(os.environ, CUTE_DSL_ARCH="sm_90a", CUTE_DSL_KEEP="ptx", CUTE_DSL_DUMP_DIR=str(tmp_path),
               CUTE_DSL_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    ptx = done.stdout
    whole = dims[0] % dims[3] == 0 and dims[1] % dims[4] == 0 and dims[2] % dims[5] == 0
    assert ".target sm_90a" in ptx
    if arch == "sm_90" and whole:
        assert f"wgmma.mma_async.sync.aligned.m64n{dims[4]}k16.f32.f16.f16" in ptx and "mma.sync" not in ptx
        # the tiles arrive by TMA boxes on mbarriers, no cp.async (tma_ring.py)
        assert "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes" in ptx and "mbarrier.try_wait" in ptx
        assert "cp.async.cg.shared.global" not in ptx
    else:
        assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx and "wgmma" not in ptx
        assert "ldmatrix.sync.aligned.m8n8.x4" in ptx
        assert ("cp.async.cg.shared.global" in ptx) == whole
    assert "ld.local" not in ptx and "st.local" not in ptx  # the accumulator stays in registers


def staged_epilogue_gemm(M=256, N=256, K=128, bM=128, bN=128, bK=32):
    """Upstream's epilogue through shared memory: T.copy(C_local, C_shared), then to global."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
            As = T.alloc_shared((bM, bK), "float16")
            Bs = T.alloc_shared((bK, bN), "float16")
            Cl = T.alloc_fragment((bM, bN), "float32")
            Cs = T.alloc_shared((bM, bN), "float16")
            T.clear(Cl)
            for k in T.Pipelined(T.ceildiv(K, bK), num_stages=3):
                T.copy(A[by * bM, k * bK], As)
                T.copy(B[k * bK, bx * bN], Bs)
                T.gemm(As, Bs, Cl)
            T.copy(Cl, Cs)
            T.copy(Cs, C[by * bM, bx * bN])

    return main


def test_accumulator_copied_to_a_shared_tile() -> None:
    src = source(staged_epilogue_gemm(), arch="sm_90")
    assert "warpgroup" in src  # the GEMM stays on MMA atoms
    store = src.index("sD_")
    assert src.rindex("cute.arch.sync_threads()", 0, store) > src.rindex("wait_group(0)", 0, store)
    assert "sD_" in src and "= cute.make_tensor(Cs.iterator, cute.make_layout((128, 128), stride=(128, 1)))" in src
    assert "] = Cl[e_" in src and ".to(cutlass.Float16)" in src
    after = src[store:]
    assert after.index("cute.arch.sync_threads()") < after.index("Cs[")  # published before T.copy reads it


# (M, N, K, bM, bN, bK, trans_A, trans_B, stages, relu): whole tiles with a stage ring, edge
# tiles, transposed operands, an epilogue on the registers
EMULATED = [(64, 64, 96, 32, 32, 32, False, False, 3, False), (72, 40, 48, 32, 32, 32, False, False, 2, False),
            (64, 64, 64, 32, 32, 32, True, True, 2, False), (64, 32, 64, 32, 32, 16, False, True, 1, True)]


@pytest.mark.parametrize("case", EMULATED, ids=lambda c: "x".join(map(str, c[:3])) + ("T" if c[6] else "N") +
                         ("T" if c[7] else "N") + f"s{c[8]}" + ("relu" if c[9] else ""))
def test_mma_path_on_the_emulator(case) -> None:
    """The generated mma.sync code run by cute_emulator (its MMA stand-ins model views,
    swizzles, stages and fragments, not CuTe's thread mapping) against numpy."""
    import cute_emulator
    import numpy as np

    m, n, k, bm, bn, bk, ta, tb, stages, relu = case
    src = source(tile_gemm(m, n, k, bm, bn, bk, trans_a=ta, trans_b=tb, stages=stages, relu=relu))
    assert "cute.gemm(" in src
    rng = np.random.default_rng(5)
    a = rng.standard_normal((k, m) if ta else (m, k)).astype("float16")
    b = rng.standard_normal((n, k) if tb else (k, n)).astype("float16")
    c = np.zeros((m, n), "float32")
    cute_emulator.run(src, a, b, c)
    want = (a.T if ta else a).astype("float32") @ (b.T if tb else b).astype("float32")
    np.testing.assert_allclose(c, np.maximum(want, 0) if relu else want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", [(128, 128, 96, 64, 64, 32, False, False), (128, 64, 64, 64, 64, 32, True, True),
                                  (128, 128, 64, 64, 128, 16, False, True)],
                         ids=lambda c: "x".join(map(str, c[:3])) + ("T" if c[6] else "N") + ("T" if c[7] else "N"))
def test_wgmma_path_on_the_emulator(case) -> None:
    """sm_90's warpgroup MMA code (stage ring of cp.async into GMMA-layout tiles) against numpy."""
    import cute_emulator
    import numpy as np

    m, n, k, bm, bn, bk, ta, tb = case
    src = source(tile_gemm(m, n, k, bm, bn, bk, trans_a=ta, trans_b=tb, stages=3), arch="sm_90")
    assert "cute.nvgpu.warpgroup.fence()" in src
    rng = np.random.default_rng(7)
    a = rng.standard_normal((k, m) if ta else (m, k)).astype("float16")
    b = rng.standard_normal((n, k) if tb else (k, n)).astype("float16")
    c = np.zeros((m, n), "float32")
    cute_emulator.run(src, a, b, c)
    want = (a.T if ta else a).astype("float32") @ (b.T if tb else b).astype("float32")
    np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-4)


def test_shared_epilogue_on_the_emulator() -> None:
    import cute_emulator
    import numpy as np

    src = source(staged_epilogue_gemm(64, 64, 64, 32, 32, 32))
    rng = np.random.default_rng(6)
    a, b = (rng.standard_normal((64, 64)).astype("float16") for _ in range(2))
    c = np.zeros((64, 64), "float16")
    cute_emulator.run(src, a, b, c)
    np.testing.assert_allclose(c.astype("float32"), a.astype("float32") @ b.astype("float32"), rtol=2e-3, atol=2e-2)
