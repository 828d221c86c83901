"""The launcher's per-call path with a fake driver (no GPU): binding, launch values, operand
packing, stream selection, shared memory opt-in, errors and lifetime.

The fake decodes each launch's ``void**`` operand array the way the driver would, so these
tests see exactly the bytes cuLaunchKernel would receive. CPU tensors stand in for CUDA
ones (the launcher is built with the CPU device type; the device index of a CPU tensor is
-1, which the fake reports as current)."""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Callable
from typing import Any

import pytest
import tilelang
import tilelang.language as T
from tilelang.engine.artifact import CompiledArtifact
from tilelang.errors import ArgumentError, LaunchError
from tilelang.jit.adapter.nvrtc.launcher import NVRTCLauncher
from tilelang.testing.kernels import elementwise_add, row_softmax_sum, tiled_matmul

torch = pytest.importorskip("torch")

CUDA_SPEC = {"kind": "cuda", "arch": "sm_90"}
CPU = 1  # DLPack kDLCPU: the fake launches CPU tensors


@pytest.fixture(scope="module")
def add_artifact() -> CompiledArtifact:
    return tilelang.lower(elementwise_add(T.symbolic("M"), 64), target=CUDA_SPEC, out_idx=[-1])


@pytest.fixture(scope="module")
def softmax_artifact() -> CompiledArtifact:
    return tilelang.lower(row_softmax_sum(32), target=CUDA_SPEC, out_idx=[-1])


def make(artifact: CompiledArtifact, fake_driver_for: Callable[[Any], Any]) -> tuple[NVRTCLauncher, Any]:
    fake = fake_driver_for(artifact)
    return NVRTCLauncher(artifact, b"cubin", fake, device_type=CPU), fake


def test_launch_values_and_operands_reach_the_driver(add_artifact: CompiledArtifact,
                                                     fake_driver_for: Callable[[Any], Any]) -> None:
    launcher, fake = make(add_artifact, fake_driver_for)
    a, b = torch.ones(100, 64), torch.ones(100, 64)
    c = launcher(a, b)
    assert c.shape == (100, 64) and c.dtype == torch.float32
    (launch,) = fake.launches
    assert launch.symbol == "main_kernel"
    assert launch.grid == (4, 1, 1) and launch.block == (128, 1, 1) and launch.smem == 0
    assert launch.operands == (a.data_ptr(), b.data_ptr(), c.data_ptr(), 100)
    assert launch.stream == fake.stream  # the caller's current stream


def test_symbolic_rows_change_per_call(add_artifact: CompiledArtifact,
                                       fake_driver_for: Callable[[Any], Any]) -> None:
    launcher, fake = make(add_artifact, fake_driver_for)
    for m in (1, 32, 33, 1000):
        launcher(torch.ones(m, 64), torch.ones(m, 64))
    assert [(l.grid[0], l.operands[3]) for l in fake.launches] == [(1, 1), (1, 32), (2, 33), (32, 1000)]


def test_scalar_parameter_is_packed_as_float32(softmax_artifact: CompiledArtifact,
                                               fake_driver_for: Callable[[Any], Any]) -> None:
    launcher, fake = make(softmax_artifact, fake_driver_for)
    a = torch.ones(50, 32)
    s = launcher(a, 0.1)
    (launch,) = fake.launches
    assert launch.operands[:3] == (a.data_ptr(), s.data_ptr(), 50)
    assert launch.operands[3] == pytest.approx(0.1, rel=1e-7)  # float32 rounding
    assert launch.grid == (4, 1, 1)


def test_explicit_stream(add_artifact: CompiledArtifact, fake_driver_for: Callable[[Any], Any]) -> None:
    launcher, fake = make(add_artifact, fake_driver_for)
    a = torch.ones(8, 64)

    class StreamLike:  # what torch.cuda.Stream and ExternalStream offer
        cuda_stream = 0xABC

    launcher(a, a, stream=0x123)
    launcher(a, a, stream=StreamLike())
    assert [l.stream for l in fake.launches] == [0x123, 0xABC]
    with pytest.raises(ArgumentError, match="stream= takes a CUDA stream handle"):
        launcher(a, a, stream="default")


def test_empty_problem_launches_nothing(add_artifact: CompiledArtifact,
                                        fake_driver_for: Callable[[Any], Any]) -> None:
    launcher, fake = make(add_artifact, fake_driver_for)
    c = launcher(torch.ones(0, 64), torch.ones(0, 64))
    assert c.shape == (0, 64) and fake.launches == []


def test_arguments_are_checked_before_launch(add_artifact: CompiledArtifact,
                                             fake_driver_for: Callable[[Any], Any]) -> None:
    launcher, fake = make(add_artifact, fake_driver_for)
    with pytest.raises(ArgumentError, match=r"argument 'B' \(#1\): expected dtype float32, got float16"):
        launcher(torch.ones(4, 64), torch.ones(4, 64, dtype=torch.float16))
    with pytest.raises(ArgumentError, match="symbolic dimension M is 5 here but 4"):
        launcher(torch.ones(4, 64), torch.ones(5, 64))
    assert fake.launches == []


def test_failed_launch_names_kernel_and_cuda_error(add_artifact: CompiledArtifact,
                                                   fake_driver_for: Callable[[Any], Any]) -> None:
    launcher, fake = make(add_artifact, fake_driver_for)
    fake.results = [1]
    with pytest.raises(LaunchError, match=r"kernel 'main': cuLaunchKernel\('main_kernel', grid \(1, 1, 1\), "
                                          r"block \(128, 1, 1\), 0 bytes dynamic shared memory\) failed "
                                          r"with CUDA_ERROR_INVALID_VALUE \(1\): a grid or block"):
        launcher(torch.ones(4, 64), torch.ones(4, 64))


def test_thread_without_context_is_bound_and_retried(add_artifact: CompiledArtifact,
                                                     fake_driver_for: Callable[[Any], Any]) -> None:
    launcher, fake = make(add_artifact, fake_driver_for)
    fake.results = [201]  # CUDA_ERROR_INVALID_CONTEXT, then success
    launcher(torch.ones(4, 64), torch.ones(4, 64))
    assert fake.contexts_ensured == [-1] and len(fake.launches) == 2


def test_operand_that_does_not_fit_its_type(add_artifact: CompiledArtifact,
                                            fake_driver_for: Callable[[Any], Any]) -> None:
    launch = dataclasses.replace(add_artifact.launches[0],
                                 args=("param:0", "param:1", "param:2", "M * 100000000"))
    artifact = dataclasses.replace(add_artifact, launches=(launch,))
    launcher, fake = make(artifact, fake_driver_for)
    with pytest.raises(ArgumentError, match=r"operand 'M \* 100000000' of 'main_kernel' is 2200000000, "
                                            r"which does not fit its type int32"):
        launcher(torch.ones(22, 64), torch.ones(22, 64))
    assert fake.launches == []


def test_dynamic_shared_memory_opt_in(add_artifact: CompiledArtifact,
                                      fake_driver_for: Callable[[Any], Any]) -> None:
    launch = dataclasses.replace(add_artifact.launches[0], dynamic_smem="M * 1024")
    launcher, fake = make(dataclasses.replace(add_artifact, launches=(launch,)), fake_driver_for)
    function = fake.loaded[0].functions[0]
    launcher(torch.ones(16, 64), torch.ones(16, 64))  # 16 KiB: no opt-in needed
    launcher(torch.ones(64, 64), torch.ones(64, 64))  # 64 KiB: raised once...
    launcher(torch.ones(60, 64), torch.ones(60, 64))  # ...and enough for less
    assert fake.smem_attributes == [(function, 64 * 1024)]
    assert [l.smem for l in fake.launches] == [16 * 1024, 64 * 1024, 60 * 1024]
    with pytest.raises(LaunchError, match=r"needs 262144 bytes of dynamic shared memory.*at most 232448"):
        launcher(torch.ones(256, 64), torch.ones(256, 64))


def test_constant_dynamic_shared_memory_opt_in_at_load(fake_driver_for: Callable[[Any], Any]) -> None:
    artifact = tilelang.lower(tiled_matmul(256, 256, 256, bM=64, bN=64, bK=128), target=CUDA_SPEC, out_idx=[-1])
    launcher, fake = make(artifact, fake_driver_for)
    assert fake.smem_attributes == [(fake.loaded[0].functions[0], 65536)]
    launcher(torch.ones(256, 256), torch.ones(256, 256))
    assert len(fake.smem_attributes) == 1 and fake.launches[0].smem == 65536


def test_module_is_unloaded_when_the_launcher_is_collected(add_artifact: CompiledArtifact,
                                                           fake_driver_for: Callable[[Any], Any]) -> None:
    launcher, fake = make(add_artifact, fake_driver_for)
    image = fake.loaded[0]
    del launcher
    gc.collect()
    assert fake.unloaded == [image]


def test_launch_sources_are_inspectable(add_artifact: CompiledArtifact,
                                        fake_driver_for: Callable[[Any], Any]) -> None:
    launcher, _ = make(add_artifact, fake_driver_for)
    (source,) = launcher.launch_sources
    assert source.startswith("def _launch_values(A, B, C, M):") and "(M + 31) // 32" in source


def _grid_sync(n: int = 256):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(n // 64, threads=64) as bx:
            for i in T.Parallel(64):
                A[bx * 64 + i] = A[bx * 64 + i] + 1.0
            T.sync_grid()
            for i in T.Parallel(64):
                B[bx * 64 + i] = A[n - 1 - bx * 64 - i]

    return main


def test_a_kernel_that_waits_for_the_grid_is_launched_cooperatively(fake_driver_for: Callable[[Any], Any]) -> None:
    artifact = tilelang.lower(_grid_sync(), target=CUDA_SPEC)
    assert [l.cooperative for l in artifact.launches] == [True]
    launcher, fake = make(artifact, fake_driver_for)
    launcher(torch.zeros(256), torch.zeros(256))
    (launch,) = fake.launches
    assert launch.cooperative and launch.grid == (4, 1, 1)
    plain, fake = make(tilelang.lower(elementwise_add(64, 64), target=CUDA_SPEC, out_idx=[-1]), fake_driver_for)
    plain(torch.ones(64, 64), torch.ones(64, 64))
    assert [l.cooperative for l in fake.launches] == [False]


def test_a_grid_too_large_for_a_cooperative_launch_says_why(fake_driver_for: Callable[[Any], Any]) -> None:
    launcher, fake = make(tilelang.lower(_grid_sync(), target=CUDA_SPEC), fake_driver_for)
    fake.results = [720]
    with pytest.raises(LaunchError, match=r"cuLaunchCooperativeKernel\('main_kernel', grid \(4, 1, 1\).*"
                                          r"CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE \(720\): the kernel waits at "
                                          r"T.sync_grid, so every block must be resident at once"):
        launcher(torch.zeros(256), torch.zeros(256))


def test_pointer_parameters_are_passed_as_addresses(fake_driver_for: Callable[[Any], Any]) -> None:
    @T.prim_func
    def main(src: T.ptr, out: T.Tensor((64,), "float32"), n: T.int32):
        S = T.make_tensor(src, (64,), "float32")
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                out[i] = S[i] * T.cast(n, "float32")

    launcher, fake = make(tilelang.lower(main, target=CUDA_SPEC), fake_driver_for)
    a, out = torch.ones(64), torch.zeros(64)
    launcher(a, out, 3)
    launcher(a.data_ptr() + 16, out, 3)
    assert [l.operands for l in fake.launches] == [(a.data_ptr(), out.data_ptr(), 3),
                                                   (a.data_ptr() + 16, out.data_ptr(), 3)]


def test_a_source_kernel_is_launched_by_its_entry(fake_driver_for: Callable[[Any], Any]) -> None:
    """T.CUDASourceCodeKernel: the entry's symbol, the tensors' data and then the shape symbol."""
    source = 'extern "C" __global__ void copy(float* A, float* B, int n) { B[0] = A[0] + n; }\n'
    N = T.dynamic("N")

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        T.CUDASourceCodeKernel(T.ceildiv(N, 64), threads=64, source_code_or_path=source, entry_name="copy")

    launcher, fake = make(tilelang.lower(main, target=CUDA_SPEC), fake_driver_for)
    a, b = torch.ones(300), torch.zeros(300)
    launcher(a, b)
    (launch,) = fake.launches
    assert launch.symbol == "copy" and launch.grid == (5, 1, 1) and launch.block == (64, 1, 1)
    assert launch.operands == (a.data_ptr(), b.data_ptr(), 300)
