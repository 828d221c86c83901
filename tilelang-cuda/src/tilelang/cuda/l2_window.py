"""T.annotate_l2_hit_ratio on CUDA: a persisting L2 access-policy window around a launch.

The artifact names the tensors (``CompiledArtifact.l2_windows``: index among the call's
inputs, hit ratio). Around each launch of such a kernel the wrapper, as upstream's runtime
does around its kernel:

1. sets the context's persisting-L2 set-aside (``CU_LIMIT_PERSISTING_L2_CACHE_SIZE``) to the
   window's size, at most the device's ``MAX_PERSISTING_L2_CACHE_SIZE``, keeping the limit
   it found;
2. sets the launch stream's access-policy window to the tensor's bytes (at most the device's
   ``MAX_ACCESS_POLICY_WINDOW_SIZE``): that fraction of its lines persisting, the rest
   streaming;
3. launches;
4. clears the stream's window, demotes the persisting lines (``cuCtxResetPersistingL2Cache``)
   and puts the limit back.

A stream holds one window: with several tensors the last one named applies (upstream sets
them one after another). The stream is ``stream=`` or the caller's current torch stream on
the tensor's device (the one the launchers launch on). Where no CUDA context is current, or
the argument is not a torch tensor on a CUDA device, the call runs without a window: the
window only decides which lines stay cached, never a result. So does a call whose window
the driver refuses (a GPU partitioned with MIG, say), with one warning naming the step. An
error while putting the stream and the limit back after the launch is a LaunchError.
"""

from __future__ import annotations

import ctypes
import functools
import warnings
from typing import Any

from tilelang.plugin import LaunchError, current_stream_accessor, stream_handle

from .target import _driver

MAX_PERSISTING_L2_CACHE_SIZE = 108  # CU_DEVICE_ATTRIBUTE_*
MAX_ACCESS_POLICY_WINDOW_SIZE = 109
LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06  # CU_LIMIT_*
STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW = 1  # CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW
ACCESS_PROPERTY_STREAMING, ACCESS_PROPERTY_PERSISTING = 1, 2


class AccessPolicyWindow(ctypes.Structure):
    """CUaccessPolicyWindow (cuda.h)."""

    _fields_ = [("base_ptr", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t), ("hitRatio", ctypes.c_float),
                ("hitProp", ctypes.c_int), ("missProp", ctypes.c_int)]


class StreamAttrValue(ctypes.Union):
    """CUstreamAttrValue (CUlaunchAttributeValue): 64 bytes, the window first."""

    _fields_ = [("pad", ctypes.c_char * 64), ("accessPolicyWindow", AccessPolicyWindow)]


def _check(result: int, step: str, kernel: str) -> None:
    if result != 0:
        raise LaunchError(f"kernel {kernel!r}: T.annotate_l2_hit_ratio: {step} failed (CUresult {result})")


@functools.cache
def _device_limits(lib: Any, device: int) -> tuple[int, int]:
    """(max persisting L2 bytes, max window bytes) of a CUDA device."""
    persisting, window = ctypes.c_int(0), ctypes.c_int(0)
    lib.cuDeviceGetAttribute(ctypes.byref(persisting), MAX_PERSISTING_L2_CACHE_SIZE, device)
    lib.cuDeviceGetAttribute(ctypes.byref(window), MAX_ACCESS_POLICY_WINDOW_SIZE, device)
    return persisting.value, window.value


def _address_and_bytes(value: Any) -> tuple[int, int, int] | None:
    """(data pointer, bytes, device index) of a torch tensor on a CUDA device (the only
    device arrays the launchers take), else None."""
    if not getattr(value, "is_cuda", False):
        return None
    return value.data_ptr(), value.numel() * value.element_size(), value.device.index


class L2WindowLauncher:
    """A launcher that sets the artifact's L2 window around each launch (module docstring);
    everything else is the wrapped launcher's."""

    def __init__(self, artifact: Any, launcher: Any, driver: Any = None) -> None:
        self._launcher = launcher
        self._kernel = artifact.kernel_name
        self._index, self._ratio = artifact.l2_windows[-1]  # one window a stream: the last named
        self._driver = driver
        self._warned = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._launcher, name)

    def _lib(self) -> Any:
        if self._driver is None:
            self._driver = _driver()[0]
        return self._driver

    def __call__(self, *args: Any, stream: Any = None) -> Any:
        found = _address_and_bytes(args[self._index]) if self._index < len(args) else None
        lib = self._lib() if found is not None else None
        context = ctypes.c_void_p()
        if lib is None or lib.cuCtxGetCurrent(ctypes.byref(context)) != 0 or not context.value:
            return self._launch(args, stream)
        address, size, torch_device = found
        handle = self._stream(stream, torch_device)
        device = ctypes.c_int()
        _check(lib.cuCtxGetDevice(ctypes.byref(device)), "cuCtxGetDevice", self._kernel)
        max_persisting, max_window = _device_limits(lib, device.value)
        if max_persisting <= 0 or max_window <= 0 or size == 0:  # no persisting L2 on this GPU
            return self._launch(args, stream)
        previous = ctypes.c_size_t()
        if lib.cuCtxGetLimit(ctypes.byref(previous), LIMIT_PERSISTING_L2_CACHE_SIZE) != 0:
            return self._without_window("cuCtxGetLimit", args, stream)
        window = min(size, max_window)
        if lib.cuCtxSetLimit(LIMIT_PERSISTING_L2_CACHE_SIZE, ctypes.c_size_t(min(window, max_persisting))) != 0:
            return self._without_window("cuCtxSetLimit", args, stream)
        value = StreamAttrValue()
        value.accessPolicyWindow = AccessPolicyWindow(address, window, self._ratio, ACCESS_PROPERTY_PERSISTING,
                                                      ACCESS_PROPERTY_STREAMING)
        stream_ptr = ctypes.c_void_p(handle)
        if lib.cuStreamSetAttribute(stream_ptr, STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, ctypes.byref(value)) != 0:
            _check(lib.cuCtxSetLimit(LIMIT_PERSISTING_L2_CACHE_SIZE, previous), "cuCtxSetLimit (restoring)",
                   self._kernel)
            return self._without_window("cuStreamSetAttribute", args, stream)
        try:
            return self._launch(args, stream)
        finally:
            _check(lib.cuStreamSetAttribute(stream_ptr, STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW,
                                            ctypes.byref(StreamAttrValue())), "cuStreamSetAttribute (clearing)",
                   self._kernel)
            _check(lib.cuCtxResetPersistingL2Cache(), "cuCtxResetPersistingL2Cache", self._kernel)
            _check(lib.cuCtxSetLimit(LIMIT_PERSISTING_L2_CACHE_SIZE, previous), "cuCtxSetLimit (restoring)",
                   self._kernel)

    def _without_window(self, step: str, args: tuple[Any, ...], stream: Any) -> Any:
        if not self._warned:
            self._warned = True
            warnings.warn(f"kernel {self._kernel!r}: T.annotate_l2_hit_ratio: the CUDA driver refused {step}; the "
                          "kernel runs without an L2 window (its results are the same)", stacklevel=3)
        return self._launch(args, stream)

    def _launch(self, args: tuple[Any, ...], stream: Any) -> Any:
        return self._launcher(*args) if stream is None else self._launcher(*args, stream=stream)

    def _stream(self, stream: Any, torch_device: int) -> int:
        if stream is not None:
            return stream_handle(stream, self._kernel)
        import torch

        return int(current_stream_accessor(torch)(torch_device))


def wrap_launcher(artifact: Any, launcher: Any) -> Any:
    """BackendModule.launch_wrapper of the CUDA backend."""
    return L2WindowLauncher(artifact, launcher) if artifact.l2_windows else launcher


__all__ = ["L2WindowLauncher", "wrap_launcher"]
