"""CUDA's launch wrapper for T.annotate_l2_hit_ratio (tilelang/cuda/l2_window.py): the driver
calls around a launch, checked against a recording stand-in for libcuda here, and a real
launch on a GPU (the kernel's result, the stream's window cleared and the persisting-L2
limit restored after it)."""

from __future__ import annotations

import ctypes
import warnings

import pytest
import tilelang
import tilelang.language as T
from tilelang.cuda import l2_window
from tilelang.engine.artifact import CompiledArtifact
from tilelang.errors import LaunchError

MB = 1 << 20


class FakeDriver:
    """libcuda's calls the wrapper makes, recorded; a current context on device 0 with 60 MiB
    of persisting L2 at most and 128 MiB windows, a limit of 0 before."""

    def __init__(self, context: int = 0x1000, fail: str | None = None) -> None:
        self.calls: list[tuple] = []
        self.context, self.fail, self.limit = context, fail, 0

    def cuCtxGetCurrent(self, out):
        out._obj.value = self.context
        return 0

    def cuCtxGetDevice(self, out):
        out._obj.value = 0
        return 0

    def cuDeviceGetAttribute(self, out, attribute, device):
        out._obj.value = {l2_window.MAX_PERSISTING_L2_CACHE_SIZE: 60 * MB,
                          l2_window.MAX_ACCESS_POLICY_WINDOW_SIZE: 128 * MB}[attribute]
        return 0

    def cuCtxGetLimit(self, out, limit):
        out._obj.value = self.limit
        return 0

    def cuCtxSetLimit(self, limit, value):
        self.limit = value.value
        self.calls.append(("limit", value.value))
        return 0

    def cuStreamSetAttribute(self, stream, attribute, value):
        window = value._obj.accessPolicyWindow
        self.calls.append(("window", stream.value or 0, window.base_ptr or 0, window.num_bytes,
                           round(window.hitRatio, 6), window.hitProp, window.missProp))
        return 700 if self.fail == "window" else 0

    def cuCtxResetPersistingL2Cache(self):
        self.calls.append(("reset",))
        return 0


class DeviceArray:
    """What the wrapper reads of a torch tensor on a CUDA device (no GPU here)."""

    is_cuda = True
    device = type("Device", (), {"index": 0})()

    def __init__(self, address: int, nbytes: int) -> None:
        self.address, self.nbytes = address, nbytes

    def data_ptr(self) -> int:
        return self.address

    def numel(self) -> int:
        return self.nbytes

    def element_size(self) -> int:
        return 1


def artifact(windows=((1, 0.75),)) -> CompiledArtifact:
    return CompiledArtifact("k", (), (), "{}", "{}", "cuda", "tvm_ffi", l2_windows=windows)


def wrapped(driver, windows=((1, 0.75),)):
    launches = []

    def launcher(*args, stream=None):
        launches.append((args, stream, list(driver.calls)))
        return "ran"

    l2_window._device_limits.cache_clear()
    return l2_window.L2WindowLauncher(artifact(windows), launcher, driver), launches


def test_the_window_is_set_for_the_launch_and_cleared_after():
    driver = FakeDriver()
    launcher, launches = wrapped(driver)
    a, b = DeviceArray(0xA000, 4 * MB), DeviceArray(0xB000, 80 * MB)
    assert launcher(a, b, stream=0x55) == "ran"
    before = [("limit", 60 * MB), ("window", 0x55, 0xB000, 80 * MB, 0.75, 2, 1)]  # persisting hits, streaming misses
    assert launches == [((a, b), 0x55, before)]
    assert driver.calls == before + [("window", 0x55, 0, 0, 0.0, 0, 0), ("reset",), ("limit", 0)]


def test_a_window_is_at_most_the_devices_largest_and_the_limit_at_most_its_set_aside():
    driver = FakeDriver()
    driver.limit = 5 * MB
    launcher, _ = wrapped(driver, ((0, 1.0),))
    launcher(DeviceArray(0xA000, 512 * MB), stream=0)
    assert driver.calls[:2] == [("limit", 60 * MB), ("window", 0, 0xA000, 128 * MB, 1.0, 2, 1)]
    assert driver.calls[-1] == ("limit", 5 * MB)  # the limit it found


def test_without_a_current_context_or_a_device_array_the_launch_runs_without_a_window():
    for driver, args in ((FakeDriver(context=0), (DeviceArray(1, 8), DeviceArray(2, 8))),
                         (FakeDriver(), (DeviceArray(1, 8), [1.0, 2.0]))):
        launcher, launches = wrapped(driver)
        assert launcher(*args) == "ran" and driver.calls == [] and len(launches) == 1


def test_a_window_the_driver_refuses_is_a_warning_and_the_launch_runs_without_it():
    driver = FakeDriver(fail="window")
    driver.limit = 7
    launcher, launches = wrapped(driver)
    with pytest.warns(UserWarning, match=r"kernel 'k': T.annotate_l2_hit_ratio: the CUDA driver refused "
                                         r"cuStreamSetAttribute; the kernel runs without an L2 window"):
        assert launcher(DeviceArray(1, 8), DeviceArray(2, 8), stream=0) == "ran"
    assert driver.limit == 7 and len(launches) == 1  # the limit put back before the launch
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        launcher(DeviceArray(1, 8), DeviceArray(2, 8), stream=0)  # warned once


def test_an_error_putting_the_stream_back_is_a_launch_error_naming_the_step():
    driver = FakeDriver()
    launcher, _ = wrapped(driver)
    driver.cuCtxResetPersistingL2Cache = lambda: 999
    with pytest.raises(LaunchError, match=r"kernel 'k': T.annotate_l2_hit_ratio: cuCtxResetPersistingL2Cache "
                                          r"failed \(CUresult 999\)"):
        launcher(DeviceArray(1, 8), DeviceArray(2, 8), stream=0)


def test_the_wrapper_keeps_the_launchers_attributes_and_only_wraps_what_asks():
    def launcher(*args, stream=None):
        return None

    launcher.binder = "the binder"
    assert l2_window.wrap_launcher(artifact(()), launcher) is launcher
    assert l2_window.wrap_launcher(artifact(), launcher).binder == "the binder"


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["tvm_ffi", "nvrtc", "cython"])
def test_a_kernel_with_an_l2_window_runs_and_leaves_the_stream_as_it_was(backend):
    """Upstream's test_tvm_ffi_l2_persistent_map kernel: C = A + B with B's lines persisting."""
    torch = pytest.importorskip("torch")
    M = N = 1024

    @T.prim_func
    def kernel(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(M * N // 256, threads=256) as bx:
            T.annotate_l2_hit_ratio({B: 0.8})
            for i in T.Parallel(256):
                C[(bx * 256 + i) // N, (bx * 256 + i) % N] = A[(bx * 256 + i) // N, (bx * 256 + i) % N] + \
                    B[(bx * 256 + i) // N, (bx * 256 + i) % N]

    compiled = tilelang.compile(kernel, out_idx=[-1], target="cuda", execution_backend=backend)
    assert isinstance(compiled.launcher, l2_window.L2WindowLauncher)
    a, b = torch.randn(M, N, device="cuda"), torch.randn(M, N, device="cuda")
    lib = ctypes.CDLL("libcuda.so.1")
    before = ctypes.c_size_t()
    assert lib.cuCtxGetLimit(ctypes.byref(before), l2_window.LIMIT_PERSISTING_L2_CACHE_SIZE) == 0
    torch.testing.assert_close(compiled(a, b), a + b, rtol=0, atol=0)
    value, limit = l2_window.StreamAttrValue(), ctypes.c_size_t(123)
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    assert lib.cuStreamGetAttribute(stream, l2_window.STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, ctypes.byref(value)) == 0
    assert value.accessPolicyWindow.num_bytes == 0
    assert lib.cuCtxGetLimit(ctypes.byref(limit), l2_window.LIMIT_PERSISTING_L2_CACHE_SIZE) == 0
    assert limit.value == before.value
