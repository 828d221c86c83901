"""Upstream's explicit warp-specialized language on sm_90 (transform/explicit_sync.py),
checked without a GPU: the barriers, TMA boxes and warp roles in the lowered CUDA of each
form of upstream's examples/warp_specialize GEMMs, that nvcc compiles it for sm_90a, and
the errors. The GPU runs against torch are marked `gpu` (at the end)."""

from __future__ import annotations

import dataclasses
import re

import explicit_hopper_kernels as kernels
import numpy as np
import pytest
import tilelang
import tilelang.language as T
from lowered_instructions import lowered_kernel
from tilelang.backend.module import create_backend_context
from tilelang.backend.resolution import execution_specs
from tilelang.cuda import toolchain
from tilelang.engine.lower import lower_with_context as lower_artifact
from tilelang.errors import CompileError

needs_nvcc = pytest.mark.skipif(toolchain.nvcc_path() is None, reason="nvcc is not installed")


def lower(func, arch: str = "sm_90", backend: str = "tvm_ffi", pass_configs=None):
    """The artifact for ``backend``'s spec: tvm_ffi runs the kernel's host code, which
    encodes the tensor maps; cython launches the kernel itself. (The context keeps no
    execution backend object, which needs a GPU; a stand-in marks it as not codegen-only.)"""
    context = create_backend_context({"kind": "cuda", "arch": arch}, execution_backend=None)
    spec = next(s for s in execution_specs(context.module) if s.name == backend)
    context = dataclasses.replace(context, execution_spec=spec, execution_backend=object())
    return lower_artifact(func, context, out_idx=[-1], pass_configs=pass_configs)


ON_MMA_SYNC = {"tl.disable_wgmma": True}


def kernel_body(source: str) -> str:
    return source[source.index('extern "C" __global__'):]


def role(body: str, condition: str) -> str:
    """The statements of the first ``if (<condition>) {`` block of ``body`` (braces balanced)."""
    start = body.index(f"if ({condition}) {{") + len(f"if ({condition}) {{")
    depth, i = 1, start
    while depth:
        depth += {"{": 1, "}": -1}.get(body[i], 0)
        i += 1
    return body[start:i - 1]


PRODUCER_0 = "((int)threadIdx.x) < 128"
ROLE_1 = "128 <= ((int)threadIdx.x)"


@pytest.mark.parametrize("producer,stages", [(0, 0), (1, 2)])
def test_producer_and_consumer_roles_keep_their_barriers_and_boxes(producer, stages):
    """The consumer's GEMM on wgmma: the producer's boxes write A and B in wgmma's
    128-byte swizzle (one 64-column block of A, two of B), the consumer waits on the
    mbarrier and reads them through descriptors, with no barrier of its own."""
    consumer = 1 - producer
    artifact = lower(kernels.copy_gemm_roles(1024, 1024, 1024, producer=producer, consumer=consumer, stages=stages))
    body = kernel_body(artifact.device_source)
    # the block keeps its 256 threads: no producer warp of the automatic pipeline, no cp.async ring
    assert "__launch_bounds__(256)" in body and "tl_cp_async" not in body and "tma_barrier" not in body
    assert "const __grid_constant__ CUtensorMap A_swizzled_map" in body
    # both barriers are slots of one static array of 1 KiB (what the dynamic tiles' alignment needs)
    assert body.count("uint64_t") == 1 and "__shared__ alignas(64) uint64_t barriers_ptr[128];" in body
    # thread 0 initializes each barrier for 128 arrivals, fenced, then the whole block syncs
    assert re.search(r"if \(\(\(int\)threadIdx.x\) == 0\) \{\s+tl_mbarrier_init\(\(&\(barriers_ptr\[0\]\)\), "
                     r"128\);\s+tl_mbarrier_init_fence\(\);\s+\}\s+__syncthreads\(\);", body)
    loop = body[body.index("for (int ko = 0; ko < 16; ++ko) {"):]
    producing = role(loop, PRODUCER_0 if producer == 0 else ROLE_1)
    consuming = role(loop, ROLE_1 if producer == 0 else PRODUCER_0)
    first = 128 * producer  # the producer role's elected thread
    assert "tl_mbarrier_wait((&(barriers_ptr[1])), ((ko + 1) & 1));" in producing
    # the elected thread expects each tile's bytes (128 x 64 halves) and issues its boxes
    # from the swizzled maps; every producer thread then arrives
    assert re.search(rf"if \(\(\(int\)threadIdx.x\) == {first}\) \{{\s+tl_mbarrier_expect_tx_no_arrive\("
                     r"\(&\(barriers_ptr\[0\]\)\), 16384\);\s+tl_check_swizzle_base", producing)
    assert len(re.findall(r"tl_tma_load_2d\(.*?\(&\(A_swizzled_map\)\)\), \(&\(barriers_ptr\[0\]\)\), "
                          r"\(ko \* 64\), \(\(\(int\)blockIdx.y\) \* 128\)\);", producing)) == 1
    assert len(re.findall(r"tl_tma_load_2d\(.*?B_swizzled_map", producing)) == 2
    assert producing.rstrip().endswith("tl_mbarrier_arrive((&(barriers_ptr[0])));")
    assert "wgmma" not in producing and "__syncthreads" not in producing
    # the consumers wait and multiply (8 wgmma: 2 x 64 rows, 4 k steps), wait for them, release
    assert "tl_mbarrier_wait((&(barriers_ptr[0])), (ko & 1));" in consuming
    assert consuming.count("tl_wgmma_m64n128k16_f16_01(") == 8 and "tl_wgmma_wait(0);" in consuming
    assert "barrier_sync" not in consuming and "__syncthreads" not in consuming and "tl_mma" not in consuming
    assert consuming.rstrip().endswith("tl_mbarrier_arrive((&(barriers_ptr[1])));")
    # the host code encodes both maps before the launch
    assert artifact.host_source.count("A_swizzled_map") and artifact.host_source.count("B_swizzled_map")


def test_roles_on_mma_sync_pad_their_tiles_and_sync_before_ldmatrix():
    """With wgmma disabled, the consumer's GEMM runs on mma.sync: the tiles' rows are padded
    (boxes as wide as the padded row) and the consumers sync among themselves alone."""
    body = kernel_body(lower(kernels.copy_gemm_roles(1024, 1024, 1024), pass_configs=ON_MMA_SYNC).device_source)
    loop = body[body.index("for (int ko = 0; ko < 16; ++ko) {"):]
    producing, consuming = role(loop, PRODUCER_0), role(loop, ROLE_1)
    assert "tl_mbarrier_expect_tx_no_arrive((&(barriers_ptr[0])), 18432);" in producing  # A: 128 x (64 + 8)
    assert "tl_mbarrier_expect_tx_no_arrive((&(barriers_ptr[0])), 17408);" in producing  # B: 64 x (128 + 8)
    assert "tl_named_barrier_sync(2, 128);" in consuming and "__syncthreads" not in consuming
    assert "tl_mma_m16n8k16_f16_f32" in consuming and "wgmma" not in consuming


def stored_elements(epilogue: str, threads: range) -> list[int]:
    """The C elements (flat indices, block 0) every thread of ``threads`` stores in
    ``epilogue``: each ``*(half2*)(C_ptr + <index>) = ...`` evaluated as C would."""
    stores = re.findall(r"\*\(half2\*\)\(C_ptr \+ (.*?)\) = ", epilogue)
    assert stores
    found = []
    for t in threads:
        for index in stores:
            expr = index.replace("((int)threadIdx.x)", str(t)).replace("((int)blockIdx.x)", "0")
            expr = expr.replace("((int)blockIdx.y)", "0").replace("/", "//")
            first = eval(expr)  # integer arithmetic from our own generated source
            found += [first, first + 1]
    return found


def test_the_accumulator_spreads_over_the_consumer_warpgroup():
    """C (128 x 128) over the consumer warpgroup's 4 warps (2 x 2 warp tiles of 64 x 64): its
    128 threads store every element of the tile exactly once (a layout over the block's 8
    warps would hold 64 floats a thread and leave half the tile to the producer)."""
    body = kernel_body(lower(kernels.copy_gemm_roles(1024, 1024, 1024)).device_source)
    assert "float C_local_ptr[128];" in body
    epilogue = role(body[body.rindex(f"if ({ROLE_1}) {{"):], ROLE_1)
    found = stored_elements(epilogue, range(128, 256))
    assert sorted(found) == [r * 1024 + c for r in range(128) for c in range(128)]


def test_a_ring_of_stage_tiles_and_barrier_arrays():
    body = kernel_body(lower(kernels.barrier_pipe(1024, 1024, 1024)).device_source)
    assert [int(i) for i in re.findall(r"tl_mbarrier_init\(\(&\(barriers_ptr\[(\d)\]\)\), 128\);", body)] == [0, 1, 2, 3]
    loop = body[body.index("for (int ko"):]
    producing, consuming = role(loop, ROLE_1), role(loop, PRODUCER_0)
    assert "tl_mbarrier_wait((&(barriers_ptr[((ko & 1) + 2)])), (((ko & 3) >> 1) ^ 1));" in producing
    # each stage is a tile of its own, chosen by the stage index: two A and two B tiles, each
    # at its own offset (A in one 64-column box, B in two)
    offsets = re.findall(r"tl_tma_load_2d\(\(&\(\(\(half\*\)buf_dyn_shmem_ptr\)\[(\d+)\]\)\)", producing)
    assert len(offsets) == 6 and len(set(offsets)) == 6
    assert "tl_mbarrier_wait((&(barriers_ptr[(ko & 1)])), ((ko & 3) >> 1));" in consuming
    assert consuming.count("tl_wgmma_commit();") == 2  # one GEMM per stage's tiles
    assert consuming.rstrip().endswith("tl_mbarrier_arrive((&(barriers_ptr[((ko & 1) + 2)])));")


def test_roles_sharing_a_block_copy_are_fenced_by_block_barriers():
    body = kernel_body(lower(kernels.copy_gemm_split(1024, 1024, 1024), pass_configs=ON_MMA_SYNC).device_source)
    loop = body[body.index("for (int ko"):]
    # the block's A copy: complete before either role reads it, and not begun while one still does
    block_copy = loop[:loop.index(f"if ({ROLE_1})")]
    assert block_copy.count("__syncthreads();") == 2 and "A_shared_ptr" in block_copy
    assert "tl_named_barrier_sync(2, 128);" in role(loop, ROLE_1)
    assert "tl_named_barrier_sync(1, 128);" in role(loop, PRODUCER_0)
    # each role's C (128 x 64 over its 128 threads): one register array holds either, since a
    # thread is in one role alone (two would cost every thread both)
    assert re.findall(r"float C_local_g\d_ptr\[\d+\];", body) == ["float C_local_g0_ptr[64];"]


def test_roles_whose_tiles_t_copy_fills_run_wgmma_and_match_numpy():
    """The same kernel on wgmma (the tiles T.copy fills take the swizzled layout): the block's
    copy of A and each role's copy of its half of B are fenced for the async proxy, then
    published by a barrier of their threads, before the role's wgmma reads them. Run as
    lowered (lowered_instructions: wgmma, the swizzle) against numpy."""
    artifact = lower(kernels.copy_gemm_split(256, 256, 256))
    body = kernel_body(artifact.device_source)
    # one 64-register C (the roles share it) and the roles' own state: two blocks an SM (at
    # three, 80 registers, ptxas spilled 1.3 KiB)
    assert "__launch_bounds__(256, 2)" in body and re.findall(r"float C_local_g\d_ptr\[\d+\];", body) == \
        ["float C_local_g0_ptr[64];"]
    loop = body[body.index("for (int ko"):]
    block_copy = loop[:loop.index(f"if ({ROLE_1})")]
    assert re.search(r"tl_fence_proxy_async\(\);\s+__syncthreads\(\);", block_copy)
    for condition, barrier in ((ROLE_1, 2), (PRODUCER_0, 1)):
        consuming = role(loop, condition)
        assert re.search(rf"tl_fence_proxy_async\(\);\s+tl_named_barrier_sync\({barrier}, 128\);\s+"
                         r"tl_wgmma_fence\(\);", consuming)
        assert consuming.count("tl_wgmma_m64n64k16_f16_01(") == 8 and "tl_mma" not in consuming
    rng = np.random.default_rng(0)
    a = rng.integers(-3, 4, (256, 256)).astype(np.float16)
    b = rng.integers(-3, 4, (256, 256)).astype(np.float16)
    c = np.zeros((256, 256), np.float16)
    lowered_kernel(artifact.device_mod)(a, b, c)
    np.testing.assert_array_equal(c.astype(np.float32), a.astype(np.float32) @ b.astype(np.float32))


def test_a_tile_the_kernel_also_reads_itself_keeps_the_roles_on_mma_sync():
    """A plain read of a TMA-filled tile would not follow the swizzled layout: the tiles stay
    as declared and the GEMM on mma.sync."""

    @T.prim_func
    def main(A: T.Tensor((128, 64), "float16"), B: T.Tensor((64, 128), "float16"), C: T.Tensor((128, 128), "float16"),
             D: T.Tensor((64,), "float16")):
        with T.Kernel(1, threads=256):
            A_shared = T.alloc_shared((128, 64), "float16")
            B_shared = T.alloc_shared((64, 128), "float16")
            C_local = T.alloc_fragment((128, 128), "float32")
            ready = T.alloc_barrier(arrive_count=128)
            with T.ws(1):
                T.tma_copy(A[0:128, 0:64], A_shared, barrier=ready)
                T.tma_copy(B[0:64, 0:128], B_shared, barrier=ready)
                T.barrier_arrive(ready)
            with T.ws(0):
                T.barrier_wait(ready, 0)
                T.clear(C_local)
                T.gemm(A_shared, B_shared, C_local)
                T.copy(C_local, C)
                for i in T.Parallel(64):
                    D[i] = A_shared[0, i]

    body = kernel_body(lower(main).device_source)
    assert "tl_mma_m16n8k16_f16_f32(" in body and "wgmma" not in body


def warp_group_kernel():
    @T.prim_func
    def main(A: T.Tensor((256,), "int32")):
        with T.Kernel(1, threads=256):
            with T.ws(0):
                T.set_max_nreg(240, 1)
            with T.ws(1):
                T.dec_max_nreg(40)
            for i in T.Parallel(256):
                A[i] = T.get_warp_group_idx()

    return main


def test_register_budgets_and_the_warp_group_index():
    from tilelang.cuda.toolchain import arch_for_source

    source = lower(warp_group_kernel()).device_source
    body = kernel_body(source)
    assert "tl_setmaxnreg_inc(240);" in role(body, PRODUCER_0)
    assert "tl_setmaxnreg_dec(40);" in role(body, ROLE_1)
    assert "(((int)threadIdx.x) >> 7)" in body
    assert arch_for_source(source, "sm_90") == "sm_90a"  # setmaxnreg exists on sm_90a alone


def test_explicit_kernels_need_sm_90():
    with pytest.raises(CompileError, match=r"kernel 'main' uses T\.alloc_barrier, .*T\.mbarrier_wait_parity.*: mbarrier phases, TMA "
                                           r"boxes and warpgroup roles need sm_90 \(Hopper\) or newer, the target is sm_80"):
        lower(kernels.copy_gemm_roles(256, 256, 256), arch="sm_80")


def two_kernels_one_with_a_barrier():
    @T.prim_func
    def main(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            bar = T.alloc_barrier([128])
            tx = T.get_thread_binding()
            B[tx] = A[tx]
            T.mbarrier_arrive(bar[0])
            T.mbarrier_wait_parity(bar[0], 0)
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            B[tx] = B[tx] * 2.0

    return main


def test_barriers_in_a_function_of_two_kernels_say_so():
    """(They said the block was not one-dimensional of a constant size, which it was.)"""
    with pytest.raises(CompileError, match=r"kernel 'main': barriers, T\.tma_copy and T\.ws are lowered for a function "
                                           r"of one T\.Kernel; this one launches 2: put the kernel that uses them in a "
                                           r"@T\.prim_func of its own"):
        lower(two_kernels_one_with_a_barrier())


def test_tma_copy_needs_host_encoded_tensor_maps():
    with pytest.raises(CompileError, match=r"T\.tma_copy needs TMA tensor maps, which the kernel's host code encodes"
                                           r".* compile with execution_backend='tvm_ffi'"):
        lower(kernels.copy_gemm_roles(256, 256, 256), backend="cython")


def test_a_gemm_outside_the_roles_of_a_warp_specialized_kernel_is_refused():
    @T.prim_func
    def main(A: T.Tensor((128, 64), "float16"), B: T.Tensor((64, 128), "float16"), C: T.Tensor((128, 128), "float16")):
        with T.Kernel(1, threads=256):
            A_shared = T.alloc_shared((128, 64), "float16")
            B_shared = T.alloc_shared((64, 128), "float16")
            C_local = T.alloc_fragment((128, 128), "float32")
            T.copy(A, A_shared)
            T.copy(B, B_shared)
            with T.ws(1):
                T.clear(C_local)
            T.gemm(A_shared, B_shared, C_local)
            with T.ws(1):
                T.copy(C_local, C)

    with pytest.raises(CompileError, match=r"a T\.gemm outside every T\.ws block of a warp-specialized kernel"):
        lower(main)


@pytest.mark.parametrize("shape,message", [
    ((128, 300), r"a box row is 300 float16 elements; TMA needs .* at most 256 elements"),
    ((128, 4), r"a box row is 4 float16 elements; TMA needs .* a row of a multiple of 16 bytes"),
])
def test_tma_copy_refuses_tiles_no_box_can_write(shape, message):
    @T.prim_func
    def main(A: T.Tensor((512, 512), "float16"), B: T.Tensor(shape, "float16")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared(shape, "float16")
            bar = T.alloc_barrier(1)
            T.tma_copy(A[0, 0], S, barrier=bar)
            T.barrier_arrive(bar)
            T.barrier_wait(bar, 0)
            T.copy(S, B)

    with pytest.raises(CompileError, match=message):
        lower(main)


FORMS = {
    "copy_0_gemm_1": lambda: kernels.copy_gemm_roles(1024, 1024, 1024),
    "copy_1_gemm_0": lambda: kernels.copy_gemm_roles(1024, 1024, 1024, producer=1, consumer=0, stages=2),
    "barrierpipe_stage2": lambda: kernels.barrier_pipe(1024, 1024, 1024),
    "copy_gemm_0_1": lambda: kernels.copy_gemm_split(1024, 1024, 1024),
    "warp_group_idx": warp_group_kernel,
}


@needs_nvcc
@pytest.mark.parametrize("name", sorted(FORMS))
def test_nvcc_compiles_every_form_for_sm_90a(name):
    source = lower(FORMS[name]()).device_source
    assert toolchain._compile_nvcc(source, "sm_90a", name)[:4] == b"\x7fELF"


# -- on the GPU (run on the H200) -------------------------------------------------------------
def sm90_torch():
    """torch, on an sm_90 GPU (else the test is skipped)."""
    torch = pytest.importorskip("torch")
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("needs an sm_90 GPU")
    return torch


@pytest.mark.gpu
@pytest.mark.parametrize("form", ["copy_0_gemm_1", "copy_1_gemm_0", "barrierpipe_stage2", "copy_gemm_0_1"])
@pytest.mark.parametrize("mnk", [(1024, 1024, 1024), (1000, 1000, 1000)])
def test_upstream_forms_match_torch(form, mnk):
    torch = sm90_torch()
    build = {"copy_0_gemm_1": kernels.copy_gemm_roles,
             "copy_1_gemm_0": lambda *s: kernels.copy_gemm_roles(*s, producer=1, consumer=0, stages=2),
             "barrierpipe_stage2": kernels.barrier_pipe, "copy_gemm_0_1": kernels.copy_gemm_split}[form]
    kernel = tilelang.compile(build(*mnk), out_idx=[-1], target="cuda", execution_backend="tvm_ffi")
    M, N, K = mnk
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(kernel(a, b), a @ b, rtol=1e-2, atol=1e-2)


def producer_branch_kernel():
    """upstream's minference kernel in small: the producer is the branch `tid >= 128` (no
    T.ws), its T.tma_copy loads Q and two stages of K (a 3-d shared ring), and the
    consumers compute Q K^T from them."""

    @T.prim_func
    def main(Q: T.Tensor((64, 64), "float16"), K: T.Tensor((128, 64), "float16"), O: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=256):
            q_s = T.alloc_shared((64, 64), "float16")
            k_s = T.alloc_shared((2, 64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            bars = T.alloc_barrier([128] * 3)
            tid = T.get_thread_binding()
            if tid >= 128:
                T.tma_copy(Q[0:64, :], q_s, barrier=bars[2])
                T.mbarrier_arrive(mbarrier=bars[2])
                for bi in T.serial(2):
                    T.tma_copy(K[bi * 64 : bi * 64 + 64, :], k_s[bi, :, :], barrier=bars[bi])
                    T.mbarrier_arrive(mbarrier=bars[bi])
            else:
                T.fill(acc, 0)
                T.mbarrier_wait_parity(mbarrier=bars[2], parity=0)
                for bi in T.serial(2):
                    T.mbarrier_wait_parity(mbarrier=bars[bi], parity=0)
                    T.gemm(q_s, k_s[bi, :, :], acc, transpose_B=True)
                T.copy(acc, O)

    return main


def test_a_tma_copy_in_a_branch_of_part_of_the_block_is_issued_by_its_first_thread():
    """Elected as thread 0 of the block, a copy inside `if tid >= 128` was never issued
    (TVM's simplifier dropped the impossible `tid == 0` there) and the consumers read
    shared memory nothing had written."""
    body = kernel_body(lower(producer_branch_kernel()).device_source)
    producer = role(body, "128 <= ((int)threadIdx.x)")
    assert producer.count("if (((int)threadIdx.x) == 128) {") == 3, producer
    assert producer.count("tl_tma_load_2d(") == 3 and "threadIdx.x) == 0" not in producer, producer


@needs_nvcc
def test_nvcc_compiles_the_producer_branch_kernel():
    source = lower(producer_branch_kernel()).device_source
    assert toolchain._compile_nvcc(source, "sm_90a", "producer_branch")[:4] == b"\x7fELF"


@pytest.mark.gpu
def test_a_producer_branch_matches_torch():
    torch = sm90_torch()
    q = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    k = torch.randn(128, 64, device="cuda", dtype=torch.float16)
    ref = q.float() @ k[:64].float().T + q.float() @ k[64:].float().T
    kernel = tilelang.compile(producer_branch_kernel(), out_idx=[-1], target="cuda", execution_backend="tvm_ffi")
    for _ in range(5):
        torch.testing.assert_close(kernel(q, k), ref, rtol=1e-2, atol=1e-2)


# -- FlashMLA's roles without T.ws: slices on tensor cores, T.ptx_cp_async, wide TMA rows -------------
def test_a_tma_copy_of_rows_wider_than_a_box_lands_as_whole_rows():
    """TMA box dimensions stop at 256 elements. A 576-element row is read through a map
    that sees the last axis as 3 pieces of 192 (a box of 192 x 3 x 64 lands in the order
    of a dense 64 x 576 tile): one more dimension, the same bytes."""
    body = kernel_body(lower(kernels.wide_row_tma()).device_source)
    assert "tl_mbarrier_expect_tx_no_arrive((&(barriers_ptr[0])), 73728);" in body  # 64 x 576 x 2 bytes
    assert "tl_tma_load_4d((&(a_s_ptr[0])), ((unsigned long long)(&(A_tensor_map))), (&(barriers_ptr[0])), " \
           "0, 0, 0, ((int)blockIdx.x));" in body


def test_fence_proxy_async_is_the_fence_before_the_arrival():
    """Upstream's FlashMLA consumer stores P into shared memory, fences the async proxy and
    arrives on the barrier the other consumer waits on before its wgmma reads P."""

    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=256):
            S = T.alloc_shared((64, 64), "float16")
            ready = T.alloc_barrier(128)
            with T.ws(0):
                T.copy(A, S)
                T.fence_proxy_async()
                T.barrier_arrive(ready)
            with T.ws(1):
                T.barrier_wait(ready, 0)
                T.copy(S, B)

    body = kernel_body(lower(main).device_source)
    assert re.search(r"tl_fence_proxy_async\(\);\s+tl_mbarrier_arrive\(", body), body


def test_flashmla_roles_run_their_gemms_on_tensor_cores():
    """Each consumer branch is a warp role of 4 warps: its GEMMs, on slices of Q and of a
    stage of the KV ring, are mma.sync; the producer issues its 16-byte copies as cp.async
    and T.cp_async_barrier_noinc arrives once they land (async_copies.py); the six barrier
    arrays are slots of one."""
    body = kernel_body(lower(kernels.flashmla_roles()).device_source)
    consumer_0 = role(body, "((int)threadIdx.x) < 128")
    assert consumer_0.count("tl_mma_m16n8k16_f16_f32(") >= 2 and "tl_wgmma" not in consumer_0
    second = role(body, "((int)threadIdx.x) < 256")
    assert second.count("tl_mma_m16n8k16_f16_f32(") >= 1
    # the producer: `elif tx >= 256`, which the simplifier made the else of `tx < 256`
    after = body[body.index(second) + len(second):]
    assert after.startswith("} else {")
    producer = role("if (else) {" + after[len("} else {"):], "else")
    assert "tl_cp_async_16(" in producer and "*(uint4*)(" not in producer and "tl_mma" not in producer
    assert producer.index("tl_cp_async_16(") < producer.index("tl_cp_async_mbarrier_arrive(") and \
        "tl_mbarrier_arrive(" not in producer
    assert body.count("uint64_t") == 1 and "__shared__ alignas(64) uint64_t barriers_ptr[128];" in body


@needs_nvcc
@pytest.mark.parametrize("build", [kernels.flashmla_roles, kernels.wide_row_tma, kernels.column_slice_tma])
def test_nvcc_compiles_flashmla_forms(build):
    source = lower(build()).device_source
    assert toolchain._compile_nvcc(source, "sm_90a", build.__name__)[:4] == b"\x7fELF"


@pytest.mark.gpu
def test_wide_row_tma_matches_torch():
    torch = sm90_torch()
    kernel = tilelang.compile(kernels.wide_row_tma(), target="cuda", execution_backend="tvm_ffi")
    a = torch.randn(2, 64, 576, device="cuda", dtype=torch.bfloat16)
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.testing.assert_close(b, a, rtol=0, atol=0)


@pytest.mark.gpu
def test_flashmla_roles_match_torch():
    torch = sm90_torch()
    batch, heads, kv_len, dim, pe = 2, 64, 256, 128, 64
    kernel = tilelang.compile(kernels.flashmla_roles(batch, heads, kv_len, dim, pe), target="cuda",
                              execution_backend="tvm_ffi")
    q, q_pe = (torch.randn(batch, heads, d, device="cuda", dtype=torch.float16) for d in (dim, pe))
    kv, k_pe = (torch.randn(batch, kv_len, d, device="cuda", dtype=torch.float16) for d in (dim, pe))
    scores = (torch.cat([q, q_pe], -1).float() @ torch.cat([kv, k_pe], -1).float().transpose(1, 2))
    want = torch.softmax(scores * (dim + pe) ** -0.5, -1) @ kv.float()
    for _ in range(5):
        out = torch.zeros(batch, heads, dim, device="cuda")
        kernel(q, q_pe, kv, k_pe, out)
        torch.testing.assert_close(out, want, rtol=2e-2, atol=2e-2)


def copy_then_read_kernel(read_back: bool):
    """A producer role copies a tile with T.ptx_cp_async and arrives with
    T.cp_async_barrier_noinc; the consumer role waits and stores the tile. With
    ``read_back`` the producer also reads its own copy before arriving."""

    @T.prim_func
    def main(A: T.Tensor((16, 64), "float16"), B: T.Tensor((16, 64), "float16"), D: T.Tensor((128,), "float16")):
        with T.Kernel(1, threads=256):
            s = T.alloc_shared((16, 64), "float16")
            ready = T.alloc_barrier(arrive_count=128)
            tx = T.get_thread_binding()
            if tx >= 128:
                T.ptx_cp_async(T.access_ptr(s[(tx - 128) // 8, (tx - 128) % 8 * 8], "w", 8),
                               T.access_ptr(A[(tx - 128) // 8, (tx - 128) % 8 * 8], "r", 8), 8)
                if read_back:
                    D[tx - 128] = s[(tx - 128) // 8, (tx - 128) % 8 * 8]
                T.cp_async_barrier_noinc(ready)
            else:
                T.barrier_wait(ready, 0)
                for j in T.serial(8):
                    B[tx // 8, tx % 8 * 8 + j] = s[tx // 8, tx % 8 * 8 + j]

    return main


@pytest.mark.parametrize("read_back", [False, True])
def test_cp_async_before_a_noinc_arrival_is_issued_asynchronously_unless_the_thread_reads_it(read_back):
    body = kernel_body(lower(copy_then_read_kernel(read_back)).device_source)
    producer = body[body.index("if (128 <= ((int)threadIdx.x)) {"):body.index("} else {")]
    assert "tl_cp_async_mbarrier_arrive(" in producer
    if read_back:  # the thread would read its copy before it lands: a synchronous copy
        assert "tl_cp_async_16(" not in producer and "*(uint4*)(" in producer
    else:
        assert "tl_cp_async_16(" in producer and "*(uint4*)(" not in producer


@pytest.mark.gpu
def test_cp_async_with_a_noinc_arrival_on_the_gpu():
    torch = sm90_torch()
    kernel = tilelang.compile(copy_then_read_kernel(False), target="cuda", execution_backend="tvm_ffi")
    a = torch.randn(16, 64, device="cuda", dtype=torch.float16)
    for _ in range(20):
        b, d = torch.zeros_like(a), torch.zeros(128, device="cuda", dtype=torch.float16)
        kernel(a, b, d)
        torch.testing.assert_close(b, a, rtol=0, atol=0)


def test_a_role_reading_a_slice_of_a_copied_tile_stays_on_mma_sync():
    """A GEMM that reads a slice of a tile T.copy fills keeps the tile as declared (a slice
    is no whole tile a wgmma descriptor reads): the role's GEMM stays on mma.sync."""

    @T.prim_func
    def main(A: T.Tensor((128, 128), "float16"), B: T.Tensor((64, 128), "float16"), C: T.Tensor((128, 128), "float16")):
        with T.Kernel(1, threads=256):
            A_shared = T.alloc_shared((128, 128), "float16")
            B_shared = T.alloc_shared((64, 128), "float16")
            C_local = T.alloc_fragment((128, 128), "float32")
            T.copy(A, A_shared)
            T.copy(B, B_shared)
            with T.ws(0):
                T.clear(C_local)
                T.gemm(A_shared[:, 0:64], B_shared, C_local)
                T.copy(C_local, C)

    body = kernel_body(lower(main).device_source)
    assert "tl_mma_m16n8k16_f16_f32(" in body and "wgmma" not in body
