"""Build: device source -> cubin through the target backend's toolchain (``BackendModule.toolchain``)
(nvcc or NVRTC, whichever the CUDA backend picks here), and the errors around it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import tilelang
import tilelang.language as T
from tilelang.backend import create_backend_context
from tilelang.engine.artifact import CompiledArtifact
from tilelang.errors import BackendUnavailableError, CompileError
from tilelang.jit.adapter.nvrtc import driver
from tilelang.jit.adapter.nvrtc.backend import CUBIN, NVRTCExecutionBackend
from tilelang.plugin import DeviceToolchain, toolchain_unavailable_reason
from tilelang.testing.kernels import elementwise_add, row_softmax_sum

CUDA_SPEC = {"kind": "cuda", "arch": "sm_90"}


@pytest.fixture(scope="module")
def cuda_context() -> Any:
    # codegen only: resolves no execution backend, so it works without a GPU
    return create_backend_context(CUDA_SPEC, execution_backend=None)


def toolchain_missing(context: Any) -> str | None:
    return toolchain_unavailable_reason(context.module)


@pytest.mark.parametrize("kernel", ["elementwise_add", "row_softmax_sum"])
def test_build_produces_a_cubin_through_the_target_backend(cuda_context: Any, kernel: str) -> None:
    why = toolchain_missing(cuda_context)
    if why is not None:
        pytest.skip(why)
    func = elementwise_add(T.symbolic("M"), 64) if kernel == "elementwise_add" else row_softmax_sum(32)
    artifact = tilelang.lower(func, target=CUDA_SPEC, out_idx=[-1])
    files = NVRTCExecutionBackend().build(artifact, cuda_context)
    assert list(files) == [CUBIN]
    cubin = files[CUBIN]
    assert cubin[:4] == b"\x7fELF"  # a cubin is an ELF image
    assert b"main_kernel" in cubin  # the launch's symbol, looked up at load


def test_build_passes_source_target_and_name_to_compile_device() -> None:
    artifact = tilelang.lower(row_softmax_sum(32), target=CUDA_SPEC, out_idx=[-1])
    calls = []

    def compile_device(source: str, target: Any, name: str) -> bytes:
        calls.append((source, target, name))
        return b"\x7fELF fake"

    module = SimpleNamespace(name="fake", toolchain=DeviceToolchain("fake", compile=compile_device))
    context = SimpleNamespace(module=module, target="the-target")
    assert NVRTCExecutionBackend().build(artifact, context) == {CUBIN: b"\x7fELF fake"}  # type: ignore[arg-type]
    assert calls == [(artifact.device_source, "the-target", "main")]


def test_build_needs_device_kernels() -> None:
    cpu_artifact = tilelang.lower(elementwise_add(64, 64), target="llvm", out_idx=[-1])
    context = SimpleNamespace(module=SimpleNamespace(name="cpu", toolchain=None))
    with pytest.raises(CompileError, match="nvrtc launches device kernels; target backend 'cpu' produced none"):
        NVRTCExecutionBackend().build(cpu_artifact, context)  # type: ignore[arg-type]


def test_build_needs_a_toolchain() -> None:
    artifact = tilelang.lower(row_softmax_sum(32), target=CUDA_SPEC, out_idx=[-1])
    module = SimpleNamespace(name="acme", toolchain=None, execution_backends=(SimpleNamespace(name="tvm_ffi"),))
    context = SimpleNamespace(module=module)
    with pytest.raises(CompileError, match=r"kernel 'main' \(execution backend 'nvrtc'\): 'nvrtc' compiles device "
                       r"source with the target backend's toolchain, and target backend 'acme' declares none "
                       r"\(BackendModule.toolchain\); use one of its other execution backends: tvm_ffi"):
        NVRTCExecutionBackend().build(artifact, context)  # type: ignore[arg-type]


def test_toolchain_failure_is_a_compile_error() -> None:
    artifact = tilelang.lower(row_softmax_sum(32), target=CUDA_SPEC, out_idx=[-1])

    def compile_device(source: str, target: Any, name: str) -> bytes:
        raise OSError("nvcc: not found")

    module = SimpleNamespace(name="cuda", toolchain=DeviceToolchain("NVRTC/nvcc", compile=compile_device))
    context = SimpleNamespace(module=module, target="the-target")
    with pytest.raises(CompileError, match=r"kernel 'main' \(execution backend 'nvrtc'\): the NVRTC/nvcc toolchain "
                       "of target backend 'cuda' failed: OSError: nvcc: not found"):
        NVRTCExecutionBackend().build(artifact, context)  # type: ignore[arg-type]


def test_artifact_round_trips_through_json(cuda_context: Any) -> None:
    # what load() gets in another process: the cache's JSON, not the in-memory artifact
    artifact = tilelang.lower(row_softmax_sum(32), target=CUDA_SPEC, out_idx=[-1])
    again = CompiledArtifact.from_json(artifact.to_json())
    assert again.launches == artifact.launches and again.params == artifact.params


@pytest.mark.skipif(driver.unavailable_reason() is None, reason="a CUDA driver is present")
def test_load_without_a_driver_says_why(tmp_path: Path, cuda_context: Any) -> None:
    artifact = tilelang.lower(row_softmax_sum(32), target=CUDA_SPEC, out_idx=[-1])
    (tmp_path / CUBIN).write_bytes(b"\x7fELF")
    with pytest.raises(BackendUnavailableError, match="execution backend 'nvrtc' cannot run here: "):
        NVRTCExecutionBackend().load(artifact, tmp_path, cuda_context)
