"""What a kernel says about its device code beyond tiles, as upstream TileLang spells it:
block and named barriers (T.sync_threads, tl.disable_thread_storage_sync), T.thread_binding
of the kernel's own thread index, and T.import_source. CUDA lowering is checked on the
generated source (no GPU needed); the C target runs against numpy; the GPU-marked test
compares with torch."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang import LanguageError

SM90 = {"kind": "cuda", "arch": "sm_90"}


def lower_sm90(func, **pass_configs) -> str:
    """The CUDA source of ``func`` for sm_90 (skipped where tilelang-cuda is not installed)."""
    pytest.importorskip("tilelang.cuda")
    return tilelang.lower(func, target=SM90, pass_configs=pass_configs or None).device_source


# -- T.sync_threads --------------------------------------------------------------------------
def reversal_kernel(barrier: bool):
    """Each thread reads the element another thread wrote to shared memory: with or
    without the kernel's own T.sync_threads() between."""
    @T.prim_func
    def main(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as _:
            tx = T.get_thread_binding()
            s = T.alloc_shared((128,), "float32")
            s[tx] = A[tx]
            if barrier:
                T.sync_threads()
            B[tx] = s[127 - tx]

    return main


def test_sync_threads_is_a_block_barrier_on_cuda():
    source = lower_sm90(reversal_kernel(barrier=True), **{"tl.disable_thread_storage_sync": True})
    assert source.count("__syncthreads();") == 1


def row_normalize():
    """A row reduction whose destination and partials this compiler stages through shared
    memory (upstream holds them in registers, so its tests turn the barriers off for such
    kernels); ``x_frag`` stays in registers, its rows reduced where they lie."""
    @T.prim_func
    def main(x: T.Tensor((2, 512), "float32"), out: T.Tensor((2, 512), "float32")):
        with T.Kernel(1, threads=128):
            x_frag = T.alloc_fragment((2, 512), "float32")
            sums = T.alloc_fragment((2,), "float32")
            for i, j in T.Parallel(2, 512):
                x_frag[i, j] = x[i, j]
            T.reduce_sum(x_frag, sums, dim=1)
            for i, j in T.Parallel(2, 512):
                out[i, j] = x_frag[i, j] / sums[i]

    return main


def test_the_compilers_own_shared_buffers_keep_their_barriers():
    """tl.disable_thread_storage_sync leaves the kernel's own shared tiles to the kernel
    (above); the fragments the compiler placed in shared memory and the block reduction's
    partials keep the barriers they need, with a warning naming them: without, the kernel
    raced (upstream's partial-reduce tests got wrong values on the H200)."""
    with pytest.warns(UserWarning, match=r"kernel 'main': tl.disable_thread_storage_sync is not applied: the "
                                         r"compiler placed row_partials\d+, sums in shared memory"):
        source = lower_sm90(row_normalize(), **{"tl.disable_thread_storage_sync": True})
    assert source.count("__syncthreads();") == lower_sm90(row_normalize()).count("__syncthreads();") == 2


def named_barrier_kernel(*barrier):
    """Upstream's deepseek_v32 top-k shape: 64 of 128 threads meet at a named barrier while
    they pass values through shared memory, inside a condition on the thread."""
    @T.prim_func
    def main(A: T.Tensor((128,), "int32"), B: T.Tensor((128,), "int32")):
        with T.Kernel(1, threads=128) as _:
            tx = T.get_thread_binding()
            s = T.alloc_shared((65,), "int32")
            v = T.alloc_var(T.int32)
            if tx < 64:
                s[tx] = A[tx]
                for _i in T.serial(4):
                    T.sync_threads(*barrier)
                    v = s[tx] + s[tx + 1]
                    T.sync_threads(*barrier)
                    s[tx] = v
            T.sync_threads()
            B[tx] = s[tx % 64]

    return main


def test_named_barriers_are_bar_sync_on_cuda_and_the_kernel_places_its_own_barriers():
    own_barriers = {"tl.disable_thread_storage_sync": True}
    source = lower_sm90(named_barrier_kernel(3, 64), **own_barriers)
    body = source[source.index("if (((int)threadIdx.x) < 64) {"):]
    inner = body[:body.index("\n  }\n")]  # the condition's block
    assert inner.count("tl_named_barrier_sync(3, 64);") == 2 and "__syncthreads" not in inner
    # without a count, every thread of the block
    assert "tl_named_barrier_sync(5, 128);" in lower_sm90(named_barrier_kernel(5), **own_barriers)


def test_named_barriers_of_a_branchs_threads_run_on_the_cpu():
    """The CPU backend runs a named barrier over exactly its branch's threads as a phase
    boundary of those threads (cpu/transform/barrier_phases.py); s[64] is never written, so
    the elements it reaches after four steps (60-63) are left out of the comparison."""
    a = np.arange(128, dtype=np.int32) * 3 % 17
    b = np.zeros(128, np.int32)
    tilelang.compile(named_barrier_kernel(3, 64), target="c")(a, b)
    s = a[:64].astype(np.int64)
    for _ in range(4):
        s = s + np.append(s[1:], 0)
    tx = np.arange(128)
    keep = tx % 64 < 60
    np.testing.assert_array_equal(b[keep], s[tx % 64][keep])
    with pytest.raises(LanguageError, match=r"needs a barrier_id too"):
        named_barrier_kernel(None, 64)


def handoff_kernel():
    """Upstream's T.named_barrier_arrive test (its issue 2188): warp 0 hands a value to warp
    1 through shared memory, arriving at barrier 10 (no wait) where warp 1 waits, and warp 1
    hands the slot back on barrier 11. inp + 1 comes out."""
    @T.prim_func
    def kernel(inp: T.Tensor((1,), T.int32), out: T.Tensor((1,), T.int32)):
        with T.Kernel(1, threads=64) as _:
            tx = T.get_thread_binding()
            slot = T.alloc_shared((1,), T.int32)
            if tx < 32:
                if tx == 0:
                    slot[0] = inp[0] + 1
                T.named_barrier_arrive(10, 64)
                T.sync_threads(11, 64)
            else:
                T.sync_threads(10, 64)
                if tx == 32:
                    out[0] = slot[0]
                T.named_barrier_arrive(11, 64)

    return kernel


def test_named_barrier_arrive_is_bar_arrive_on_cuda_with_no_block_barrier():
    source = lower_sm90(handoff_kernel())
    body = source[source.index("if (((int)threadIdx.x) < 32) {"):]
    assert body.index("tl_named_barrier_arrive(10, 64);") < body.index("tl_named_barrier_sync(11, 64);")
    assert body.index("tl_named_barrier_sync(10, 64);") < body.index("tl_named_barrier_arrive(11, 64);")
    assert "__syncthreads" not in body  # a block-wide barrier inside either branch would hang
    assert "bar.arrive %0, %1;" in source  # the helper tl_device.h defines


def test_named_barrier_arrive_is_refused_where_there_are_no_named_barriers_and_checked():
    @T.prim_func
    def arrive_only(A: T.Tensor((64,), T.int32)):
        with T.Kernel(1, threads=64) as _:
            tx = T.get_thread_binding()
            A[tx] = tx
            T.named_barrier_arrive(10, 64)

    with pytest.raises(LanguageError, match=r"kernel 'arrive_only': T.named_barrier_arrive is an arrive at a named "
                                            r"barrier, which target backend 'cpu' does not have(.|\n)*"
                                            r"T.named_barrier_arrive\(10, 64\)"):
        tilelang.compile(arrive_only, target="cpu")
    with pytest.raises(LanguageError, match=r"named barrier"):  # its partner, T.sync_threads(11, 64), first
        tilelang.compile(handoff_kernel(), target="cpu")

    def arriving(barrier_id, count):
        @T.prim_func
        def bad(A: T.Tensor((1,), T.int32)):
            with T.Kernel(1, threads=64):
                T.named_barrier_arrive(barrier_id, count)

    for args, message in (((16, 64), "barrier_id must be 0-15"), ((1, 48), "a positive multiple of 32"),
                          ((1.0, 64), "barrier_id must be an integer")):
        with pytest.raises(LanguageError, match=message):
            arriving(*args)


@pytest.mark.gpu
def test_named_barrier_arrive_hands_a_value_over_on_the_gpu():
    torch = pytest.importorskip("torch")
    kernel = tilelang.compile(handoff_kernel(), out_idx=[1], target="cuda")
    out = kernel(torch.tensor([41], dtype=torch.int32, device="cuda"))
    assert out.cpu().tolist() == [42]


def test_disable_thread_storage_sync_leaves_the_barriers_to_the_kernel():
    assert "__syncthreads();" in lower_sm90(reversal_kernel(barrier=False))  # TVM's ThreadSync sees the race
    assert "__syncthreads();" not in lower_sm90(reversal_kernel(barrier=False),
                                                **{"tl.disable_thread_storage_sync": True})


# -- T.thread_binding inside T.Kernel ---------------------------------------------------------
def row_sum_kernel():
    """Upstream's dequantize gemv shape: the kernel's threadIdx.x named again with
    T.thread_binding, and used as the reduce index of TVM's thread allreduce."""
    @T.prim_func
    def main(A: T.Tensor((4, 32), "float32"), C: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=(32, 4)) as _:
            acc = T.alloc_local((1,), "float32")
            red = T.alloc_local((1,), "float32")
            kr = T.thread_binding(0, 32, thread="threadIdx.x")
            ni = T.thread_binding(0, 4, thread="threadIdx.y")
            acc[0] = A[ni, kr]
            with T.attr(T.comm_reducer(lambda x, y: x + y, [T.cast(0, "float32")]), "reduce_scope",
                        T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), acc[0], True, red[0], kr, dtype="handle"))
            if kr == 0:
                C[ni] = red[0]

    return main


def test_thread_binding_of_the_kernels_thread_index_is_that_index():
    source = lower_sm90(row_sum_kernel())
    assert "__shfl_down_sync" in source  # TVM's warp allreduce over threadIdx.x
    assert "C_ptr[((int)threadIdx.y)] = " in source and "for (" not in source.split("__global__")[-1]


@pytest.mark.gpu
def test_thread_binding_allreduce_sums_rows_on_the_gpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    kernel = tilelang.compile(row_sum_kernel(), target="cuda", out_idx=[1])
    a = torch.randn(4, 32, device="cuda")
    torch.testing.assert_close(kernel(a), a.sum(dim=1), rtol=1e-5, atol=1e-5)


# -- T.import_source ------------------------------------------------------------------------
# a helper C and C++ both link by its plain name (the C target's code is built by g++)
TRIPLE_C = '#ifdef __cplusplus\nextern "C"\n#endif\nint triple(int x) { return x * 3; }'
TRIPLE_CUDA = "__device__ int triple(int x) { return x * 3; }"


def import_source_kernel(source):
    @T.prim_func
    def main(A: T.Tensor((8,), "int32")):
        with T.Kernel(1, threads=1) as _:
            T.import_source(source)
            for i in T.serial(8):
                A[i] = T.call_extern("int32", "triple", A[i])

    return main


def test_import_source_code_is_compiled_with_a_c_kernel():
    kernel = tilelang.compile(import_source_kernel(TRIPLE_C), target="c")
    a = np.arange(8, dtype="int32")
    kernel(a)
    np.testing.assert_array_equal(a, np.arange(8, dtype="int32") * 3)


def test_import_source_on_llvm_says_to_compile_for_the_c_target():
    with pytest.raises(LanguageError, match=r"T.call_extern of 'triple', which only the code of T.import_source "
                                            r"defines: the llvm target cannot compile that code .*target='c'"):
        tilelang.compile(import_source_kernel(TRIPLE_C), target="llvm")


def test_import_source_goes_after_the_prelude_right_before_the_cuda_kernel():
    # after TVM's prelude: NVRTC has no system headers, and imported code uses its names
    # (`uint` in upstream's dequantize gemv)
    source = lower_sm90(import_source_kernel(TRIPLE_CUDA + "\nstatic __device__ uint unused_helper();"))
    assert source.count(TRIPLE_CUDA) == 1
    kernel = source.index('extern "C" __global__')
    assert source.index("#define uint unsigned int") < source.index(TRIPLE_CUDA) < kernel
    assert source[source.index(TRIPLE_CUDA):kernel].count("\n") == 2
    assert "triple(A_ptr[" in source


def test_import_source_of_none_adds_nothing_and_other_values_are_refused():
    assert "triple" not in lower_sm90(import_source_kernel(None)).split("__global__")[0]
    with pytest.raises(LanguageError, match="T.import_source takes the source code as a str, got int"):
        tilelang.lower(import_source_kernel(3), target="c")
