"""CUDA kernels end to end on a real GPU, through every execution backend the CUDA
manifest declares (marked `gpu`: skipped without one)."""

from __future__ import annotations

import pytest
import tilelang
import tilelang.backend
from tilelang.testing.kernels import (
    elementwise_add,
    row_softmax_sum,
    saxpy,
    tiled_matmul,
)

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

# every execution backend the CUDA manifest declares, in its order
EXECUTION_BACKENDS = [spec.name for spec in tilelang.backend.registered_backends()["cuda"].execution_backends]
TOLERANCE = {"float32": (1e-6, 1e-6), "float16": (1e-3, 1e-3), "bfloat16": (1e-2, 1e-2)}


def compile_cuda(func, execution_backend, out_idx=(-1,)):
    return tilelang.compile(func, out_idx=list(out_idx) if out_idx else None, target="cuda",
                            execution_backend=execution_backend)


@pytest.mark.parametrize("backend", EXECUTION_BACKENDS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(1024, 256), (100, 17), (4096, 1024)])
def test_elementwise_add(backend, dtype, shape):
    kernel = compile_cuda(elementwise_add(*shape, dtype=dtype), backend)
    a = torch.randn(shape, device="cuda").to(getattr(torch, dtype))
    b = torch.randn(shape, device="cuda").to(getattr(torch, dtype))
    rtol, atol = TOLERANCE[dtype]
    torch.testing.assert_close(kernel(a, b), a + b, rtol=rtol, atol=atol)


@pytest.mark.parametrize("backend", EXECUTION_BACKENDS)
def test_loop_reduction_with_symbolic_rows(backend):
    kernel = compile_cuda(row_softmax_sum(96), backend)
    for rows in (1, 16, 1000):
        a = torch.randn(rows, 96, device="cuda")
        expected = 0.25 * torch.exp(a - a.max(dim=1, keepdim=True).values).sum(dim=1)
        torch.testing.assert_close(kernel(a, 0.25), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", EXECUTION_BACKENDS)
@pytest.mark.parametrize("mnk", [(256, 256, 128), (100, 70, 50), (64, 96, 0)])  # K = 0: upstream issue 1697
def test_tiled_simt_matmul(backend, mnk):
    M, N, K = mnk
    kernel = compile_cuda(tiled_matmul(M, N, K), backend)
    a, b = torch.randn(M, K, device="cuda"), torch.randn(K, N, device="cuda")
    torch.testing.assert_close(kernel(a, b), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("backend", EXECUTION_BACKENDS)
def test_scalar_argument_in_place(backend):
    kernel = compile_cuda(saxpy(10_000), backend, out_idx=None)
    x, y = torch.randn(10_000, device="cuda"), torch.randn(10_000, device="cuda")
    expected = 2.5 * x + y
    assert kernel(x, y, 2.5) is None
    torch.testing.assert_close(y, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("backend", EXECUTION_BACKENDS)
def test_cpu_tensor_to_a_cuda_kernel_is_a_clear_error(backend):
    kernel = compile_cuda(elementwise_add(64, 64), backend)
    a = torch.randn(64, 64, device="cuda")
    with pytest.raises(tilelang.ArgumentError, match=r"argument 'B' \(#1\): expected a tensor on cuda, got one on cpu"):
        kernel(a, torch.randn(64, 64))


@pytest.mark.parametrize("backend", EXECUTION_BACKENDS)
def test_misaligned_view_is_a_clear_error(backend):
    kernel = compile_cuda(elementwise_add(64, 64), backend)
    base = torch.randn(64 * 64 + 1, device="cuda")
    view = base[1:].view(64, 64)  # contiguous, but 4 bytes past an aligned address
    with pytest.raises(tilelang.ArgumentError, match="not aligned to 16 bytes"):
        kernel(view, view)


@pytest.mark.parametrize("backend", EXECUTION_BACKENDS)
def test_runs_on_the_callers_current_stream(backend):
    kernel = compile_cuda(elementwise_add(2048, 1024), backend)
    stream = torch.cuda.Stream()
    a = torch.randn(2048, 1024, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(50_000_000)  # keep the stream busy: a launch elsewhere runs first
        b = a * 2  # produced on `stream` after the sleep
        c = kernel(a, b)
    stream.synchronize()
    torch.testing.assert_close(c, a * 3)


@pytest.mark.parametrize("backend", EXECUTION_BACKENDS)
def test_explicit_stream_argument(backend):
    kernel = compile_cuda(elementwise_add(2048, 1024), backend)
    stream = torch.cuda.Stream()
    a = torch.randn(2048, 1024, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(50_000_000)
        b = a * 2
    c = kernel(a, b, stream=stream)
    stream.synchronize()
    torch.testing.assert_close(c, a * 3)


def test_execution_backends_agree_bit_for_bit():
    funcs = [elementwise_add(333, 65, dtype="float16"), row_softmax_sum(40)]
    inputs = [
        (torch.randn(333, 65, device="cuda").half(), torch.randn(333, 65, device="cuda").half()),
        (torch.randn(77, 40, device="cuda"), 0.5),
    ]
    for func, args in zip(funcs, inputs):
        results = [compile_cuda(func, backend)(*args) for backend in EXECUTION_BACKENDS]
        assert all(torch.equal(results[0], r) for r in results[1:])


def test_warp_shuffle_and_atomics():
    from tilelang.cuda import language as T

    @T.prim_func
    def total(A: T.Tensor((4096,), "float32"), out: T.Tensor((1,), "float32")):
        with T.Kernel(32, threads=128) as bx:
            tx = T.get_thread_binding()
            v = T.warp_reduce_sum(A[bx * 128 + tx])
            if tx % 32 == 0:
                T.atomic_add(out[0], v)

    kernel = tilelang.compile(total, target="cuda")
    a = torch.randn(4096, device="cuda")
    out = torch.zeros(1, device="cuda")
    kernel(a, out)
    torch.testing.assert_close(out, a.sum().reshape(1), rtol=1e-4, atol=1e-3)


def _iota(n):
    import tilelang.language as T

    @T.prim_func
    def main(start: T.int32, A: T.Tensor((n,), "int32")):
        with T.Kernel(1, threads=n):
            A[T.get_thread_binding(0)] = start + T.get_thread_binding(0)

    return main


@pytest.mark.parametrize("backend", EXECUTION_BACKENDS)
def test_an_output_of_a_kernel_without_tensor_arguments_is_made_on_the_current_device(backend):
    # upstream's `kernel()` for a kernel of scalars: before, "cannot allocate output 'A' on
    # cuda without a torch input tensor"
    kernel = compile_cuda(_iota(64), backend)
    if backend == "cython":  # its compiled launcher allocates like a torch argument: a clear refusal
        from tilelang.errors import ArgumentError

        with pytest.raises(ArgumentError, match=r"argument 'A' \(#1\): it is an output, and the cython launcher "
                                                r"allocates outputs on the device of the first torch tensor"):
            kernel(5)
        return
    out = kernel(5)
    assert out.device == torch.device("cuda", torch.cuda.current_device())
    torch.testing.assert_close(out, torch.arange(5, 69, dtype=torch.int32, device="cuda"), rtol=0, atol=0)


@pytest.mark.parametrize("backend", EXECUTION_BACKENDS)
def test_an_assumption_over_the_parameters(backend):
    import tilelang.language as T

    n = T.dynamic("n")

    @T.prim_func
    def ones(A: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32):
            T.assume(n % 4 == 0)
            tx = T.get_thread_binding()
            if tx < n:
                A[tx] = 1.0

    kernel = compile_cuda(ones, backend, out_idx=None)
    a = torch.zeros(8, device="cuda")
    kernel(a)
    torch.testing.assert_close(a, torch.ones(8, device="cuda"), rtol=0, atol=0)
    if backend == "tvm_ffi":  # the host code of the packed entry checks it (nvrtc, cython: see note 63)
        with pytest.raises(RuntimeError, match=r"Assume: n % 4 == 0"):
            kernel(torch.zeros(6, device="cuda"))


@pytest.mark.parametrize("backend", EXECUTION_BACKENDS)
def test_a_producer_and_a_waiting_consumer(backend):
    from test_codegen import producer_consumer_pair

    kernel = compile_cuda(producer_consumer_pair(), backend, out_idx=None)
    a = torch.randn(1024, device="cuda")
    b, c = torch.zeros_like(a), torch.zeros_like(a)
    kernel(a, b, c)
    torch.testing.assert_close(c, (a + 1) * 2, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float8_e5m2"])
def test_infinity_fills_are_infinite(dtype):
    import tilelang.language as T

    @T.prim_func
    def fill_inf(A: T.Tensor((32,), dtype)):
        with T.Kernel(1, threads=32):
            T.fill(A, T.infinity(dtype))

    out = torch.zeros(32, dtype=getattr(torch, dtype), device="cuda")
    compile_cuda(fill_inf, "tvm_ffi", out_idx=None)(out)
    assert torch.isinf(out.float()).all() and (out.float() > 0).all()  # e5m2 was 57344: a saturating cast


@pytest.mark.parametrize("backend", EXECUTION_BACKENDS)
def test_sync_grid_orders_every_blocks_writes(backend):
    """Upstream's test_grid_sync, through each execution backend (a cooperative launch)."""
    from test_codegen import grid_sync_kernel

    kernel = tilelang.compile(grid_sync_kernel(), target="cuda", execution_backend=backend)
    a = torch.rand(1024, device="cuda")
    kernel(a)
    torch.testing.assert_close(a, torch.full_like(a, 1023.0), rtol=0, atol=0)


@pytest.mark.parametrize("backend", EXECUTION_BACKENDS)
def test_sync_grid_with_more_blocks_than_the_gpu_holds_is_a_launch_error(backend):
    from test_codegen import grid_sync_kernel
    from tilelang.errors import LaunchError

    n = 64 * 132 * 64  # 64 blocks per SM of an H200 would be needed; at most 16 (2048 threads) fit
    kernel = tilelang.compile(grid_sync_kernel(n), target="cuda", execution_backend=backend)
    with pytest.raises(LaunchError, match=r"COOPERATIVE_LAUNCH_TOO_LARGE|too large|cooperative"):
        kernel(torch.zeros(n, device="cuda"))
        torch.cuda.synchronize()


@pytest.mark.parametrize("backend", EXECUTION_BACKENDS)
def test_a_kernel_compiled_for_another_gpu_shows_its_source_and_refuses_to_launch(backend):
    # upstream's test_atomic_add_bf16_compiles_for_sm75 on an sm_90 GPU: tvm_ffi's load
    # stopped the process (TVM's runtime on a cubin this GPU cannot run)
    other = "sm_75" if torch.cuda.get_device_capability()[0] != 7 else "sm_90"
    kernel = tilelang.compile(elementwise_add(64, 64), out_idx=[-1], execution_backend=backend,
                              target={"kind": "cuda", "arch": other})
    assert "__global__" in kernel.get_kernel_source()
    a = torch.randn(64, 64, device="cuda")
    with pytest.raises(tilelang.LaunchError, match="NO_BINARY_FOR_GPU|cannot run on this device"):
        kernel(a, a)
