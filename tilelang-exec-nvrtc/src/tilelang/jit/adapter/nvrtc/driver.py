"""The CUDA driver as the nvrtc launcher sees it: probe, context, module load/unload, and
the ``cuLaunchKernel`` entry point.

Everything goes through cuda-bindings except the availability probe (ctypes on libcuda, so
that listing backends imports no SDK). The per-call launch passes the address of a
``void**`` array prepared at load time (launch_plan.OperandBuffer): what makes cuda-bindings
slow per call (6-10 us) is packing Python argument tuples into such an array, which we
never ask it to do. Measured on an H200 (driver 580, cuda-bindings 13): cuda-bindings'
``cuLaunchKernel`` with a prepared address costs 4.0 us a call, the same call through a
ctypes prototype 5.2 us (libffi marshals 11 arguments), the driver's own work being most of
either. API reference: CUDA Driver API, "Module Management" and "Execution Control"
(https://docs.nvidia.com/cuda/cuda-driver-api/).

:class:`CUDADriver` is the only object here that touches hardware; the launcher receives
it as a parameter, so tests can hand it a fake that records launches.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from tilelang.errors import BackendUnavailableError, LaunchError
from tilelang.plugin import current_stream_accessor

CUDA_ERROR_INVALID_CONTEXT = 201
# Kernels may use up to 48 KiB of dynamic shared memory without opting in; beyond that
# CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES must be raised first (CUDA C++
# Programming Guide, "Shared Memory": allocations above 48 KB need an explicit opt-in).
DEFAULT_DYNAMIC_SMEM_LIMIT = 48 * 1024


@functools.cache
def _probe() -> str | None:
    """None, or why kernels cannot run here. Probed once per process. The driver comes
    first (ctypes on libcuda, like tilelang-cuda's target probe): without a GPU that is the
    answer whatever else is installed; then the Python packages the launcher uses."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return "no CUDA driver on this machine (libcuda.so.1 cannot be loaded)"
    if lib.cuInit(0) != 0:
        return "the CUDA driver failed to initialize (cuInit): is a GPU visible to this process?"
    count = ctypes.c_int(0)
    if lib.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return "the CUDA driver sees no GPU"
    try:
        import cuda.bindings.driver  # noqa: F401
    except ImportError:
        return "cuda-bindings is not installed (pip install cuda-bindings)"
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed; nvrtc kernels take torch CUDA tensors (pip install torch)"
    return None


def unavailable_reason() -> str | None:
    """None when kernels can be launched here, else why not (cached)."""
    return _probe()


@dataclass
class LoadedImage:
    """A cubin loaded into one device's context, and its functions in launch order.
    Handles are the driver's objects (cuda-bindings CUcontext/CUmodule/CUfunction)."""

    device: int
    context: Any
    module: Any
    functions: tuple[Any, ...]
    # the dynamic shared memory each function may use now; raised on demand
    smem_limits: list[int] = field(default_factory=list)


class Driver(Protocol):
    """What NVRTCLauncher needs from the driver: :class:`CUDADriver`, or a stand-in that
    records launches (tests). Per-call entries are attributes holding plain callables."""

    #: (function, gx, gy, gz, bx, by, bz, smem, stream, params address, extra) -> (CUresult,)
    launch_kernel: Callable[..., tuple[int]]
    #: the same without ``extra``, every block resident at once (a kernel that calls T.sync_grid)
    launch_cooperative_kernel: Callable[..., tuple[int]]
    #: () -> the caller's current device index
    current_device: Callable[[], int]
    #: (device) -> the CUstream the caller launches on for that device now
    current_stream: Callable[[int], int]

    def device_guard(self, device: int) -> contextlib.AbstractContextManager[Any]:
        """Make ``device`` current for the duration of a ``with`` block."""

    def ensure_context(self, device: int) -> Any:
        """Make a context of ``device`` current on this thread; return it."""

    def load_image(self, cubin: bytes, symbols: tuple[str, ...], device: int) -> LoadedImage:
        """Load ``cubin`` for ``device`` and look up ``symbols``; raise LaunchError."""

    def unload_image(self, image: LoadedImage) -> None:
        """Unload an image; never raises (runs from a finalizer)."""

    def set_max_dynamic_smem(self, function: Any, nbytes: int) -> int:
        """Allow ``function`` ``nbytes`` of dynamic shared memory; return the CUresult."""

    def max_dynamic_smem(self, device: int) -> int | None:
        """The most dynamic shared memory a block may opt in to, if known."""

    def error_name(self, code: int) -> str:
        """The CUresult's name, e.g. CUDA_ERROR_INVALID_VALUE."""


class CUDADriver:
    """The real driver. Attributes used per call are plain callables, looked up once."""

    def __init__(self) -> None:
        import torch
        from cuda.bindings import driver as cu

        if not torch.cuda.is_available():
            raise BackendUnavailableError(
                f"execution backend 'nvrtc' needs torch with CUDA support; this torch "
                f"({torch.__version__}) has none: install a CUDA build of torch"
            )
        self._cu = cu
        self._torch = torch
        #: (function, gx, gy, gz, bx, by, bz, smem, stream, params address, extra) -> (CUresult,)
        self.launch_kernel: Callable[..., tuple[int]] = cu.cuLaunchKernel
        self.launch_cooperative_kernel: Callable[..., tuple[int]] = cu.cuLaunchCooperativeKernel
        # torch's current device and raw current stream (an int): the private accessors are
        # what torch's own generated launchers (Inductor/Triton) read; the public ones run
        # torch's lazy-init check or allocate a Stream object per call (core's accessor)
        get_device = getattr(torch._C, "_cuda_getDevice", None)
        #: () -> torch's current device index
        self.current_device: Callable[[], int] = get_device or torch.cuda.current_device
        #: (device) -> the CUstream torch launches on for that device now
        self.current_stream: Callable[[int], int] = current_stream_accessor(torch)
        torch.cuda.init()  # the private accessors assume torch's CUDA state exists

    def device_guard(self, device: int) -> contextlib.AbstractContextManager[Any]:
        """Make ``device`` torch's current device (and its primary context current)."""
        return self._torch.cuda.device(device)

    def ensure_context(self, device: int) -> Any:
        """The current context if it belongs to ``device``, else the device's primary
        context (the one torch and the CUDA runtime use), made current on this thread."""
        cu = self._cu
        ctx = _check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
        if int(ctx) != 0 and int(_check(cu.cuCtxGetDevice(), "cuCtxGetDevice")) == device:
            return ctx
        dev = _check(cu.cuDeviceGet(device), "cuDeviceGet")
        # retained once per device and process, never released: torch holds it as well
        ctx = _check(cu.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
        _check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        return ctx

    def load_image(self, cubin: bytes, symbols: tuple[str, ...], device: int) -> LoadedImage:
        cu = self._cu
        context = self.ensure_context(device)
        module = _check(cu.cuModuleLoadData(cubin), "cuModuleLoadData (loading the cubin)")
        try:
            functions = tuple(
                _check(cu.cuModuleGetFunction(module, s.encode()), f"cuModuleGetFunction({s!r})")
                for s in symbols
            )
        except LaunchError:
            cu.cuModuleUnload(module)
            raise
        # the 48 KiB without opt-in count static shared memory too (a TMA ring's 1 KiB of
        # mbarriers): dynamic memory beyond 48 KiB less the static size needs the attribute
        limits = [DEFAULT_DYNAMIC_SMEM_LIMIT - self._static_smem(f) for f in functions]
        return LoadedImage(device, context, module, functions, limits)

    def _static_smem(self, function: Any) -> int:
        attr = self._cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
        err, value = self._cu.cuFuncGetAttribute(attr, function)
        return int(value) if int(err) == 0 else 0

    def unload_image(self, image: LoadedImage) -> None:
        """Unload from the image's own context, whatever thread the GC runs this on."""
        cu = self._cu
        # a finalizer must not raise (the driver may be shutting down): errors are dropped
        with contextlib.suppress(Exception):
            if int(cu.cuCtxPushCurrent(image.context)[0]) != 0:
                return
            try:
                cu.cuModuleUnload(image.module)
            finally:
                cu.cuCtxPopCurrent()

    def set_max_dynamic_smem(self, function: Any, nbytes: int) -> int:
        """cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES); returns the CUresult."""
        attr = self._cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        return int(self._cu.cuFuncSetAttribute(function, attr, nbytes)[0])

    def max_dynamic_smem(self, device: int) -> int | None:
        """The most dynamic shared memory a block may opt in to on ``device``."""
        cu = self._cu
        err, dev = cu.cuDeviceGet(device)
        if int(err) != 0:
            return None
        attr = cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
        err, value = cu.cuDeviceGetAttribute(attr, dev)
        return int(value) if int(err) == 0 else None

    def error_name(self, code: int) -> str:
        try:
            return str(self._cu.CUresult(code).name)
        except ValueError:
            return f"CUresult {code}"


def _check(result: tuple[Any, ...], what: str) -> Any:
    """A cuda-bindings result tuple -> its value, or LaunchError naming the CUDA error."""
    err = result[0]
    if int(err) != 0:
        name = getattr(err, "name", None) or f"CUresult {int(err)}"
        raise LaunchError(f"nvrtc: {what} failed with {name}")
    return result[1] if len(result) == 2 else None


@functools.cache
def cuda_driver() -> CUDADriver:
    """The process's driver; BackendUnavailableError when kernels cannot run here."""
    why = _probe()
    if why is not None:
        raise BackendUnavailableError(f"execution backend 'nvrtc' cannot run here: {why}")
    return CUDADriver()
