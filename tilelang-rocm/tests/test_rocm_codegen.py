"""HIP source for the testing kit's kernels and the examples, compiled to gfx90a code
objects with hipcc (CI installs it); T.gemm on MFMA where the shape allows, SIMT otherwise.
Nothing here runs on an AMD GPU."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import tilelang
from tilelang.rocm import toolchain
from tilelang.testing import kernels as kit

GFX90A = {"kind": "rocm", "mcpu": "gfx90a"}
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

KERNELS = {
    "add_f32": lambda: kit.elementwise_add(1024, 256),
    "add_f16": lambda: kit.elementwise_add(1024, 256, dtype="float16"),
    "add_bf16": lambda: kit.elementwise_add(512, 128, dtype="bfloat16"),
    "add_odd": lambda: kit.elementwise_add(100, 17),
    "softmax_rows_symbolic": lambda: kit.row_softmax_sum(64),
    "tiled_matmul": lambda: kit.tiled_matmul(128, 128, 64),
    "saxpy_scalar": lambda: kit.saxpy(1000),
    "split_k_gemm": lambda: kit.split_k_gemm(256, 256, 256, 4),
    "tile_gemm": lambda: kit.tile_gemm(256, 256, 256, bM=64, bN=64, bK=32),
    "tile_gemm_bf16_tt": lambda: kit.tile_gemm(128, 128, 128, trans_a=True, trans_b=True, dtype="bfloat16"),
    "flash_attention": lambda: kit.flash_attention(1, 2, 256, 64),
    "rms_norm_one_row": lambda: kit.rms_norm_rows(64, 256, blk_m=1),
    "masked_block_sum": kit.masked_block_sum,
    "split_row_sum": kit.split_row_sum,
    "flat_views": kit.flat_views,
    "global_layout_accumulate": lambda: kit.global_layout_pair()[0],
    "global_layout_unpack": lambda: kit.global_layout_pair()[1],
    "row_sums_while": kit.row_sums,
}
# (example module, its @tilelang.jit object, sizes)
EXAMPLE_KERNELS = {
    "elementwise_add": ("elementwise_add", {"M": 1000, "N": 256}),
    "softmax": ("softmax", {"N": 128}),
    "rmsnorm": ("rmsnorm", {"M": 100, "N": 256}),
    "gemm": ("matmul", {"M": 256, "N": 256, "K": 128, "bM": 64, "bN": 64, "bK": 32}),
    "flash_attention": ("flashattn", {"batch": 1, "heads": 2, "seq_len": 128, "dim": 64}),
}


def hip_source(func, target=GFX90A, **options) -> str:
    return tilelang.lower(func, target=target, **options).device_source


def mfma_instructions(source: str, arch: str = "gfx90a") -> set[str]:
    code_object = toolchain.compile_code_object(source, arch)
    return {line.split()[0] for line in toolchain.disassemble(code_object, arch).splitlines() if "v_mfma" in line}


def example_prim_func(module: str):
    if not EXAMPLES.is_dir():
        pytest.skip("the repository's examples/ is not beside these tests (wheel tests copy the tests alone)")
    sys.path.insert(0, str(EXAMPLES))
    try:
        attr, sizes = EXAMPLE_KERNELS[module]
        return getattr(importlib.import_module(module), attr).get_tir(**sizes)
    finally:
        sys.path.remove(str(EXAMPLES))


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kit_kernel_is_hip_source(name):
    source = hip_source(KERNELS[name]())
    assert source.startswith("// TileLang HIP prelude")
    assert "#include <hip/hip_runtime.h>" in source and 'extern "C" __global__' in source
    for header in ("cuda_fp16.h", "cuda_bf16.h", "math_constants.h", "cuda.h"):
        assert f"#include <{header}>" not in source


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kit_kernel_compiles_to_a_gfx90a_code_object(name, needs_hipcc):
    code_object = toolchain.compile_code_object(hip_source(KERNELS[name]()), "gfx90a", name)
    elf = toolchain.device_elf(code_object, "gfx90a")
    assert elf[:4] == b"\x7fELF" and elf[18] == 0xE0  # e_machine EM_AMDGPU


@pytest.mark.parametrize("module", sorted(EXAMPLE_KERNELS))
def test_example_compiles_to_a_gfx90a_code_object(module, needs_hipcc):
    source = hip_source(example_prim_func(module))
    assert toolchain.device_elf(toolchain.compile_code_object(source, "gfx90a", module), "gfx90a")[:4] == b"\x7fELF"


@pytest.mark.parametrize("dtype,instruction", [("float16", "v_mfma_f32_16x16x16f16"),
                                               ("bfloat16", "v_mfma_f32_16x16x16bf16_1k")])
def test_gemm_runs_on_mfma(dtype, instruction, needs_hipcc):
    source = hip_source(kit.tile_gemm(256, 256, 256, bM=64, bN=64, bK=32, dtype=dtype))
    assert "tl_hip_mfma_gemm<64, 64, 32, 128, false, false, " in source
    assert mfma_instructions(source) == {instruction}


def test_example_gemm_runs_on_mfma(needs_hipcc):
    assert mfma_instructions(hip_source(example_prim_func("gemm"))) == {"v_mfma_f32_16x16x16f16"}


def _gemm_calls(source: str) -> int:
    kernel = source[source.index('extern "C" __global__ void'):]
    return sum(line.strip().startswith("tl_hip_mfma_gemm<") for line in kernel.splitlines())


@pytest.mark.parametrize("case,make,target,configs", [
    ("fp32 operands", lambda: kit.tile_gemm(128, 128, 128, dtype="float32"), GFX90A, None),
    ("N not a multiple of 16", lambda: kit.tile_gemm(64, 40, 64, bM=32, bN=40, bK=16), GFX90A, None),
    ("gfx1030 has no MFMA", lambda: kit.tile_gemm(128, 128, 128), {"kind": "rocm", "mcpu": "gfx1030"}, None),
    ("disabled", lambda: kit.tile_gemm(128, 128, 128), GFX90A, {"tl.disable_mfma": True}),
])
def test_other_gemms_take_the_simt_path(case, make, target, configs):
    source = hip_source(make(), target=target, pass_configs=configs)
    assert _gemm_calls(source) == 0, case


def test_qualifying_gemm_is_one_mfma_call():
    assert _gemm_calls(hip_source(kit.tile_gemm(128, 128, 128))) == 1


def test_mfma_gemm_call_and_barriers():
    """One helper call per GEMM, with its shape, block size and flags (transposes, bf16,
    clear), between two barriers."""
    source = hip_source(kit.tile_gemm(128, 128, 128, trans_a=True, trans_b=True))
    lines = [line.strip() for line in source[source.index('extern "C" __global__ void'):].splitlines()]
    calls = [i for i, line in enumerate(lines) if line.startswith("tl_hip_mfma_gemm<")]
    assert len(calls) == 1
    assert lines[calls[0]].startswith("tl_hip_mfma_gemm<32, 32, 16, 128, true, true, false, false>(")
    assert lines[calls[0] - 1] == lines[calls[0] + 1] == "__syncthreads();"


def test_a_while_loop_gets_its_barriers():
    """core's transform/gpu/while_sync.py, as ROCm composes the GPU passes: a barrier before
    each tile's copy (the previous iteration's reads) and one after it, inside the loop."""
    body = hip_source(kit.row_sums())
    body = body[body.index("while (1)"):]
    first, second = (i for i in range(len(body)) if body.startswith("__syncthreads();", i))
    assert body.count("__syncthreads();") == 2
    assert first < body.index("tile_ptr + ((k * 512)") < second < body.index("tile_ptr[")


def test_dialect_wavefront_functions():
    from tilelang.rocm import language as T

    @T.prim_func
    def wave_sum(A: T.Tensor((256,), "float32"), S: T.Tensor((4,), "float32"), M: T.Tensor((4,), "uint64")):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            total = T.alloc_local((1,), "float32")
            total[0] = T.wave_reduce_sum(A[tx])
            T.sync_threads()
            if T.lane_id() == 0:
                S[tx // 64] = total[0] + T.shfl(A[tx], 3) + T.shfl_down(A[tx], 1, 32) + T.shfl_up(A[tx], 1)
                M[tx // 64] = T.ballot(A[tx] > 0)

    source = hip_source(wave_sum)
    for call in ("__shfl_xor(", ", 32, 64)", "__shfl(", "__shfl_down(", "__shfl_up(", "__ballot(", "__lane_id()",
                 "__syncthreads()"):
        assert call in source, call


def test_dialect_refuses_a_width_beyond_the_wavefront():
    from tilelang.rocm import language as T

    with pytest.raises(tilelang.LanguageError, match=r"T.shfl_xor\(..., width=128\): the width is a power of two up "
                                                     r"to the wavefront's 64 lanes"):
        T.shfl_xor(T.float32(1), 1, width=128)


def upstream_warp_kernel():
    import tilelang.language as T

    @T.prim_func
    def warp_ops(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "int32"), M: T.Tensor((256,), "uint64")):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            A[tx] = T.warp_reduce_max(A[tx]) + T.shfl_sync(A[tx], 3) + T.shfl_down(A[tx], 1) + T.shfl_up(A[tx], 2)
            B[tx] = (T.any_sync(tx == 3) + T.all_sync(tx < 300) + T.syncthreads_count(tx < 7)
                     + T.get_lane_idx() * 1000 + T.warp_reduce_bitor(B[tx]) + T.cast(T.shfl_xor(T.int8(1), 1), "int32"))
            M[tx] = T.ballot(tx % 2 == 0) | T.activemask()
            T.sync_warp()

    return warp_ops


def test_upstream_warp_intrinsics_lower_to_hip_functions(needs_hipcc):
    """``import tilelang.language as T``'s warp ops (upstream's spelling): HIP's functions
    without masks over 64 lanes (a 6-step butterfly), a 64-bit ballot, ballot(1) for the
    active lanes, the wave barrier for T.sync_warp; hipcc compiles the result."""
    source = hip_source(upstream_warp_kernel())
    body = source[source.index("__global__"):]
    for call in ("__shfl_xor(", "__shfl(", "__shfl_down(", "__shfl_up(", "__any(", "__all(", "__ballot(",
                 "__syncthreads_count(", "__builtin_amdgcn_wave_barrier()", "__ballot(1)"):
        assert call in body, call
    assert body.count("__shfl_xor(") == 2 * 6 + 1 and ", 32, 64)" in body and "_sync(" not in body
    assert "& 63" in body  # the lane: the thread index modulo 64
    code_object = toolchain.compile_code_object(source, "gfx90a", "warp_ops")
    assert toolchain.device_elf(code_object, "gfx90a")[:4] == b"\x7fELF"


def test_ffs_is_hips_own_and_takes_its_operand_once(needs_hipcc):
    """T.__ffs of a 64-bit ballot and of 32- and 64-bit values: clang's ``__builtin_ffsll`` /
    ``__builtin_ffs`` (core's arithmetic would name the ballot three times and take it three
    times)."""
    import tilelang.language as T

    @T.prim_func
    def first_set(M: T.Tensor((64,), "uint64"), S: T.Tensor((64,), "int32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            S[tx] = T.__ffs(T.ballot(tx >= 7)) + T.__ffs(S[tx]) + T.__ffs(M[tx])

    source = hip_source(first_set)
    body = source[source.index("__global__"):]
    assert body.count("__builtin_ffsll(") == 2 and body.count("__builtin_ffs(") == 1
    assert body.count("__ballot(") == 1
    assert "popcount" not in body
    code_object = toolchain.compile_code_object(source, "gfx90a", "first_set")
    assert toolchain.device_elf(code_object, "gfx90a")[:4] == b"\x7fELF"


def test_warp_matches_are_refused_on_hip():
    import tilelang.language as T

    @T.prim_func
    def match(B: T.Tensor((64,), "uint32")):
        with T.Kernel(1, threads=64):
            B[T.get_thread_binding()] = T.match_any_sync(T.get_thread_binding() % 4)

    with pytest.raises(tilelang.LanguageError, match=r"kernel 'match' uses T.match_any_sync, which HIP does not have"):
        hip_source(match)


def test_atomics_lower_to_hip_functions():
    import tilelang.language as T

    @T.prim_func
    def atomics(A: T.Tensor((64,), "float32"), I: T.Tensor((64,), "int32"), O: T.Tensor((4,), "float32"),
                P: T.Tensor((4,), "int32")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                T.atomic_add(O[0], A[i])
                T.atomic_max(O[1], A[i])
                T.atomic_min(P[0], I[i])
                T.atomic_or(P[1], I[i])
                T.atomic_add(O[2], A[i], memory_order="release")

    source = hip_source(atomics)
    for call in ("atomicAdd(", "tl_hip_atomic_max(", "atomicMin(", "atomicOr(", "tl_hip_atomic_ordered(3, atomicAdd("):
        assert call in source, call


def test_atomic_types_hip_lacks_are_refused():
    import tilelang.language as T

    @T.prim_func
    def half_add(A: T.Tensor((64,), "float16"), O: T.Tensor((1,), "float16")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                T.atomic_add(O[0], A[i])

    with pytest.raises(tilelang.LanguageError, match=r"T.atomic_add on O \(float16\): HIP has atomic adds for "
                                                     r"float32, float64, int32, uint32; use one of those types"):
        hip_source(half_add)


def test_hip_source_is_untouched_by_the_cuda_backends_source_hook():
    """TVM's CUDA printer calls the process-wide tvm_callback_cuda_postproc, which the CUDA
    backend (when installed) registers the first time it generates code."""
    if "cuda" not in tilelang.backend.registered_backends():
        pytest.skip("tilelang-cuda is not installed")
    make = lambda: kit.tile_gemm(128, 128, 128, dtype="float16")
    tilelang.lower(make(), target={"kind": "cuda", "arch": "sm_80"})
    source = hip_source(make())
    assert "TILELANG_CUDA_DEVICE_H_" not in source and "mma.sync" not in source


def test_gfx942_gets_the_mfma_call_too():
    """gfx942 (MI300) has the same 16x16x16 instructions; Debian's hipcc 5.2 (LLVM 15) cannot
    compile for it, so only the source is checked here."""
    assert _gemm_calls(hip_source(kit.tile_gemm(128, 128, 128), target={"kind": "rocm", "mcpu": "gfx942"})) == 1
