"""Registration through the ``tilelang.plugins`` entry points, availability reasons, and what
`tilelang backends list` says about nvrtc."""

from __future__ import annotations

import builtins
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import tilelang
from tilelang.backend.registry import REGISTRY, origin
from tilelang.jit.adapter.nvrtc import driver
from tilelang.jit.adapter.nvrtc.backend import NVRTCExecutionBackend

DIST = "tilelang-exec-nvrtc"


@pytest.fixture
def fresh_probe() -> Iterator[None]:
    """Probe again inside the test, and again after it (the real answer)."""
    driver._probe.cache_clear()
    yield
    driver._probe.cache_clear()


def test_plugin_registers_nvrtc_from_its_distribution() -> None:
    backend = REGISTRY.execution_backends["nvrtc"]
    assert isinstance(backend, NVRTCExecutionBackend)
    assert origin("execution", "nvrtc")[0] == DIST
    assert backend.version == tilelang.__version__  # first-party distributions share one version
    assert backend.description


def test_import_tilelang_does_not_import_the_sdks() -> None:
    code = (
        "import sys, tilelang\n"
        "from tilelang.backend.registry import REGISTRY\n"
        "assert 'nvrtc' in REGISTRY.execution_backends\n"
        "print(sorted(m for m in ('torch', 'cuda.bindings', 'cuda.bindings.driver', 'tvm') "
        "if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_backends_list_json_shows_nvrtc() -> None:
    out = subprocess.run([sys.executable, "-m", "tilelang", "backends", "list", "--json"],
                         capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    entry = next(e for e in data["execution_backends"] if e["name"] == "nvrtc")
    assert entry["distribution"] == DIST
    assert "cuda" in entry["used_by"]
    plugin = next(p for p in data["plugins"] if p["name"] == "nvrtc")
    assert plugin["status"] == "loaded" and plugin["distribution"] == DIST
    why = driver.unavailable_reason()
    if why is None:
        assert entry["status"] == "available" and entry["reason"] is None
    else:  # this machine: no driver, and the listing says so in a sentence
        assert entry["status"] == "unavailable"
        assert entry["reason"] == why
        assert "CUDA driver" in why or "GPU" in why or "cuda-bindings" in why


class _WorkingDriver:
    """libcuda as the probe sees it on a machine with one GPU."""

    def cuInit(self, flags: int) -> int:
        return 0

    def cuDeviceGetCount(self, out: Any) -> int:
        out._obj.value = 1
        return 0


@pytest.fixture
def driver_present(monkeypatch: pytest.MonkeyPatch) -> None:
    # the driver is probed first; these cases are about what is missing after it
    monkeypatch.setattr(driver.ctypes, "CDLL", lambda name: _WorkingDriver())


def test_reason_without_cuda_bindings(fresh_probe: None, driver_present: None,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_cuda_bindings(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("cuda.bindings"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_cuda_bindings)
    why = NVRTCExecutionBackend().unavailable_reason()
    assert why is not None and "pip install cuda-bindings" in why


def test_reason_without_torch(fresh_probe: None, driver_present: None,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = driver.importlib.util.find_spec
    monkeypatch.setattr(driver.importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch" else real_find_spec(name, *a))
    why = NVRTCExecutionBackend().unavailable_reason()
    assert why is not None and "pip install torch" in why


def test_reason_without_a_driver(fresh_probe: None, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_libcuda(name: str, *args: Any, **kwargs: Any) -> Any:
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(driver.ctypes, "CDLL", no_libcuda)
    why = NVRTCExecutionBackend().unavailable_reason()
    assert why == "no CUDA driver on this machine (libcuda.so.1 cannot be loaded)"


def test_reason_when_cuinit_fails_or_no_gpu(fresh_probe: None, monkeypatch: pytest.MonkeyPatch) -> None:
    class FakeLib:
        def __init__(self, init: int, count: int) -> None:
            self.init, self.count = init, count

        def cuInit(self, flags: int) -> int:
            return self.init

        def cuDeviceGetCount(self, out: Any) -> int:
            out._obj.value = self.count
            return 0

    monkeypatch.setattr(driver.ctypes, "CDLL", lambda name: FakeLib(100, 0))
    assert "cuInit" in (NVRTCExecutionBackend().unavailable_reason() or "")
    driver._probe.cache_clear()
    monkeypatch.setattr(driver.ctypes, "CDLL", lambda name: FakeLib(0, 0))
    assert NVRTCExecutionBackend().unavailable_reason() == "the CUDA driver sees no GPU"


def test_probe_is_cached(fresh_probe: None, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def counting(name: str) -> Any:
        calls.append(name)
        raise OSError(name)

    monkeypatch.setattr(driver.ctypes, "CDLL", counting)
    backend = NVRTCExecutionBackend()
    assert backend.unavailable_reason() == backend.unavailable_reason()
    assert calls == ["libcuda.so.1"]


@pytest.mark.skipif(driver.unavailable_reason() is None, reason="a CUDA driver is present")
def test_compile_for_nvrtc_without_a_driver_names_the_reason() -> None:
    from tilelang.errors import BackendUnavailableError
    from tilelang.testing.kernels import elementwise_add

    with pytest.raises(BackendUnavailableError, match=r"nvrtc: .*(CUDA driver|GPU|cuda-bindings)"):
        tilelang.compile(elementwise_add(64, 64), out_idx=[-1], target={"kind": "cuda", "arch": "sm_90"},
                         execution_backend="nvrtc")


def test_a_cubin_for_another_gpu_is_not_loaded(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """The target backend's toolchain says the kernel cannot run on this process's GPU
    (an sm_75 cubin on an sm_90): load leaves the cubin alone, a launch says why."""
    from tilelang.backend import create_backend_context
    from tilelang.jit.adapter.nvrtc import backend
    from tilelang.testing.kernels import elementwise_add

    if "cuda" not in tilelang.backend.registered_backends():
        pytest.skip("tilelang-cuda is not installed")
    monkeypatch.setattr(backend, "device_mismatch", lambda artifact, context: "it was compiled for sm_75")
    target = {"kind": "cuda", "arch": "sm_75"}
    artifact = tilelang.lower(elementwise_add(64, 64), target=target)
    launcher = NVRTCExecutionBackend().load(artifact, tmp_path, create_backend_context(target, None, None))
    with pytest.raises(tilelang.LaunchError, match="kernel 'main' cannot run on this device: it was compiled for sm_75"):
        launcher()
