"""CUDA kernels through cython.

Without a GPU: the launcher of CUDA artifacts is generated and compiled (it needs no CUDA
header or library at build time), the build produces a cubin through the CUDA backend's
toolchain, and a launcher made where no driver exists says so.
With a GPU (marked ``gpu``): results against torch and bit for bit against the other
execution backends the CUDA manifest declares, symbolic shapes, streams, shared memory
opt-in, threads and devices, argument errors, and the cache from a fresh process.
Tolerances as tilelang-cuda's GPU tests: float32 sums exact to 1e-6, float16 1e-3,
bfloat16 1e-2, the exp-sum reduction 1e-5, the tiled matmul 1e-4.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
import tilelang
import tilelang.language as T
from _cython_testing import declared_execution_backends
from tilelang.errors import ArgumentError, BackendUnavailableError
from tilelang.jit.adapter.cython import toolchain
from tilelang.jit.adapter.cython.backend import (
    CUBIN,
    CythonExecutionBackend,
    extension_sources,
)
from tilelang.jit.adapter.cython.launcher import make_launcher
from tilelang.testing.kernels import (
    elementwise_add,
    row_softmax_sum,
    saxpy,
    tiled_matmul,
)

cuda_backend = pytest.importorskip("tilelang.cuda")

ARCH_TARGET = {"kind": "cuda", "arch": "sm_90"}  # an arch every supported toolkit compiles


def cuda_artifact(func: Any, out_idx: list[int]) -> Any:
    from tilelang.backend import create_backend_context
    from tilelang.engine.lower import lower_with_context as lower

    return lower(func, create_backend_context(ARCH_TARGET, execution_backend=None), out_idx=out_idx)


@pytest.mark.parametrize("func,out_idx", [
    (elementwise_add(T.symbolic("M"), 256), [-1]),
    (row_softmax_sum(96), [-1]),
    (tiled_matmul(256, 256, 128), [-1]),
    (saxpy(1000), []),
], ids=["symbolic_add", "scalar_reduction", "smem_matmul", "inplace"])
def test_cuda_launchers_compile_without_a_gpu(func: Any, out_idx: list[int]) -> None:
    artifact = cuda_artifact(func, out_idx)
    sources = extension_sources(artifact, 2)
    header = sources["tl_kernel.h"]
    assert "tl_kernel_host.c" not in sources and "tl_cuda_launch(st, &scope, 0" in header
    name, data = toolchain.build_extension(sources, artifact.kernel_name)
    assert name.startswith(toolchain.MODULE_PREFIX) and data[:4] == b"\x7fELF"


def test_launch_expressions_become_c() -> None:
    header = extension_sources(cuda_artifact(elementwise_add(T.symbolic("M"), 256), [-1]), 2)["tl_kernel.h"]
    assert "const int64_t grid[3] = {(int64_t)(tl_floordiv((s0 + INT64_C(31)), INT64_C(32)))" in header
    assert "int32_t a3 = (int32_t)(s0);" in header  # the symbolic operand, as the kernel declares it
    assert "if ((uintptr_t)tl_data(&v[0]) % 16) TL_MISS(TL_MISS_ALIGN, 0);" in header


def test_a_cubin_for_another_gpu_is_not_loaded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The target backend's toolchain says the kernel cannot run on this process's GPU (an
    sm_75 cubin on the H200): load neither imports the launcher nor reads the cubin, and a
    launch says why and how to fix it, as tvm_ffi and nvrtc do. Before, the driver's
    CUDA_ERROR_NO_BINARY_FOR_GPU came from the first launch."""
    from tilelang.backend import create_backend_context
    from tilelang.jit.adapter.cython import backend

    monkeypatch.setattr(backend, "device_mismatch", lambda artifact, context: "it was compiled for sm_75")
    target = {"kind": "cuda", "arch": "sm_75"}
    artifact = tilelang.lower(elementwise_add(64, 64), target=target)
    launcher = CythonExecutionBackend().load(artifact, tmp_path, create_backend_context(target, None, None))
    with pytest.raises(tilelang.LaunchError, match="kernel 'main' cannot run on this device: it was compiled for sm_75"):
        launcher()


def test_float8_e8m0fnu_tensors_are_checked_by_their_dlpack_code() -> None:
    """torch.float8_e8m0fnu is DLPack's kDLFloat8_e8m0fnu (14), 8 bits."""
    @T.prim_func
    def main(A: T.Tensor((256,), "float32"), S: T.Tensor((256,), "float8_e8m0fnu")):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                S[bx * 128 + i] = A[bx * 128 + i]

    header = extension_sources(cuda_artifact(main, []), 2)["tl_kernel.h"]
    assert "if (!tl_dtype_is(&v[1], 14, 8)) TL_MISS(TL_MISS_DTYPE, 1);" in header


def test_a_kernel_that_waits_for_the_grid_launches_cooperatively_and_pointers_pass_as_addresses() -> None:
    @T.prim_func
    def main(src: T.ptr, A: T.Tensor((256,), "float32")):
        S = T.make_tensor(src, (256,), "float32")
        with T.Kernel(4, threads=64) as bx:
            for i in T.Parallel(64):
                A[bx * 64 + i] = S[bx * 64 + i] + 1.0
            T.sync_grid()
            for i in T.Parallel(64):
                S[bx * 64 + i] = A[255 - bx * 64 - i]

    artifact = cuda_artifact(main, [])
    sources = extension_sources(artifact, 2)
    header = sources["tl_kernel.h"]
    assert "static const int tl_cooperative[TL_NUM_LAUNCHES] = {1};" in header
    assert "switch (tl_address_arg(st, argv[0], &v[0], &p0)) {" in header
    assert "void* a1 = (void*)(uintptr_t)(p0);" in header  # the kernel takes A, then the pointer
    _, data = toolchain.build_extension(sources, artifact.kernel_name)
    assert data[:4] == b"\x7fELF"
    plain = extension_sources(cuda_artifact(elementwise_add(64, 64), [-1]), 2)["tl_kernel.h"]
    assert "static const int tl_cooperative[TL_NUM_LAUNCHES] = {0};" in plain


def test_build_makes_a_cubin_through_the_target_backends_toolchain() -> None:
    from tilelang.backend import create_backend_context
    from tilelang.cuda.toolchain import unavailable_reason

    if unavailable_reason() is not None:
        pytest.skip(unavailable_reason())
    context = create_backend_context(ARCH_TARGET, execution_backend=None)
    artifact = cuda_artifact(elementwise_add(64, 64), [-1])
    files = CythonExecutionBackend().build(artifact, context)
    assert files[CUBIN][:4] == b"\x7fELF"
    assert [n for n in files if n.startswith(toolchain.MODULE_PREFIX)]


@pytest.mark.skipif(os.path.exists("/dev/nvidiactl"), reason="this machine has a CUDA driver")
def test_a_launcher_without_a_driver_says_so() -> None:
    artifact = cuda_artifact(elementwise_add(64, 64), [-1])
    name, _ = toolchain.build_extension(extension_sources(artifact, 2), artifact.kernel_name)
    module = toolchain.load_extension(toolchain.extension_cache_dir() / name)
    with pytest.raises(BackendUnavailableError, match=r"no CUDA driver on this machine \(libcuda.so.1 cannot be loaded"):
        make_launcher(module, artifact, 2, b"not a cubin")


# -- on a GPU ---------------------------------------------------------------------------


def gpu_backends() -> list[str]:
    return declared_execution_backends("cuda")


def cython(func: Any, out_idx: Any = (-1,)) -> tilelang.JITKernel:
    return tilelang.compile(func, out_idx=list(out_idx) or None, target="cuda", execution_backend="cython")


@pytest.fixture(scope="module")
def torch() -> Any:
    return pytest.importorskip("torch")


TOLERANCE = {"float32": (1e-6, 1e-6), "float16": (1e-3, 1e-3), "bfloat16": (1e-2, 1e-2)}


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(1024, 256), (100, 17)])
def test_elementwise_matches_torch(torch: Any, dtype: str, shape: tuple[int, int]) -> None:
    kernel = cython(elementwise_add(*shape, dtype=dtype))
    a = torch.randn(shape, device="cuda").to(getattr(torch, dtype))
    b = torch.randn(shape, device="cuda").to(getattr(torch, dtype))
    c = kernel(a, b)
    assert c.device == a.device and c.dtype == a.dtype
    rtol, atol = TOLERANCE[dtype]
    torch.testing.assert_close(c, a + b, rtol=rtol, atol=atol)


@pytest.mark.gpu
def test_symbolic_rows_including_none(torch: Any) -> None:
    kernel = cython(elementwise_add(T.symbolic("M"), 256))
    for rows in (0, 1, 31, 32, 33, 4099):
        a, b = torch.randn(rows, 256, device="cuda"), torch.randn(rows, 256, device="cuda")
        torch.testing.assert_close(kernel(a, b), a + b, rtol=0, atol=0)


@pytest.mark.gpu
def test_scalar_reduction_and_in_place_kernels(torch: Any) -> None:
    kernel = cython(row_softmax_sum(96))
    a = torch.randn(1000, 96, device="cuda")
    expected = 0.25 * torch.exp(a - a.max(dim=1, keepdim=True).values).sum(dim=1)
    torch.testing.assert_close(kernel(a, 0.25), expected, rtol=1e-5, atol=1e-5)
    inplace = cython(saxpy(10_000), out_idx=())
    x, y = torch.randn(10_000, device="cuda"), torch.randn(10_000, device="cuda")
    expected = 2.5 * x + y
    assert inplace(x, y, 2.5) is None
    torch.testing.assert_close(y, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("tiles", [(32, 32, 16), (128, 128, 64)], ids=["4KiB", "64KiB-opt-in"])
def test_tiled_matmul_and_dynamic_shared_memory(torch: Any, tiles: tuple[int, int, int]) -> None:
    kernel = cython(tiled_matmul(256, 256, 128, *tiles))
    a, b = torch.randn(256, 128, device="cuda"), torch.randn(128, 256, device="cuda")
    torch.testing.assert_close(kernel(a, b), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_bit_for_bit_with_the_other_cuda_backends(torch: Any) -> None:
    cases = [(elementwise_add(333, 65, dtype="float16"),
              (torch.randn(333, 65, device="cuda").half(), torch.randn(333, 65, device="cuda").half())),
             (row_softmax_sum(40), (torch.randn(77, 40, device="cuda"), 0.5))]
    for func, args in cases:
        results = [tilelang.compile(func, out_idx=[-1], target="cuda", execution_backend=b)(*args)
                   for b in gpu_backends()]
        assert all(torch.equal(results[0], r) for r in results[1:])


@pytest.mark.gpu
def test_argument_errors_match_the_other_backends(torch: Any) -> None:
    kernel = cython(elementwise_add(64, 64))
    a = torch.randn(64, 64, device="cuda")
    with pytest.raises(ArgumentError, match=r"argument 'B' \(#1\): expected a tensor on cuda, got one on cpu"):
        kernel(a, torch.randn(64, 64))
    view = torch.randn(64 * 64 + 1, device="cuda")[1:].view(64, 64)
    with pytest.raises(ArgumentError, match="not aligned to 16 bytes"):
        kernel(view, view)
    with pytest.raises(ArgumentError, match=r"expected dtype float32, got float16"):
        kernel(a, a.half())


@pytest.mark.gpu
@pytest.mark.parametrize("how", ["current", "explicit", "handle"])
def test_runs_on_the_callers_stream(torch: Any, how: str) -> None:
    kernel = cython(elementwise_add(2048, 1024))
    stream = torch.cuda.Stream()
    a = torch.randn(2048, 1024, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(200_000_000)  # keep the stream busy: a launch elsewhere runs first
        b = a * 2
        if how == "current":
            c = kernel(a, b)
    if how == "explicit":
        c = kernel(a, b, stream=stream)
    elif how == "handle":
        c = kernel(a, b, stream=stream.cuda_stream)
    stream.synchronize()
    torch.testing.assert_close(c, a * 3)


@pytest.mark.gpu
def test_a_thread_without_a_current_context(torch: Any) -> None:
    kernel = cython(elementwise_add(256, 256))
    a = torch.randn(256, 256, device="cuda")
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(kernel(a, a)))
    thread.start()
    thread.join()
    torch.cuda.synchronize()
    torch.testing.assert_close(out[0], a * 2)


@pytest.mark.gpu
def test_tensors_on_a_second_device(torch: Any) -> None:
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    kernel = cython(elementwise_add(256, 256))
    a = torch.randn(256, 256, device="cuda:1")
    c = kernel(a, a)  # current device 0: launched in device 1's context, on its stream
    assert c.device == a.device
    torch.testing.assert_close(c, a * 2)
    with pytest.raises(ArgumentError, match="on another device"):
        kernel(a, a.to("cuda:0"))


@pytest.mark.gpu
def test_fresh_process_loads_from_the_cache(tmp_path: Path) -> None:
    child = textwrap.dedent("""
        import torch, tilelang
        from tilelang.jit.adapter.cython import toolchain
        from tilelang.testing.kernels import elementwise_add
        import os
        if os.environ.get("FORBID_BUILD"):
            def refuse(*args):
                raise AssertionError("compiled in a process that must not")
            toolchain._run = refuse
        k = tilelang.compile(elementwise_add(128, 128), out_idx=[-1], target="cuda", execution_backend="cython")
        a = torch.randn(128, 128, device="cuda")
        torch.testing.assert_close(k(a, a), a * 2)
        print(k.from_cache)
    """)
    env = dict(os.environ, TILELANG_CACHE_DIR=str(tmp_path / "kernels"))
    first = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, check=False)
    assert first.returncode == 0 and first.stdout.split()[-1] == "False", first.stdout + first.stderr
    second = subprocess.run([sys.executable, "-c", child], env=dict(env, FORBID_BUILD="1"),
                            capture_output=True, text=True, check=False)
    assert second.returncode == 0 and second.stdout.split()[-1] == "True", second.stdout + second.stderr
