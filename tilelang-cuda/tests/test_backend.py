"""The CUDA backend's manifest and context behaviour, on a machine with or without a GPU."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import tilelang
from tilelang.backend import create_backend_context, registered_backends
from tilelang.cuda import target as cuda_target

NO_DRIVER = cuda_target.driver_unavailable_reason() is not None


def test_cuda_backend_is_registered_from_its_distribution():
    from tilelang.backend.registry import origin

    assert "cuda" in registered_backends()
    assert origin("backend", "cuda")[0] == "tilelang-cuda"
    module = registered_backends()["cuda"]
    assert [s.name for s in module.execution_backends] == ["tvm_ffi", "nvrtc", "cython"]


def test_cuda_target_without_arch_gets_one():
    context = create_backend_context("cuda", execution_backend=None)
    assert str(context.target.export()["arch"]).startswith("sm_")
    assert context.target_host.kind.name in ("llvm", "c")


@pytest.mark.skipif(not NO_DRIVER, reason="this machine has a CUDA driver")
def test_without_a_driver_auto_is_cpu_and_cuda_execution_is_unavailable():
    assert create_backend_context("auto").module.name == "cpu"
    with pytest.raises(tilelang.BackendUnavailableError, match=r"tvm_ffi: no CUDA driver .*libcuda.so.1"):
        create_backend_context("cuda")


@pytest.mark.skipif(not NO_DRIVER, reason="this machine has a CUDA driver")
def test_backends_list_shows_cuda_unavailable_with_the_reason():
    out = subprocess.run([sys.executable, "-m", "tilelang", "backends", "list", "--json"],
                         capture_output=True, text=True, check=True).stdout
    report = json.loads(out)
    cuda = next(b for b in report["target_backends"] if b["name"] == "cuda")
    assert cuda["distribution"] == "tilelang-cuda"
    assert cuda["status"] == "unavailable" and "no CUDA driver" in cuda["reason"]


@pytest.mark.gpu
def test_auto_picks_the_gpu_when_there_is_one():
    context = create_backend_context("auto")
    assert context.module.name == "cuda" and context.target_source == "auto (cuda)"


@pytest.mark.parametrize(("arch", "device", "runs"), [
    ("sm_75", "sm_90", False), ("sm_80", "sm_86", True), ("sm_86", "sm_80", False), ("sm_90a", "sm_90", True),
    ("sm_90a", "sm_100", False), ("sm_90", "sm_100", False), ("sm_100f", "sm_103", True), ("sm_100a", "sm_103", False),
])
def test_which_gpus_run_a_cubin(arch, device, runs):
    assert cuda_target.runs_on(arch, device) is runs


def test_a_kernel_for_another_gpu_compiles_and_its_launch_says_why_it_cannot_run(monkeypatch):
    """On an sm_90 GPU, a cubin for sm_75 made TVM's runtime stop the process (a segfault)
    when tvm_ffi loaded it; upstream's tests compile for sm_75 on any GPU to read the source."""
    from tilelang.backend.execution_backend import UnrunnableLauncher
    from tilelang.backend.toolchain import device_mismatch
    from tilelang.testing.kernels import elementwise_add

    monkeypatch.setattr(cuda_target, "device_arch", lambda ordinal=0: "sm_90")
    context = create_backend_context({"kind": "cuda", "arch": "sm_75"}, None, None)
    artifact = tilelang.lower(elementwise_add(64, 64), target={"kind": "cuda", "arch": "sm_75"})
    reason = device_mismatch(artifact, context)
    assert reason == ("it was compiled for sm_75 and this GPU is sm_90; compile it with target={'kind': "
                      "'cuda', 'arch': 'sm_90'} or target='auto' to run it here (a kernel compiled for "
                      "another GPU still shows its source)")
    for arch in ("sm_90a", "sm_90"):
        assert device_mismatch(tilelang.lower(elementwise_add(64, 64), target={"kind": "cuda", "arch": arch}),
                               context) is None
    with pytest.raises(tilelang.LaunchError, match=r"kernel 'k' cannot run on this device: it was compiled for sm_75"):
        UnrunnableLauncher("k", reason)()
    monkeypatch.setattr(cuda_target, "device_arch", lambda ordinal=0: None)  # no GPU: nothing to say
    assert device_mismatch(artifact, context) is None


def test_code_for_another_gpu_is_built_keeping_its_source(monkeypatch):
    """A compiled build (tvm_ffi's) for an arch this process's GPU cannot run keeps the
    source in TVM's module, as on a host without a GPU: TVM's runtime module factory would
    take a cubin the GPU cannot load (a tvm_ffi process on the H200 died compiling
    upstream's sm_75 test). The toolchain still compiles it, so its errors surface."""
    from tilelang.cuda import codegen, toolchain
    from tilelang.testing.kernels import elementwise_add

    compiled: list[str] = []
    monkeypatch.setattr(cuda_target, "device_arch", lambda ordinal=0: "sm_90")
    monkeypatch.setattr(toolchain, "compile_for_target",
                        lambda source, target, name="kernel": compiled.append(name) or b"\x7fELF")

    def factory_compile(*args, **kwargs):
        raise AssertionError("TVM's module factory compiled code for another GPU")

    monkeypatch.setattr(codegen, "_compiling_build", factory_compile)
    artifact = tilelang.lower(elementwise_add(64, 64), target={"kind": "cuda", "arch": "sm_75"})
    mod = artifact.device_mod
    from tvm.target import Target

    module = codegen.cuda_compiled(mod, Target({"kind": "cuda", "arch": "sm_75"}))
    assert "__global__" in str(module.inspect_source()) and compiled == ["main_kernel"]
    with pytest.raises(AssertionError, match="module factory"):  # this GPU's own arch: the factory compiles
        codegen.cuda_compiled(mod, Target({"kind": "cuda", "arch": "sm_90"}))
