"""CUDA source generation without a GPU: what the pipeline emits, and that nvcc accepts it."""

from __future__ import annotations

import pytest
import tilelang
from tilelang.cuda import toolchain
from tilelang.testing.kernels import (
    elementwise_add,
    rms_norm_rows,
    row_softmax_sum,
    saxpy,
    tiled_matmul,
)

SM90 = {"kind": "cuda", "arch": "sm_90"}

KERNELS = {
    "add_f32": lambda: elementwise_add(1024, 256),
    "add_f16": lambda: elementwise_add(1024, 256, dtype="float16"),
    "add_bf16": lambda: elementwise_add(512, 128, dtype="bfloat16"),
    "add_odd": lambda: elementwise_add(100, 17),
    "softmax_rows_symbolic": lambda: row_softmax_sum(64),
    "tiled_matmul": lambda: tiled_matmul(128, 128, 64),
    "saxpy_scalar": lambda: saxpy(1000),
    "rms_norm_one_row": lambda: rms_norm_rows(64, 256, blk_m=1),
}


def lower(name: str):
    return tilelang.lower(KERNELS[name](), target=SM90, out_idx=[-1] if name != "saxpy_scalar" else None)


@pytest.mark.parametrize("fp8", ["float8_e4m3fn", "float8_e5m2"])
def test_fp8_tensors_lower_to_cuda_fp8_types(fp8):
    import tilelang.language as T

    @T.prim_func
    def cast(X: T.Tensor((64, 128), "float32"), Y: T.Tensor((64, 128), fp8)):
        with T.Kernel(4, threads=128) as bx:
            for i, j in T.Parallel(16, 128):
                Y[bx * 16 + i, j] = X[bx * 16 + i, j].astype(fp8)

    source = tilelang.lower(cast, target=SM90, out_idx=[1]).device_source
    assert ("__nv_fp8_e4m3" if fp8.endswith("e4m3fn") else "__nv_fp8_e5m2") in source
    if toolchain.nvcc_path() is not None:
        assert toolchain._compile_nvcc(source, "sm_90", f"cast_{fp8}")[:4] == b"\x7fELF"


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64", "float8_e5m2"])
def test_infinity_of_every_type_that_has_one_compiles(dtype):
    import tilelang.language as T

    @T.prim_func
    def fill_inf(A: T.Tensor((32,), dtype)):
        with T.Kernel(1, threads=32):
            T.fill(A, T.infinity(dtype))

    source = tilelang.lower(fill_inf, target=SM90).device_source
    store = next(line for line in source.splitlines() if "A_ptr[" in line)
    if dtype.startswith("float8"):  # the encoding: CUDA's conversion would saturate to 57344
        assert "(uchar)124;" in source and "(*(__nv_fp8_e5m2 *)(&(v_)))" in store
    else:
        assert "inf" in store.lower() or "CUDART_INF" in store
    if toolchain.nvcc_path() is not None:
        assert toolchain._compile_nvcc(source, "sm_90", f"inf_{dtype}")[:4] == b"\x7fELF"


def test_min_blocks_per_sm_becomes_the_second_launch_bound():
    import tilelang.language as T

    @T.prim_func
    def add_one(A: T.Tensor((128, 128), "float32"), C: T.Tensor((128, 128), "float32")):
        with T.Kernel(128, threads=128) as bx:
            T.annotate_min_blocks_per_sm(2)
            for i in T.serial(128):
                C[bx, i] = A[bx, i] + 1.0

    source = tilelang.lower(add_one, target=SM90).device_source
    assert "__launch_bounds__(128, 2) add_one_kernel" in source
    if toolchain.nvcc_path() is not None:
        assert toolchain._compile_nvcc(source, "sm_90", "min_blocks")[:4] == b"\x7fELF"


@pytest.mark.parametrize("inside_kernel", [False, True])
def test_tensors_that_may_overlap_are_not_restrict(inside_kernel):
    """upstream's T.annotate_restrict_buffers(x, y): x and y may be overlapping slices of one
    tensor, so the kernel's pointers lose __restrict__ (before T.Kernel, as upstream's
    docstring places it, or inside); without it they keep it."""
    import tilelang.language as T
    from tilelang.errors import LanguageError

    def shift(annotate):
        @T.prim_func
        def main(x: T.Tensor((64,), T.float32), y: T.Tensor((64,), T.float32)):
            if annotate and not inside_kernel:
                T.annotate_restrict_buffers(x, y)
            with T.Kernel(64, threads=32) as pid:
                if annotate and inside_kernel:
                    T.annotate_restrict_buffers(x, y)
                y[pid] = x[pid] + 1.0

        return tilelang.lower(main, target=SM90).device_source

    assert "main_kernel(float* x_ptr, float* y_ptr)" in shift(True)
    assert "main_kernel(float* __restrict__ x_ptr, float* __restrict__ y_ptr)" in shift(False)
    with pytest.raises(LanguageError, match=r"T.annotate_restrict_buffers: 's' is not a tensor parameter"):
        @T.prim_func
        def shared(x: T.Tensor((64,), T.float32)):
            with T.Kernel(1, threads=32):
                s = T.alloc_shared((64,), T.float32)
                T.annotate_restrict_buffers(x, s)


def test_one_row_fragments_get_shared_memory_they_can_share():
    # blk_m=1: the row's sum is a 4-byte shared buffer, which TVM's shared-memory merging
    # cannot place (an internal check) unless it is widened first
    source = lower("rms_norm_one_row").device_source
    assert "extern __shared__" in source and "rsqrtf" in source


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_every_kernel_generates_cuda_with_launch_metadata(name):
    artifact = lower(name)
    assert 'extern "C" __global__' in artifact.device_source
    assert artifact.target_backend == "cuda" and len(artifact.launches) == 1
    launch = artifact.launches[0]
    assert launch.block == ("128", "1", "1") or name == "saxpy_scalar"
    assert all(a.startswith("param:") for a, t in zip(launch.args, launch.arg_types) if t == "handle")


@pytest.mark.parametrize("name,vector", [("add_f32", "float4"), ("add_f16", "uint4"), ("add_bf16", "uint4")])
def test_parallel_loops_become_coalesced_vector_accesses(name, vector):
    artifact = lower(name)
    assert f"*({vector}*)(A_ptr" in artifact.device_source
    assert artifact.min_alignment == 16


def test_unaligned_rows_stay_scalar():
    artifact = lower("add_odd")  # rows of 17 floats: no 16-byte alignment to rely on
    assert "float4" not in artifact.device_source and artifact.min_alignment == 0


def test_shared_tiles_get_barriers_and_dynamic_shared_memory():
    artifact = lower("tiled_matmul")
    assert artifact.device_source.count("__syncthreads()") >= 2
    assert artifact.launches[0].dynamic_smem == str((32 * 16 + 16 * 32) * 4)


def test_symbolic_grid_and_scalar_arguments_in_launch_metadata():
    launch = lower("softmax_rows_symbolic").launches[0]
    assert launch.grid == ("((M + 15) // 16)", "1", "1")
    assert launch.args == ("param:0", "param:2", "M", "scale")
    assert launch.arg_types == ("handle", "handle", "int32", "float32")


def test_cuda_dialect_extensions_reach_the_source():
    from tilelang.cuda import language as T

    @T.prim_func
    def warp_sum(A: T.Tensor((1024,), "float32"), total: T.Tensor((1,), "float32")):
        with T.Kernel(8, threads=128) as bx:
            tx = T.get_thread_binding()
            v = T.warp_reduce_sum(A[bx * 128 + tx])
            if tx % 32 == 0:
                T.atomic_add(total[0], v)

    source = tilelang.lower(warp_sum, target=SM90).device_source
    assert "__shfl_xor_sync" in source and "atomicAdd(" in source


def test_parallel_outside_a_kernel_is_refused_with_a_fix():
    import tilelang.language as T

    @T.prim_func
    def host_loop(A: T.Tensor((8,), "float32")):
        for i in T.Parallel(8):
            A[i] = 0.0

    with pytest.raises(tilelang.LanguageError, match=r"T.Parallel outside a T.Kernel frame cannot run on a GPU"):
        tilelang.lower(host_loop, target=SM90)


@pytest.mark.skipif(toolchain.nvcc_path() is None, reason="nvcc is not installed")
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_nvcc_compiles_the_generated_source(name):
    cubin = toolchain._compile_nvcc(lower(name).device_source, "sm_90", name)
    assert cubin[:4] == b"\x7fELF"


def test_two_dimensional_thread_blocks_and_symbolic_parallel_extents():
    import tilelang.language as T

    N = T.symbolic("N")

    @T.prim_func
    def scale_rows(A: T.Tensor((64, N), "float32"), B: T.Tensor((64, N), "float32")):
        with T.Kernel(4, threads=(32, 4)) as bx:
            for i, j in T.Parallel(16, N):  # a symbolic tile: guarded, not vectorized
                B[bx * 16 + i, j] = A[bx * 16 + i, j] * 2.0

    artifact = tilelang.lower(scale_rows, target=SM90)
    source = artifact.device_source
    assert "threadIdx.y" in source and "float4" not in source
    assert artifact.launches[0].block == ("32", "4", "1")
    if toolchain.nvcc_path() is not None:
        assert toolchain._compile_nvcc(source, "sm_90", "scale_rows")[:4] == b"\x7fELF"


def producer_consumer_pair():
    """B = A + 1 by a kernel that lets the next start early (T.pdl_trigger), C = 2 B by one
    that waits for it (T.pdl_sync)."""
    import tilelang.language as T

    @T.prim_func
    def pair(A: T.Tensor((1024,), "float32"), B: T.Tensor((1024,), "float32"), C: T.Tensor((1024,), "float32")):
        with T.Kernel(4, threads=256) as bx:
            for i in T.Parallel(256):
                B[bx * 256 + i] = A[bx * 256 + i] + 1.0
            T.pdl_trigger()
        with T.Kernel(4, threads=256) as bx2:
            T.pdl_sync()
            for i in T.Parallel(256):
                C[bx2 * 256 + i] = B[bx2 * 256 + i] * 2.0

    return pair


def test_programmatic_dependent_launch_instructions():
    """T.pdl_trigger / T.pdl_sync: griddepcontrol on sm_90 (nothing on older GPUs, which
    have no overlapping launch); the waiting kernel's pointers lose __restrict__."""
    source = tilelang.lower(producer_consumer_pair(), target=SM90).device_source
    assert "griddepcontrol.launch_dependents" in source and "griddepcontrol.wait" in source
    assert "pair_kernel(float* __restrict__ A_ptr, float* __restrict__ B_ptr) {" in source
    assert "pair_kernel_1(float* B_ptr, float* C_ptr) {" in source
    if toolchain.nvcc_path() is not None:
        for arch in ("sm_90", "sm_80"):
            assert toolchain._compile_nvcc(source, arch, f"pdl_{arch}")[:4] == b"\x7fELF"


def grid_sync_kernel(n: int = 1024, block: int = 64):
    """Upstream's test_tilelang_language_cooperative kernel: A[i] = i, then (after every block
    wrote) A[i] += A[n - 1 - i], so every element ends n - 1."""
    import tilelang.language as T

    @T.prim_func
    def kernel(A: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=128) as bx:
            A_local = T.alloc_fragment((block,), "float32")
            n_idx = bx * block
            for i in T.Parallel(block):
                A[n_idx + i] = n_idx + i
            T.sync_grid()
            for i in T.Parallel(block):
                A_local[i] = A[n - n_idx - i - 1]
                T.sync_grid()
                A[n_idx + i] = A[n_idx + i] + A_local[i]

    return kernel


def test_sync_grid_is_cooperative_groups_grid_barrier_and_a_cooperative_launch():
    artifact = tilelang.lower(grid_sync_kernel(), target=SM90)
    source = artifact.device_source
    assert source.startswith("#include <cooperative_groups.h>\n")
    assert "cooperative_groups::this_grid().sync()" in source  # upstream's test reads this
    assert source.count("tl_sync_grid();") == 2
    assert [launch.cooperative for launch in artifact.launches] == [True]
    (device,) = artifact.device_mod.functions.values()
    assert list(device.attrs["tirx.kernel_launch_params"]) == ["blockIdx.x", "threadIdx.x",
                                                               "tirx.use_cooperative_launch"]
    if toolchain.nvcc_path() is not None:  # grid.sync() needs no relocatable device code
        assert toolchain._compile_nvcc(source, "sm_90", "grid_sync")[:4] == b"\x7fELF"
    plain = tilelang.lower(producer_consumer_pair(), target=SM90)
    assert not any(launch.cooperative for launch in plain.launches)
    assert "cooperative_groups" not in plain.device_source


def test_an_extern_call_made_for_its_effect_is_a_plain_call():
    """Upstream's bitnet decode calls ``T.call_extern("handle", "decode_i2u_to_i8s", ...)``
    of a ``void`` device function; TVM printed ``((void*)decode_i2u_to_i8s(...))``, which
    nvcc refused ("invalid type conversion")."""
    import tilelang.language as T

    helper = """
template <typename T1, typename T2>
__device__ void twice(T1 *a, T2 *b) { for (int i = 0; i < 4; ++i) b[i] = a[i] * 2; }
"""

    @T.prim_func
    def main(A: T.Tensor((128, 4), "int8"), B: T.Tensor((128, 4), "int8")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            a = T.alloc_local((4,), "int8")
            b = T.alloc_local((4,), "int8")
            T.import_source(helper)
            for i in T.serial(4):
                a[i] = A[tx, i]
            T.call_extern("handle", "twice", T.access_ptr(a, "r"), T.access_ptr(b, "w"))
            for i in T.serial(4):
                B[tx, i] = b[i]

    source = tilelang.lower(main, target=SM90).device_source
    assert "  twice((&(a_ptr[0])), (&(b_ptr[0])));" in source and "(void*)twice" not in source
    if toolchain.nvcc_path() is not None:
        assert toolchain._compile_nvcc(source, "sm_90", "void_extern")[:4] == b"\x7fELF"
