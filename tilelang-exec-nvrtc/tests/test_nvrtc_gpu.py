"""nvrtc on a real GPU: results against torch (and the tvm_ffi backend), symbolic shapes,
streams, shared memory opt-in, threads, the kernel cache, argument errors.

Tolerances: elementwise float32 sums are exact (one rounding, like torch); float16 sums
within float16 rounding (rtol 1e-3); the exp-sum reduction within 1e-5 relative.
"""

from __future__ import annotations

import dataclasses
import gc
import threading
from typing import Any

import pytest
import tilelang
import tilelang.language as T
from tilelang.errors import ArgumentError, LaunchError
from tilelang.jit.adapter.nvrtc.backend import CUBIN, NVRTCExecutionBackend
from tilelang.jit.adapter.nvrtc.driver import cuda_driver
from tilelang.jit.adapter.nvrtc.launcher import NVRTCLauncher
from tilelang.testing.kernels import elementwise_add, row_softmax_sum

pytestmark = pytest.mark.gpu

# long enough that a launch on the wrong stream runs before the producer it should wait for
SLEEP_CYCLES = 200_000_000


def nvrtc(func: Any, **options: Any) -> tilelang.JITKernel:
    return tilelang.compile(func, out_idx=[-1], target="cuda", execution_backend="nvrtc", **options)


@pytest.fixture(scope="module")
def torch() -> Any:
    import torch

    return torch


@pytest.fixture(scope="module")
def add_kernel() -> tilelang.JITKernel:
    return nvrtc(elementwise_add(T.symbolic("M"), 256))


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_elementwise_matches_torch(torch: Any, dtype: str) -> None:
    kernel = nvrtc(elementwise_add(1024, 512, dtype=dtype))
    assert "execution backend 'nvrtc'" in kernel.describe()
    a = torch.randn(1024, 512, device="cuda", dtype=getattr(torch, dtype))
    b = torch.randn(1024, 512, device="cuda", dtype=getattr(torch, dtype))
    c = kernel(a, b)
    assert c.device == a.device and c.dtype == a.dtype
    torch.testing.assert_close(c, a + b, rtol=1e-3 if dtype == "float16" else 0, atol=0)


@pytest.mark.parametrize("rows", [1, 31, 32, 33, 1000, 4099])
def test_symbolic_rows(torch: Any, add_kernel: tilelang.JITKernel, rows: int) -> None:
    a = torch.randn(rows, 256, device="cuda")
    b = torch.randn(rows, 256, device="cuda")
    torch.testing.assert_close(add_kernel(a, b), a + b, rtol=0, atol=0)


def test_zero_rows_return_an_empty_result(torch: Any, add_kernel: tilelang.JITKernel) -> None:
    a = torch.empty(0, 256, device="cuda")
    assert add_kernel(a, a).shape == (0, 256)


def test_scalar_parameter_and_reduction(torch: Any) -> None:
    kernel = nvrtc(row_softmax_sum(64))
    a = torch.randn(300, 64, device="cuda")
    s = kernel(a, 0.5)
    expected = 0.5 * torch.exp(a - a.max(dim=1, keepdim=True).values).sum(dim=1)
    torch.testing.assert_close(s, expected, rtol=1e-5, atol=1e-6)


def staged_reverse(M: Any, N: int = 16384) -> Any:
    """B[i, :] = A[i, ::-1] through a 64 KiB shared buffer (more than the 48 KiB a kernel
    gets without opting in)."""

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(M, threads=128) as bx:
            S = T.alloc_shared((N,), "float32")
            for j in T.Parallel(N):
                S[j] = A[bx, j]
            for j in T.Parallel(N):
                B[bx, j] = S[N - 1 - j]

    return main


def test_more_than_48k_dynamic_shared_memory(torch: Any) -> None:
    kernel = nvrtc(staged_reverse(T.symbolic("M")))
    assert kernel.artifact.launches[0].dynamic_smem == "65536"
    a = torch.randn(40, 16384, device="cuda")
    torch.testing.assert_close(kernel(a), a.flip(1), rtol=0, atol=0)


def _delayed_producer(torch: Any, stream: Any, dst: Any, src: Any) -> None:
    """On ``stream``: sleep, then fill ``dst``; a kernel reading ``dst`` on another stream
    would see the old contents (zeros)."""
    with torch.cuda.stream(stream):
        torch.cuda._sleep(SLEEP_CYCLES)
        dst.copy_(src)


def test_launches_on_the_callers_current_stream(torch: Any, add_kernel: tilelang.JITKernel) -> None:
    src = torch.randn(512, 256, device="cuda")
    b = torch.randn(512, 256, device="cuda")
    a = torch.zeros_like(src)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    _delayed_producer(torch, side, a, src)
    with torch.cuda.stream(side):
        c = add_kernel(a, b)
    side.synchronize()
    torch.testing.assert_close(c, src + b, rtol=0, atol=0)


@pytest.mark.parametrize("as_handle", [False, True])
def test_explicit_stream(torch: Any, add_kernel: tilelang.JITKernel, as_handle: bool) -> None:
    src = torch.randn(512, 256, device="cuda")
    b = torch.randn(512, 256, device="cuda")
    a = torch.zeros_like(src)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    _delayed_producer(torch, side, a, src)
    # called on the default stream, launched on `side` behind the producer
    c = add_kernel(a, b, stream=side.cuda_stream if as_handle else side)
    side.synchronize()
    torch.testing.assert_close(c, src + b, rtol=0, atol=0)


def test_cpu_tensor_is_an_argument_error(torch: Any, add_kernel: tilelang.JITKernel) -> None:
    a = torch.randn(8, 256, device="cuda")
    with pytest.raises(ArgumentError, match=r"argument 'B' \(#1\): expected a tensor on cuda, got one on cpu"):
        add_kernel(a, torch.randn(8, 256))


def test_driver_error_is_a_launch_error_and_modules_unload(torch: Any, add_kernel: tilelang.JITKernel) -> None:
    # 2048 threads per block: more than any CUDA GPU allows
    launch = dataclasses.replace(add_kernel.artifact.launches[0], block=("2048", "1", "1"))
    artifact = dataclasses.replace(add_kernel.artifact, launches=(launch,))
    cubin = NVRTCExecutionBackend().build(artifact, add_kernel.context)[CUBIN]
    launcher = NVRTCLauncher(artifact, cubin, cuda_driver())
    a = torch.randn(64, 256, device="cuda")
    with pytest.raises(LaunchError, match=r"kernel 'main': cuLaunchKernel\('main_kernel', grid \(2, 1, 1\), "
                                          r"block \(2048, 1, 1\).*failed with CUDA_ERROR_INVALID_VALUE \(1\)"):
        launcher(a, a)
    del launcher
    gc.collect()  # unloads its module; the process's other kernels are unaffected
    torch.testing.assert_close(add_kernel(a, a), a + a, rtol=0, atol=0)


def test_identical_to_tvm_ffi(torch: Any) -> None:
    func = row_softmax_sum(64)
    ours = nvrtc(func)
    theirs = tilelang.compile(func, out_idx=[-1], target="cuda", execution_backend="tvm_ffi")
    a = torch.randn(777, 64, device="cuda")
    assert torch.equal(ours(a, 0.25), theirs(a, 0.25))
    add = elementwise_add(T.symbolic("M"), 256, dtype="float16")
    x = torch.randn(333, 256, device="cuda", dtype=torch.float16)
    assert torch.equal(nvrtc(add)(x, x), tilelang.compile(add, out_idx=[-1], target="cuda",
                                                          execution_backend="tvm_ffi")(x, x))


def test_second_compile_loads_from_the_cache(torch: Any) -> None:
    func = elementwise_add(64, 256)
    first, second = nvrtc(func), nvrtc(func)
    assert not first.from_cache and second.from_cache
    a = torch.randn(64, 256, device="cuda")
    torch.testing.assert_close(second(a, a), a + a, rtol=0, atol=0)


def test_launch_from_another_thread(torch: Any, add_kernel: tilelang.JITKernel) -> None:
    a = torch.randn(100, 256, device="cuda")
    results: list[Any] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            results.append(add_kernel(a, a))
            torch.cuda.synchronize()
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for c in results:
        torch.testing.assert_close(c, a + a, rtol=0, atol=0)


def test_tensors_on_another_device(torch: Any, add_kernel: tilelang.JITKernel) -> None:
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    a = torch.randn(100, 256, device="cuda:1")
    c = add_kernel(a, a)
    assert c.device == a.device
    torch.testing.assert_close(c, a + a, rtol=0, atol=0)
