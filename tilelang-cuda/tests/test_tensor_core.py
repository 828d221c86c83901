"""Tensor-core GEMM, cp.async pipelining and block rasterization, checked without a GPU:
the layouts and mappings themselves, what reaches the generated CUDA, and (where nvcc is
installed) that ptxas accepts it without spilling. The GPU runs are in test_gpu_tile.py."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import tilelang
import tilelang.language as T
from tilelang.cuda.transform.mma_layout import choose_layout, padded_row
from tilelang.testing.kernels import flash_attention, split_k_gemm
from tilelang.testing.kernels import tile_gemm as general_gemm

SM80 = {"kind": "cuda", "arch": "sm_80"}  # mma.sync (sm_90 takes wgmma: test_wgmma.py)


def body(source: str) -> str:
    """The kernels, without the helper header (which defines every helper)."""
    return source[source.index('extern "C" __global__'):]


def gemm_source(M, N, K, bM, bN, bK, threads=128, stages=3, panel=0, dtype="float16") -> str:
    func = general_gemm(M, N, K, bM, bN, bK, dtype=dtype, stages=stages, threads=threads, panel=panel)
    return tilelang.lower(func, target=SM80, out_idx=[-1]).device_source


def gemm_then_row_max(M, N, K, bM=64, bN=64, bK=32):
    """The accumulator reduced across its rows, the row maxima copied out (a row family)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), R: T.Tensor((M,), "float32")):
        with T.Kernel(1, T.ceildiv(M, bM), threads=128) as (bx, by):
            As = T.alloc_shared((bM, bK), "float16")
            Bs = T.alloc_shared((bK, bN), "float16")
            Cl = T.alloc_fragment((bM, bN), "float32")
            Rl = T.alloc_fragment((bM,), "float32")
            T.clear(Cl)
            for k in T.Pipelined(T.ceildiv(K, bK), num_stages=2):
                T.copy(A[by * bM, k * bK], As)
                T.copy(B[k * bK, 0], Bs)
                T.gemm(As, Bs, Cl)
            T.reduce_max(Cl, Rl, dim=1)
            T.copy(Rl, R[by * bM])

    return main


def test_warp_grid_is_the_squarest_that_fits_mma_pieces():
    layout = choose_layout(128, 128, 4)
    assert (layout.warps_m, layout.warps_n, layout.wm, layout.wn) == (2, 2, 64, 64)
    assert (layout.mt, layout.nt, layout.per_thread) == (4, 8, 128)
    assert (choose_layout(128, 256, 8).wm, choose_layout(128, 256, 8).wn) == (64, 64)
    assert choose_layout(64, 32, 4).wn % 16 == 0
    assert choose_layout(16, 16, 4) is None  # 16x16 cannot be split over 4 warps


def test_shared_rows_are_padded_to_an_odd_number_of_16_byte_chunks():
    assert padded_row(32, 2) == 40 and padded_row(128, 2) == 136 and padded_row(64, 2) == 72
    assert padded_row(40, 2) == 40  # already odd
    assert padded_row(12, 2) == 12  # not whole chunks: left alone


@pytest.mark.parametrize("dtype,intrinsic", [("float16", "tl_mma_m16n8k16_f16_f32"),
                                             ("bfloat16", "tl_mma_m16n8k16_bf16_f32")])
def test_upstream_gemm_uses_tensor_cores_and_cp_async(dtype, intrinsic):
    source = gemm_source(256, 256, 256, 128, 128, 32, dtype=dtype)
    kernel = body(source)
    assert intrinsic + "(" in kernel
    assert "tl_ldmatrix_x4((" in kernel and "tl_ldmatrix_x4_trans((" in kernel  # B is [k][n]
    assert "tl_cp_async_16((" in kernel and "tl_cp_async_wait(1)" in kernel  # 3 stages
    assert "#define tl_cp_async_wait" in source  # the helper header came along
    assert "float Cl_ptr[128]" in source  # 128x128 over 4 warps: 4x8 pieces of 4 floats


def test_pipelined_gemm_requires_aligned_tensors():
    artifact = tilelang.lower(general_gemm(256, 256, 256, 128, 128, 32, stages=3), target=SM80, out_idx=[-1])
    assert artifact.min_alignment == 16


def test_transposed_operands_swap_ldmatrix_forms():
    source = tilelang.lower(general_gemm(128, 128, 64, 64, 64, 32, trans_a=True, trans_b=True),
                            target=SM80, out_idx=[-1]).device_source
    ldmatrix = re.findall(r"tl_ldmatrix_x4(_trans)?\(\(", body(source))
    assert ldmatrix.count("_trans") and ldmatrix.count("")  # A transposed, B plain


def test_fragment_epilogue_follows_the_mma_layout():
    source = tilelang.lower(general_gemm(128, 128, 64, 64, 64, 32, relu=True), target=SM80,
                            out_idx=[-1]).device_source
    assert "tl_mma_m16n8k16_f16_f32(" in body(source) and "max(" in body(source)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_gpus_before_sm_80_keep_the_simt_path(tmp_path):
    """Turing (sm_75) has neither m16n8k16 nor cp.async: its GEMMs keep the SIMT lowering,
    which ptxas assembles for it (it refused the tensor-core code before)."""
    source = tilelang.lower(general_gemm(256, 256, 256, 128, 128, 32, stages=3),
                            target={"kind": "cuda", "arch": "sm_75"}, out_idx=[-1]).device_source
    assert "tl_mma" not in body(source) and "tl_cp_async" not in body(source)
    src = tmp_path / "gemm.cu"
    src.write_text(source)
    subprocess.run(["nvcc", "-cubin", "-arch=sm_75", str(src), "-o", str(tmp_path / "gemm.cubin")], check=True,
                   capture_output=True)


def test_fallbacks_keep_the_simt_path():
    """float32 operands take TF32 tensor cores (test_tf32_gemm.py) unless tl.disable_tf32 asks for
    float32 products: then the SIMT path, whose source needs no helper header."""
    gemm = general_gemm(128, 128, 64, 64, 64, 32, dtype="float32")
    fp32 = tilelang.lower(gemm, target=SM80, out_idx=[-1], pass_configs={"tl.disable_tf32": True})
    assert "tl_mma" not in fp32.device_source and "tl_cp_async" not in fp32.device_source  # no header
    assert "tl_mma_m16n8k8_tf32_f32(" in body(tilelang.lower(gemm, target=SM80, out_idx=[-1]).device_source)


def test_unaligned_global_rows_use_tensor_cores_without_cp_async():
    # K = 36: rows of A are not whole 16-byte vectors, so the copies stay synchronous
    source = tilelang.lower(general_gemm(64, 64, 36, 64, 64, 32), target=SM80, out_idx=[-1]).device_source
    assert "tl_mma_m16n8k16_f16_f32(" in body(source) and "tl_cp_async_16(" not in body(source)


def test_use_swizzle_rasterizes_block_indices_on_cuda_only():
    # a panel of 4 block rows: blockIdx.y // 4 in the tile indices (the remap's bindings are
    # substituted into their uses and dropped: DropDeadBindings)
    assert "((int)blockIdx.y) >> 2" in gemm_source(1024, 1024, 64, 128, 128, 32, panel=4)
    assert "((int)blockIdx.y) >> 2" not in gemm_source(1024, 1024, 64, 128, 128, 32, panel=0)


def test_rasterization_is_a_bijection_on_the_grid():
    from tilelang.transform.gpu.rasterize import _remap
    from tvm import tirx
    from tvm.sym.analyzer import Analyzer

    analyzer = Analyzer()
    for gx, gy, panel in [(5, 7, 3), (8, 8, 8), (3, 10, 4), (1, 1, 2)]:
        seen = set()
        for by in range(gy):
            for bx in range(gx):
                new = _remap(tirx.IntImm("int32", bx), tirx.IntImm("int32", by), tirx.IntImm("int32", gx),
                             tirx.IntImm("int32", gy), panel)
                seen.add(tuple(int(analyzer.simplify(v).value) for v in new))
        assert seen == {(x, y) for x in range(gx) for y in range(gy)}


def test_swizzle_order_is_checked():
    with pytest.raises(tilelang.errors.LanguageError, match="order 'diagonal' is not one of"):
        T.use_swizzle(4, order="diagonal")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_canonical_gemm_assembles_without_spills(tmp_path):
    """ptxas's own report: the 128x128x32 / 3-stage kernel fits in registers, and the PTX
    holds the expected instruction mix (per k tile: 4x8 mma pieces x 2 k steps per warp)."""
    src = tmp_path / "gemm.cu"
    src.write_text(gemm_source(4096, 4096, 4096, 128, 128, 32, stages=3))
    ptx = tmp_path / "gemm.ptx"
    subprocess.run(["nvcc", "-ptx", "-arch=sm_80", str(src), "-o", str(ptx)], check=True, capture_output=True)
    text = ptx.read_text()
    assert text.count("mma.sync.aligned.m16n8k16") == 64
    assert text.count("ldmatrix.sync") == 16 and text.count("cp.async.cg.shared.global") == 3 * 8
    report = subprocess.run(["nvcc", "-cubin", "-arch=sm_80", "-Xptxas", "-v", str(src), "-o",
                             str(tmp_path / "gemm.cubin")], check=True, capture_output=True, text=True).stderr
    assert "0 bytes spill stores" in report, report


def test_launch_bounds_plan_blocks_per_sm_from_shared_memory_and_registers():
    """Registers hold the accumulators and fragments, so they bound the warps per SM: the
    pass promises the most blocks that shared memory allows and registers can serve."""
    # 4 warps of 64x64 tiles: a third block would need <= 168 registers (it spills there)
    assert "__launch_bounds__(128, 2)" in gemm_source(1024, 1024, 256, 128, 128, 32, stages=3)
    # 4 warps of 32x32 tiles (64x64x32, 3 stages: 29 KiB): four blocks, double-buffered
    assert "__launch_bounds__(128, 4)" in gemm_source(1024, 1024, 256, 64, 64, 32, stages=3)
    # 128x128x64, 3 stages (107 KiB): two blocks, double-buffered fragments
    assert "__launch_bounds__(128, 2)" in gemm_source(1024, 1024, 256, 128, 128, 64, stages=3)
    # 8 warps of 64x32 tiles: two blocks at 128 registers
    assert "__launch_bounds__(256, 2)" in gemm_source(1024, 1024, 256, 128, 128, 64, threads=256, stages=3)
    # 3 stages of 128x256x64 tiles (156 KiB) leave no room for a second block
    assert "__launch_bounds__(256)" in gemm_source(1024, 1024, 256, 128, 256, 64, threads=256, stages=3)


def test_blocks_per_sm_can_be_chosen():
    func = general_gemm(1024, 1024, 256, 128, 128, 32, stages=3)
    source = tilelang.lower(func, target=SM80, out_idx=[-1],
                            pass_configs={"tl.min_blocks_per_sm": 2}).device_source
    assert "__launch_bounds__(128, 2)" in source
    forced = tilelang.lower(func, target=SM80, out_idx=[-1], pass_configs={"tl.min_blocks_per_sm": 3})
    assert "__launch_bounds__(128, 3)" in forced.device_source


def _fragment_hazards(source: str) -> list[str]:
    """Fragment registers loaded by ldmatrix that a later ldmatrix overwrites before any mma
    read them (the kernel text is fully unrolled, so source order is program order)."""
    load = re.compile(r"tl_ldmatrix_x4(?:_trans)?\(\(&\(([AB])_frag_ptr\[(\d+)\]\)\)")
    mma = re.compile(r"tl_mma_\w+\(\(&\(\w+\[\d+\]\)\), \(&\(A_frag_ptr\[(\d+)\]\)\), \(&\(B_frag_ptr\[(\d+)\]\)\)")
    unread: set[tuple[str, int]] = set()
    hazards = []
    for line in body(source).splitlines():
        if m := load.search(line):
            regs = {(m.group(1), int(m.group(2)) + i) for i in range(4)}
            if regs & unread:
                hazards.append(line.strip())
            unread |= regs
        elif m := mma.search(line):
            a, b = int(m.group(1)), int(m.group(2))
            unread -= {("A", a + i) for i in range(4)} | {("B", b + i) for i in range(2)}
    return hazards


@pytest.mark.parametrize("config", [dict(bK=32, stages=3), dict(bK=64, stages=3), dict(bK=32, stages=3, blocks=3),
                                   dict(bK=64, stages=2, blocks=3)])
def test_fragments_are_consumed_before_they_are_reloaded(config):
    """Both the double-buffered and the single-buffered (more blocks per SM) schedules."""
    func = general_gemm(1024, 1024, 256, 128, 128, config["bK"], stages=config["stages"])
    configs = {"tl.min_blocks_per_sm": config["blocks"]} if "blocks" in config else None
    source = tilelang.lower(func, target=SM80, out_idx=[-1], pass_configs=configs).device_source
    assert source.count("tl_mma_m16n8k16_f16_f32((") >= 64
    assert _fragment_hazards(source) == []


# -- T.atomic_add on CUDA -----------------------------------------------------------------------
def element_atomics(n, dtype):
    @T.prim_func
    def main(X: T.Tensor((n,), "int32"), H: T.Tensor((16,), dtype)):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            for i in T.Parallel(128):
                if bx * 128 + i < n:
                    T.atomic_add(H[X[bx * 128 + i] % 16], T.cast(1, dtype))

    return main


def test_tile_atomic_add_follows_the_tensor_core_accumulator():
    source = body(tilelang.lower(split_k_gemm(256, 256, 512, 4), target=SM80).device_source)
    # 64x64 over 4 warps: 32 accumulator elements per thread, updated in 16 column pairs
    assert "tl_mma_m16n8k16_f16_f32((" in source and source.count("atomicAdd(") == 16


@pytest.mark.parametrize("dtype", ["int32", "float32", "float16", "bfloat16"])
def test_element_atomic_add_becomes_atomicadd(dtype):
    assert "atomicAdd((&(H_ptr[" in tilelang.lower(element_atomics(1000, dtype), target=SM80).device_source


def test_atomic_add_on_a_dtype_cuda_cannot_update_atomically_is_named():
    with pytest.raises(tilelang.errors.LanguageError,
                       match=r"T.atomic_add on H \(int16\): CUDA has atomic adds for float32, float64, int32, "
                             r"uint32, int64, uint64, float16, bfloat16; use one of those types"):
        tilelang.lower(element_atomics(1000, "int16"), target=SM80)


# -- T.annotate_layout --------------------------------------------------------------------------
def transpose_through_shared(n=128, annotate=True):
    """Column reads of a shared tile: the case a bank-conflict-free layout is for."""
    from tilelang.layout import make_swizzled_layout

    @T.prim_func
    def main(A: T.Tensor((n, n), "float16"), B: T.Tensor((n, n), "float16")):
        with T.Kernel(n // 64, n // 64, threads=128) as (bx, by):
            S = T.alloc_shared((64, 64), "float16")
            if annotate:
                T.annotate_layout({S: make_swizzled_layout(S)})
            T.copy(A[by * 64, bx * 64], S)
            for i, j in T.Parallel(64, 64):
                B[bx * 64 + i, by * 64 + j] = S[j, i]

    return main


def test_annotated_shared_tile_gets_padded_rows():
    padded = tilelang.lower(transpose_through_shared(), target=SM80)
    plain = tilelang.lower(transpose_through_shared(annotate=False), target=SM80)
    assert plain.launches[0].dynamic_smem == str(64 * 64 * 2)
    assert padded.launches[0].dynamic_smem == str(64 * 72 * 2)  # rows of 64 halves + one 16-byte chunk


def test_unsupported_layout_annotations_are_named():
    with pytest.raises(tilelang.errors.LanguageError, match="only tilelang.layout.make_swizzled_layout"):
        @T.prim_func
        def main(A: T.Tensor((64, 64), "float16")):
            with T.Kernel(1, threads=128) as _:
                S = T.alloc_shared((64, 64), "float16")
                T.annotate_layout({S: "row-major"})
                T.copy(A, S)


# -- what stays on the SIMT path ------------------------------------------------------------------
def single_tile_gemm(threads=128, acc="float32", a_in_fragment=False, a_rows=64):
    """One 64x64x64 GEMM; the arguments make it one the tensor cores cannot take."""
    alloc_a = T.alloc_fragment if a_in_fragment else T.alloc_shared

    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"), C: T.Tensor((a_rows, 64), acc)):
        with T.Kernel(1, threads=threads) as _:
            As = alloc_a((64, 64), "float16")
            Bs = T.alloc_shared((64, 64), "float16")
            Cl = T.alloc_fragment((a_rows, 64), acc)
            T.clear(Cl)
            T.copy(A, As)
            T.copy(B, Bs)
            T.gemm(As[0:a_rows, 0:64], Bs, Cl)
            T.copy(Cl, C)

    return main


@pytest.mark.parametrize("options,expected", [
    (dict(acc="float16"), "simt"),  # fp16 accumulator: mma with fp32 accumulation only
    (dict(a_rows=32), "mma"),  # a slice of a shared tile: ldmatrix reads it where it is
    (dict(a_in_fragment=True), "mma"),  # A held in a fragment: its registers are mma's A operand
    (dict(threads=96), "simt"),  # 3 warps cannot split 64x64 into 16x16 pieces
    (dict(threads=(64, 2)), "simt"),  # a 2-d thread block
    (dict(threads=64), "mma"),
])
def test_gemm_instruction_selection(options, expected):
    source = body(tilelang.lower(single_tile_gemm(**options), target=SM80).device_source)
    assert ("mma" if "tl_mma" in source else "simt") == expected


# -- row families: flash-attention's GEMMs on tensor cores (row_families.py) ------------------
def flash_attention_source(dim=64, block_M=64, block_N=64, threads=128, seq_len=256, stages=2):
    func = flash_attention(1, 2, seq_len, dim, block_M, block_N, threads, stages)
    return tilelang.lower(func, target=SM80, out_idx=[3]).device_source


def test_flash_attention_runs_both_gemms_on_tensor_cores_with_rows_in_registers():
    kernel = body(flash_attention_source())
    # 64x64 tiles over 4 warps (16 rows each, all columns): 4 k steps x 8 pieces per GEMM
    assert kernel.count("tl_mma_m16n8k16_f16_f32(") == 64
    assert kernel.count("tl_ldmatrix_x4(") == 4 + 4 * 4 and kernel.count("tl_ldmatrix_x4_trans(") == 4 * 4
    # P is the second GEMM's A operand straight from its registers
    assert re.search(r"tl_mma_m16n8k16_f16_f32\(\(&\(acc_o_ptr\[\d+\]\)\), \(&\(acc_s_cast_ptr\[", kernel)
    # two row reductions (max, sum) of 2 rows per thread: 2 xor shuffles each
    assert kernel.count("__shfl_xor_sync(") == 8
    for name, regs in (("acc_s", 32), ("acc_o", 32), ("acc_s_cast", 32), ("scores_max", 2), ("logsum", 2)):
        assert re.search(rf"(float|half) {name}_ptr\[{regs}\];", kernel), name


def test_flash_attention_with_8_warps_and_dim_128():
    kernel = body(flash_attention_source(dim=128, block_M=128, block_N=64, threads=256))
    assert kernel.count("tl_mma_m16n8k16_f16_f32(") == 8 * 8 + 4 * 16  # S: 8 k steps x 8 pieces; O: 4 x 16
    assert re.search(r"float acc_o_ptr\[64\];", kernel)


def test_a_row_vector_copied_to_memory_keeps_the_row_family():
    """Each of a row's 4 lanes holds its reduced value and stores the same value, so a row
    vector copied to global or shared memory (upstream's T.copy(logsum, lse[...])) keeps
    the family on tensor cores (it took the whole kernel to the SIMT path before)."""
    import numpy as np
    from lowered_instructions import lowered_kernel

    artifact = tilelang.lower(gemm_then_row_max(128, 64, 64), target=SM80)
    assert "tl_mma_m16n8k16_f16_f32(" in body(artifact.device_source)
    rng = np.random.default_rng(0)
    a = rng.integers(-4, 5, (128, 64)).astype(np.float16)
    b = rng.integers(-4, 5, (64, 64)).astype(np.float16)
    r = np.zeros(128, np.float32)
    lowered_kernel(artifact.device_mod)(a, b, r)
    np.testing.assert_array_equal(r, (a.astype(np.float64) @ b.astype(np.float64)).max(axis=1))


def test_flash_attention_pipelines_k_and_v_copies():
    """V is copied after the first GEMM; nothing before that touches V's tile, so the copy
    joins K's at the top of the iteration: both become a 2-stage cp.async ring."""
    kernel = body(flash_attention_source(stages=2))
    # 64 x 64 fp16 tiles = 512 vectors, 4 per thread: K and V, prologue and loop
    assert kernel.count("tl_cp_async_16(") == 2 * 2 * 4 and "tl_cp_async_wait(0)" in kernel
    assert "tl_cp_async" not in body(flash_attention_source(stages=1))


def test_a_copy_whose_tile_is_read_before_it_is_not_hoisted():
    @T.prim_func
    def main(A: T.Tensor((256, 64), "float16"), B: T.Tensor((256, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as _:
            As = T.alloc_shared((64, 64), "float16")
            Bs = T.alloc_shared((64, 64), "float16")
            Cl = T.alloc_fragment((64, 64), "float32")
            T.clear(Cl)
            for k in T.Pipelined(4, num_stages=2):
                T.copy(A[k * 64, 0], As)
                T.gemm(As, Bs, Cl, transpose_B=True)  # reads the previous iteration's Bs
                T.copy(B[k * 64, 0], Bs)
            T.copy(Cl, C)

    kernel = body(tilelang.lower(main, target=SM80, out_idx=[-1]).device_source)
    assert "tl_mma_m16n8k16" in kernel and "tl_cp_async" not in kernel


def gemm_beside_a_large_tile(filler_floats: int):
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32"),
             F: T.Tensor((filler_floats,), "float32")):
        with T.Kernel(1, threads=128) as _:
            As = T.alloc_shared((64, 64), "float16")
            Bs = T.alloc_shared((64, 64), "float16")
            big = T.alloc_shared((filler_floats,), "float32")
            Cl = T.alloc_fragment((64, 64), "float32")
            T.copy(F, big)
            T.copy(A, As)
            T.copy(B, Bs)
            T.clear(Cl)
            T.gemm(As, Bs, Cl)
            T.copy(Cl, C)
            T.copy(big, F)

    return main


@pytest.mark.parametrize("filler_kib,padded", [(200, True), (210, False)])
def test_operand_tiles_are_padded_only_where_the_padding_fits(filler_kib, padded):
    """Padded rows (72 halves for 64) keep ldmatrix free of bank conflicts. With 210 KiB of
    other shared memory, the padding would take the block past sm_90's 227 KiB; the
    tiles then keep their declared rows, and the kernel still fits."""
    source = tilelang.lower(gemm_beside_a_large_tile(filler_kib * 256), target={"kind": "cuda", "arch": "sm_90"}).device_source
    assert "tl_mma_m16n8k16_f16_f32(" in source
    assert ("* 72)" in source) == padded
