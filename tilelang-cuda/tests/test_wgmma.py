"""Hopper wgmma GEMMs (sm_90), checked without a GPU: which GEMMs take it, what the
generated CUDA holds (descriptors, swizzle modes, fences, the in-flight group), and that
ptxas assembles it for sm_90a without spilling. Descriptor and layout math is emulated in
test_mma_layout_emulation.py; the GPU runs are in test_gpu_tile.py."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import tilelang
import tilelang.language as T
from tilelang.cuda.toolchain import arch_for_source
from tilelang.testing.kernels import flash_attention as flash_attention_kernel
from tilelang.testing.kernels import tile_gemm

SM90 = {"kind": "cuda", "arch": "sm_90"}


def kernel_body(source: str) -> str:
    return source[source.index('extern "C" __global__'):]


def lower(func, target=SM90, **configs) -> str:
    # the pipelines as written: short K steps unmerged (test_merge_k_steps.py)
    configs = {"tl.disable_k_step_merge": True, **configs}
    return tilelang.lower(func, target=target, out_idx=[-1], pass_configs=configs).device_source


def descriptors(source: str) -> list[tuple[int, int, int]]:
    """(leading, stride, swizzle mode) of every descriptor the kernel builds."""
    return [tuple(map(int, m)) for m in re.findall(r"tl_wgmma_desc\(.*?, (\d+), (\d+), (\d)\)", kernel_body(source))]


def test_canonical_gemm_runs_on_wgmma_with_swizzled_operands():
    source = lower(tile_gemm(1024, 1024, 1024, 128, 128, 32, stages=3))
    body = kernel_body(source)
    # one warpgroup, two 64-row pieces of N = 128, 2 k steps per 32-deep tile
    assert body.count("tl_wgmma_m64n128k16_f16_01(") == 4 and "tl_mma_m16n8k16" not in body
    assert "ldmatrix" not in body and "float Cl_ptr[128]" in source
    # A (128 x 32, K-major): 64-byte swizzle; B (32 x 128, MN-major): 128-byte swizzle
    assert set(descriptors(source)) == {(8192, 512, 2), (4096, 1024, 1)}
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in source  # the generated helper
    # copies visible to the async proxy before the barrier; one wgmma group left in flight
    assert re.search(r"tl_cp_async_wait\(0\);\s+tl_fence_proxy_async\(\);\s+__syncthreads\(\);", body)
    assert "tl_wgmma_wait(1);" in body and body.count("tl_wgmma_wait(0);") == 1  # drained after the loop


def test_two_stages_leave_no_wgmma_in_flight():
    body = kernel_body(lower(tile_gemm(512, 512, 512, 128, 128, 32, stages=2)))
    assert "tl_wgmma_wait(1)" not in body and "tl_wgmma_wait(0)" in body
    assert "tl_cp_async_wait(0)" in body  # copies one iteration ahead


@pytest.mark.parametrize("trans_a,trans_b,flags", [(False, False, "01"), (False, True, "00"),
                                                   (True, False, "11"), (True, True, "10")])
def test_operand_majorness_sets_the_transpose_flags(trans_a, trans_b, flags):
    body = kernel_body(lower(tile_gemm(256, 256, 256, 64, 64, 32, trans_a, trans_b, stages=3)))
    assert f"tl_wgmma_m64n64k16_f16_{flags}(" in body


def test_bf16_and_two_warpgroups():
    source = lower(tile_gemm(512, 512, 512, 128, 256, 64, dtype="bfloat16", stages=4, threads=256))
    assert "tl_wgmma_m64n256k16_bf16_01(" in source and ".f32.bf16.bf16" in source
    assert "float Cl_ptr[128]" in source  # each warpgroup: one 64 x 256 piece


@pytest.mark.parametrize("why,func,target,configs", [
    ("sm_80 has no wgmma", tile_gemm(256, 256, 256, 128, 128, 32, stages=3), {"kind": "cuda", "arch": "sm_80"}, {}),
    ("sm_100 replaced it", tile_gemm(256, 256, 256, 128, 128, 32, stages=3), {"kind": "cuda", "arch": "sm_100"}, {}),
    ("disabled", tile_gemm(256, 256, 256, 128, 128, 32, stages=3), SM90, {"tl.disable_wgmma": True}),
    ("not pipelined", tile_gemm(256, 256, 256, 128, 128, 32, stages=0), SM90, {}),
    ("64 rows per warpgroup do not fit", tile_gemm(256, 256, 256, 32, 32, 32, stages=3), SM90, {}),
])
def test_other_gemms_stay_on_mma_sync(why, func, target, configs):
    body = kernel_body(lower(func, target, **configs))
    assert "tl_mma_m16n8k16_f16_f32(" in body and "wgmma" not in body, why


def gemm_with_shared_epilogue(M, N, K, bM=128, bN=128, bK=32, odd=False):
    """Other shared buffers besides the operand tiles (C's tile; ``odd``: also 3 x 128
    floats, 1.5 KiB): the swizzle's alignment holds when their sizes are multiples of
    1 KiB, else the operands use the unswizzled core-matrix layout."""
    odd_shape = (3, 128) if odd else (8, 128)

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
            As = T.alloc_shared((bM, bK), "float16")
            Bs = T.alloc_shared((bK, bN), "float16")
            Cs = T.alloc_shared((bM, bN), "float32")
            Os = T.alloc_shared(odd_shape, "float32")
            T.fill(Os, 0.0)
            Cl = T.alloc_fragment((bM, bN), "float32")
            T.clear(Cl)
            for k in T.Pipelined(T.ceildiv(K, bK), num_stages=3):
                T.copy(A[by * bM, k * bK], As)
                T.copy(B[k * bK, bx * bN], Bs)
                T.gemm(As, Bs, Cl)
            T.copy(Cl, Cs)
            T.copy(Cs, C[by * bM, bx * bN])

    return main


def test_swizzle_needs_the_other_shared_buffers_in_whole_kib():
    # upstream's epilogue through a C tile (64 KiB; 4 KiB more) keeps the stages on 1 KiB boundaries
    modes = {mode for *_, mode in descriptors(lower(gemm_with_shared_epilogue(256, 256, 256)))}
    assert modes and 0 not in modes, modes  # swizzled (mode 0: core matrices)
    # 1.5 KiB more could shift them: core matrices
    assert {mode for *_, mode in descriptors(lower(gemm_with_shared_epilogue(256, 256, 256, odd=True)))} == {0}
    plain = lower(tile_gemm(256, 256, 256, 128, 128, 32, stages=3), **{"tl.disable_wgmma_swizzle": True})
    # core matrices: 128 bytes apart along the 16-byte chunks, 8 rows x row bytes between groups
    assert set(descriptors(plain)) == {(128, 512, 0), (2048, 128, 0)}


def test_toolchain_compiles_wgmma_kernels_for_sm_90a():
    source = lower(tile_gemm(256, 256, 256, 128, 128, 32, stages=3))
    assert arch_for_source(source, "sm_90") == "sm_90a"
    assert arch_for_source(lower(tile_gemm(256, 256, 256, 128, 128, 32, stages=0)), "sm_90") == "sm_90"
    assert arch_for_source(source, "sm_80") == "sm_80"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("config", [(128, 128, 32, 128, 4), (128, 256, 64, 256, 4)])
def test_wgmma_gemm_assembles_without_spills(tmp_path, config):
    """ptxas's report for the canonical tile with 4 stages and the benchmark's best config:
    no spills, no serialized wgmma (ptxas warns when it must wait after every wgmma)."""
    bM, bN, bK, threads, stages = config
    src = tmp_path / "gemm.cu"
    src.write_text(lower(tile_gemm(4096, 4096, 4096, bM, bN, bK, stages=stages, threads=threads)))
    ptx = tmp_path / "gemm.ptx"
    subprocess.run(["nvcc", "-ptx", "-arch=sm_90a", str(src), "-o", str(ptx)], check=True, capture_output=True)
    k_steps, pieces = bK // 16, bM // 64 if threads == 128 else bM // 128
    # the prologue has no GEMM: the loop body's wgmmas once
    assert ptx.read_text().count("wgmma.mma_async") == k_steps * pieces
    report = subprocess.run(["nvcc", "-cubin", "-arch=sm_90a", "-Xptxas", "-v", str(src), "-o",
                             str(tmp_path / "gemm.cubin")], check=True, capture_output=True, text=True).stderr
    assert "0 bytes spill stores" in report, report
    assert "serialized" not in report, report  # ptxas: "wgmma.mma_async instructions are serialized due to ..."


def test_an_a_operand_in_registers_stays_on_mma_sync():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((256, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as _:
            Af = T.alloc_fragment((64, 64), "float16")
            Bs = T.alloc_shared((64, 64), "float16")
            Cl = T.alloc_fragment((64, 64), "float32")
            T.copy(A, Af)
            T.clear(Cl)
            for k in T.Pipelined(4, num_stages=3):
                T.copy(B[k * 64, 0], Bs)
                T.gemm(Af, Bs, Cl)
            T.copy(Cl, C)

    body = kernel_body(lower(main))
    assert "tl_mma_m16n8k16_f16_f32((&(Cl_ptr" in body and "(&(Af_ptr[" in body and "wgmma" not in body
    assert "tl_cp_async_16(" in body  # B still pipelined


def flash_attention(dim=64, block_M=64, block_N=64, threads=128, stages=2, **configs) -> str:
    func = flash_attention_kernel(1, 2, 256, dim, block_M, block_N, threads, stages)
    return tilelang.lower(func, target=SM90, out_idx=[3], pass_configs=configs or None).device_source


def test_flash_attention_runs_on_wgmma_with_p_from_registers():
    """16 rows per warp: the row family's layout is wgmma's. S = Q K^T reads both tiles
    through descriptors (Q copied once, into the swizzled layout, fenced for the async
    proxy); O += P V takes P from its registers; no group stays in flight (the softmax
    reads S right after its GEMM). The T.clear(acc_s) before S = Q K^T is the GEMM's first
    k step writing S (the "z" form: scale-d off): no instruction zeroes S's registers."""
    body = kernel_body(flash_attention())
    assert body.count("tl_wgmma_m64n64k16_f16_00z(") == 1 and body.count("tl_wgmma_m64n64k16_f16_00(") == 3
    assert body.count("tl_wgmma_m64n64k16_f16_r1(") == 4 and not re.search(r"acc_s_ptr \+ \d+\) = make_float2", body)
    assert re.search(r"tl_wgmma_m64n64k16_f16_r1\(\(&\(acc_o_ptr\[0\]\)\), \(&\(acc_s_cast_ptr\[8\]\)\)", body)
    assert "tl_wgmma_wait(1)" not in body and "tl_mma_m16n8k16" not in body
    assert body.count("tl_fence_proxy_async();") == 2  # after the Q copy; before each iteration's barrier
    assert {mode for *_, mode in descriptors(flash_attention())} == {1}


def test_flash_attention_with_32_rows_per_warp_stays_on_mma_sync():
    assert "wgmma" not in kernel_body(flash_attention(block_M=128, threads=128))
    assert "wgmma" not in kernel_body(flash_attention(**{"tl.disable_wgmma": True}))


def loop_gemm(update: str = "halve"):
    """C accumulated over 8 pipelined 32-deep k tiles; ``update`` touches C inside the loop:
    "halve" — C = (C + A_k B_k) / 2 by a T.Parallel nest; "clear" — a clear_accum GEMM
    (C ends as the last tile's product); "none" — nothing but the GEMM."""

    @T.prim_func
    def main(A: T.Tensor((128, 256), "float16"), B: T.Tensor((256, 128), "float16"), C: T.Tensor((128, 128), "float32")):
        with T.Kernel(1, threads=128) as _:
            As = T.alloc_shared((128, 32), "float16")
            Bs = T.alloc_shared((32, 128), "float16")
            Cl = T.alloc_fragment((128, 128), "float32")
            T.clear(Cl)
            for k in T.Pipelined(8, num_stages=3):
                T.copy(A[0, k * 32], As)
                T.copy(B[k * 32, 0], Bs)
                T.gemm(As, Bs, Cl, clear_accum=update == "clear")
                if update == "halve":
                    for i, j in T.Parallel(128, 128):
                        Cl[i, j] = Cl[i, j] * 0.5
            T.copy(Cl, C)

    return main


@pytest.mark.parametrize("update,in_flight", [("halve", False), ("clear", False), ("none", True)])
def test_a_wgmma_stays_in_flight_only_while_nothing_else_touches_its_accumulator(update, in_flight):
    """A T.Parallel update of C inside the pipelined loop, or a GEMM zeroing C first, must
    not race the wgmma still writing C: no group stays in flight then (and the copies run
    one stage further ahead)."""
    body = kernel_body(lower(loop_gemm(update)))
    assert "tl_wgmma_m64n128k16_f16_01(" in body
    assert ("tl_wgmma_wait(1)" in body) == in_flight
    assert ("tl_cp_async_wait(1)" in body) == (not in_flight)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("stages", [0, 2])
def test_a_head_dim_of_192_compiles(stages):
    """Rows of 192 halves (upstream's gqa backward example: head dim 192) are 24 vectors of
    8 lanes. Dealt as (i * 8 + lane) % 192, TVM could not see a vector's lanes stay in one
    row, computed each lane's swizzled offset (an int32x8 XOR) and printed it as longlong4
    with 8 arguments, which nvcc refused. The lane is now added to the vector's column."""
    from tilelang.cuda.toolchain import compile_cubin

    source = flash_attention(dim=192, stages=stages)
    assert "make_longlong4" not in source
    assert compile_cubin(source, "sm_90a", "fa192")[:4] == b"\x7fELF"


@pytest.mark.gpu
def test_a_head_dim_of_192_matches_torch():
    torch = pytest.importorskip("torch")
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("needs an sm_90 GPU")
    kernel = tilelang.compile(flash_attention_kernel(1, 2, 256, 192, 64, 64, 128, 2), out_idx=[3], target="cuda")
    q, k, v = (torch.randn(1, 256, 2, 192, device="cuda", dtype=torch.float16) for _ in range(3))
    want = torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                            v.transpose(1, 2)).transpose(1, 2)
    torch.testing.assert_close(kernel(q, k, v), want, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("arch,trans_b,expected", [
    ("sm_80", True, None),  # 8-bit float mma needs sm_89
    ("sm_89", False, None),  # B as [k][n]: ldmatrix has no .trans for bytes
    ("sm_89", True, "tl_mma_m16n8k32_e4m3_f32("),
    ("sm_90", False, None),  # wgmma reads 8-bit operands K-major only
    ("sm_90", True, "tl_wgmma_m64n128k32_e4m3_00("),
])
def test_fp8_gemms_take_tensor_cores_where_the_hardware_has_them(arch, trans_b, expected):
    body = kernel_body(lower(tile_gemm(256, 256, 256, 128, 128, 64, trans_b=trans_b, dtype="float8_e4m3fn",
                                       stages=3), {"kind": "cuda", "arch": arch}))
    if expected is None:
        assert "tl_mma" not in body and "wgmma" not in body
    else:
        assert expected in body


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("dtype,config", [("float8_e4m3fn", (128, 128, 128, 128, 4)),
                                          ("float8_e5m2", (128, 256, 128, 256, 3))])
def test_fp8_wgmma_gemm_assembles_without_spills(tmp_path, dtype, config):
    """wgmma.m64nNk32 with e4m3/e5m2 operands (no transpose operands: K-major only) assembles
    for sm_90a: every k step of 32 bytes one wgmma per 64-row piece, no spills, none serialized."""
    bM, bN, bK, threads, stages = config
    src = tmp_path / "gemm.cu"
    src.write_text(lower(tile_gemm(4096, 4096, 4096, bM, bN, bK, trans_b=True, dtype=dtype, stages=stages,
                                   threads=threads)))
    ptx = tmp_path / "gemm.ptx"
    subprocess.run(["nvcc", "-ptx", "-arch=sm_90a", str(src), "-o", str(ptx)], check=True, capture_output=True)
    kind = dtype.removeprefix("float8_").removesuffix("fn")
    wgmmas = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k32\.f32\.(\w+)\.(\w+)", ptx.read_text())
    assert len(wgmmas) == bK // 32 * (bM // 64 if threads == 128 else bM // 128)
    assert set(wgmmas) == {(str(bN), kind, kind)}  # (two warpgroups: one over each 64 rows, N wide)
    report = subprocess.run(["nvcc", "-cubin", "-arch=sm_90a", "-Xptxas", "-v", str(src), "-o",
                             str(tmp_path / "gemm.cubin")], check=True, capture_output=True, text=True).stderr
    assert "0 bytes spill stores" in report, report
    assert "serialized" not in report, report


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_a_gemm_over_run_time_sizes_assembles_with_its_wgmmas_unserialized(tmp_path):
    """Upstream's dynamic_shape GEMM (M, N, K all T.dynamic): its stage ring checks the row
    lengths when it runs (vectors, or tl_copy_16_partial), and keeps no wgmma group in
    flight over its run-time trip count, where ptxas would serialize every wgmma."""
    emu = pytest.importorskip("test_lowered_gemm_forms")
    source = lower(emu.run_time_gemm(128, 128, 32, False, False))
    body = kernel_body(source)
    assert "tl_wgmma_m64n128k16_f16_01(" in body and "tl_copy_16_partial(" in body
    assert "((k % 8) == 0)" in body and "((n % 8) == 0)" in body
    assert "tl_wgmma_wait(1);" not in body
    src = tmp_path / "gemm.cu"
    src.write_text(source)
    report = subprocess.run(["nvcc", "-cubin", "-arch=sm_90a", "-Xptxas", "-v", str(src), "-o",
                             str(tmp_path / "gemm.cubin")], check=True, capture_output=True, text=True).stderr
    assert "0 bytes spill stores" in report, report
    assert "serialized" not in report, report


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("arch,trans_b,instruction", [
    ("sm_80", True, "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"),
    ("sm_90", True, "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8"),
    ("sm_90", False, None),  # B as [k][n]: 8-bit operands are K-major only, so SIMT
])
def test_int8_gemms_assemble_on_tensor_cores(tmp_path, arch, trans_b, instruction):
    """int8 into int32: mma.sync m16n8k32 (sm_80) or wgmma k32 without the operand scales
    and transposes PTX refuses for integers; ptxas assembles either without spills."""
    src = tmp_path / "gemm.cu"
    src.write_text(lower(tile_gemm(1024, 1024, 1024, 128, 128, 128, False, trans_b, dtype="int8",
                                   accum_dtype="int32", stages=3), {"kind": "cuda", "arch": arch}))
    ptx = tmp_path / "gemm.ptx"
    cc = "sm_90a" if arch == "sm_90" else arch
    subprocess.run(["nvcc", "-ptx", f"-arch={cc}", str(src), "-o", str(ptx)], check=True, capture_output=True)
    text = ptx.read_text()
    if instruction is None:
        assert "mma" not in text
    else:
        assert instruction in text
    report = subprocess.run(["nvcc", "-cubin", f"-arch={cc}", "-Xptxas", "-v", str(src), "-o",
                             str(tmp_path / "gemm.cubin")], check=True, capture_output=True, text=True).stderr
    assert "0 bytes spill stores" in report and "serialized" not in report, report
