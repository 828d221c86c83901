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
