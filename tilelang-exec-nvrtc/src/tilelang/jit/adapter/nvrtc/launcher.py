"""NVRTCLauncher: validate and bind arguments, then launch each device kernel with
``cuLaunchKernel`` on the caller's stream.

Per call: ArgumentBinder.bind (shared checks, output allocation), the current stream of the
tensors' device, then per launch one generated function call (grid, block, shared memory,
operands), one ``struct.pack_into`` into preallocated storage and one ``cuLaunchKernel``
that receives the address of the ``void**`` array pointing into that storage. Everything
else (generated functions, storage, the array, function handles) is prepared at load time.
"""

from __future__ import annotations

import struct
import threading
import weakref
from typing import Any

from tilelang.errors import ArgumentError, LaunchError
from tilelang.plugin import (
    ArgumentBinder,
    CompiledArtifact,
    KernelLauncher,
    stream_handle,
)

from .driver import CUDA_ERROR_INVALID_CONTEXT, Driver, LoadedImage
from .launch_plan import ARG_FORMATS, LaunchValues, OperandBuffer, launch_values

CUDA_DEVICE = 2  # DLPack kDLCUDA

# likely causes, by CUresult name (sticky errors come from an earlier kernel, not this one)
_HINTS = {
    "CUDA_ERROR_INVALID_VALUE": "a grid or block extent, or the shared memory size, is out of range",
    "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES": "the block needs more registers or threads than the GPU has",
    "CUDA_ERROR_ILLEGAL_ADDRESS": "an earlier asynchronous kernel failed; the context is unusable",
    "CUDA_ERROR_LAUNCH_FAILED": "an earlier asynchronous kernel failed; the context is unusable",
    "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE": (
        "the kernel waits at T.sync_grid, so every block must be resident at once, and the grid has "
        "more blocks than the GPU holds together; launch at most the SM count times the blocks one SM "
        "holds (a persistent grid)"),
}


class _Launch:
    """One launch of a loaded kernel: its generated function and operand storage."""

    __slots__ = ("buffer", "info", "pack_into", "params", "storage", "values")

    def __init__(self, info: LaunchValues) -> None:
        self.info = info
        self.values = info.function
        self.buffer = OperandBuffer(info.arg_types)
        self.pack_into = self.buffer.format.pack_into
        self.storage = self.buffer.storage
        self.params = self.buffer.params_address


class _Loaded:
    """A loaded image and, per launch, ``(index, launch, function)`` ready to iterate."""

    __slots__ = ("entries", "image")

    def __init__(self, image: LoadedImage, launches: tuple[_Launch, ...]) -> None:
        self.image = image
        self.entries = tuple(zip(range(len(launches)), launches, image.functions))


class NVRTCLauncher(KernelLauncher):
    """A cubin loaded for the current device (and, on demand, for others).

    ``driver`` is the CUDA driver (:func:`driver.cuda_driver`) or a stand-in with the same
    attributes; ``device_type`` is the DLPack device type arguments must live on (CUDA;
    tests use CPU tensors with a fake driver)."""

    def __init__(self, artifact: CompiledArtifact, cubin: bytes, driver: Driver,
                 device_type: int = CUDA_DEVICE) -> None:
        self.kernel = artifact.kernel_name
        self._binder = ArgumentBinder(artifact, device_type)
        self._bind = self._binder.bind
        self._launches = tuple(_Launch(launch_values(artifact, launch)) for launch in artifact.launches)
        self._symbols = tuple(launch.symbol for launch in artifact.launches)
        self._single = len(artifact.out_idx) == 1
        # the device of the first tensor is the device of all (the binder checks the type,
        # kernels that mix devices cannot run anyway); None: a kernel without tensors
        self._anchor = next((i for i, p in enumerate(artifact.params) if p.is_tensor), None)
        self._cubin = cubin
        self._driver = driver
        self._launch_kernel = driver.launch_kernel
        self._current_device = driver.current_device
        self._current_stream = driver.current_stream
        # the operand storage is shared by all calls: another thread must not pack while
        # cuLaunchKernel (which runs without the GIL) reads it
        self._lock = threading.Lock()
        self._loaded: dict[int, _Loaded] = {}
        self._device = driver.current_device()
        self._here = self._load(self._device)

    @property
    def launch_sources(self) -> tuple[str, ...]:
        """The generated ``_launch_values`` source of each launch (for debugging)."""
        return tuple(launch.info.source for launch in self._launches)

    def _load(self, device: int) -> _Loaded:
        image = self._driver.load_image(self._cubin, self._symbols, device)
        # unloaded when this launcher is collected; not at interpreter exit, where the
        # driver may already be shutting down and the process frees everything anyway
        weakref.finalize(self, self._driver.unload_image, image).atexit = False
        for index, launch in enumerate(self._launches):
            smem = launch.info.constant_smem
            if smem is not None and smem > image.smem_limits[index]:
                self._raise_smem_limit(image, index, smem)
        loaded = self._loaded[device] = _Loaded(image, self._launches)
        return loaded

    def __call__(self, *args: Any, stream: Any = None) -> Any:
        call, outputs, symbols = self._bind(args)
        device = self._device if self._anchor is None else call[self._anchor].get_device()
        if stream is None:
            stream = self._current_stream(device)  # read per call: follow the caller's stream
        elif type(stream) is not int:
            stream = stream_handle(stream, self.kernel)
        if device == self._device and self._current_device() == device:
            self._launch_all(self._here, call, symbols, stream)
        else:
            self._launch_elsewhere(device, call, symbols, stream)
        if not outputs:
            return None
        return outputs[0] if self._single else list(outputs)

    def _launch_all(self, loaded: _Loaded, call: list[Any], symbols: dict[str, int], stream: int) -> None:
        launch_kernel = self._launch_kernel
        image = loaded.image
        limits = image.smem_limits
        with self._lock:
            for index, launch, function in loaded.entries:
                gx, gy, gz, bx, by, bz, smem, operands = launch.values(*call, **symbols)
                if gx <= 0 or gy <= 0 or gz <= 0:
                    if gx == 0 or gy == 0 or gz == 0:
                        continue  # an empty problem (a zero-size dimension): nothing to run
                    raise LaunchError(f"kernel {self.kernel!r}: launch of {launch.info.symbol!r} "
                                      f"has a negative grid ({gx}, {gy}, {gz})")
                try:
                    launch.pack_into(launch.storage, 0, *operands)
                except struct.error as err:
                    raise self._operand_error(launch, operands, err) from None
                if smem > limits[index]:
                    self._raise_smem_limit(image, index, smem)
                if launch.info.cooperative:  # T.sync_grid: every block resident at once (no `extra`)
                    launch_now, extra = self._driver.launch_cooperative_kernel, ()
                else:
                    launch_now, extra = launch_kernel, (0,)
                (result,) = launch_now(function, gx, gy, gz, bx, by, bz, smem, stream, launch.params, *extra)
                if result == CUDA_ERROR_INVALID_CONTEXT:
                    # a thread that never touched CUDA has no current context: bind the
                    # device's primary context and try once more
                    self._driver.ensure_context(image.device)
                    (result,) = launch_now(function, gx, gy, gz, bx, by, bz, smem, stream, launch.params, *extra)
                if result:
                    raise self._launch_error(launch, result, (gx, gy, gz), (bx, by, bz), smem)

    def _launch_elsewhere(self, device: int, call: list[Any], symbols: dict[str, int], stream: int) -> None:
        """Tensors on another device than the one loaded first, or another current device:
        launch on the tensors' device, in its context, like torch's device guard does."""
        if device < 0:
            raise ArgumentError(f"kernel {self.kernel!r}: its tensors are not on a CUDA device")
        with self._driver.device_guard(device):
            loaded = self._loaded.get(device) or self._load(device)
            self._launch_all(loaded, call, symbols, stream)

    def _raise_smem_limit(self, image: LoadedImage, index: int, smem: int) -> None:
        """Opt in to more than 48 KiB of dynamic shared memory for one function."""
        result = self._driver.set_max_dynamic_smem(image.functions[index], smem)
        if result:
            most = self._driver.max_dynamic_smem(image.device)
            limit = f"; this GPU allows at most {most} bytes per block" if most is not None else ""
            raise LaunchError(
                f"kernel {self.kernel!r}: {self._launches[index].info.symbol!r} needs {smem} bytes of "
                f"dynamic shared memory, which cuFuncSetAttribute refused with "
                f"{self._driver.error_name(result)}{limit}; use smaller tiles"
            )
        image.smem_limits[index] = smem

    def _operand_error(self, launch: _Launch, operands: tuple[Any, ...], err: struct.error) -> ArgumentError:
        for expr, arg_type, value in zip(launch.info.operands, launch.info.arg_types, operands):
            try:
                struct.pack("<" + ARG_FORMATS[arg_type], value)
            except struct.error:
                return ArgumentError(f"kernel {self.kernel!r}: operand {expr!r} of "
                                     f"{launch.info.symbol!r} is {value!r}, which does not fit "
                                     f"its type {arg_type} ({err})")
        return ArgumentError(f"kernel {self.kernel!r}: operands of {launch.info.symbol!r} cannot be packed: {err}")

    def _launch_error(self, launch: _Launch, code: int, grid: tuple[int, ...], block: tuple[int, ...],
                      smem: int) -> LaunchError:
        code = int(code)
        name = self._driver.error_name(code)
        hint = _HINTS.get(name)
        return LaunchError(
            f"kernel {self.kernel!r}: {'cuLaunchCooperativeKernel' if launch.info.cooperative else 'cuLaunchKernel'}"
            f"({launch.info.symbol!r}, grid {grid}, block "
            f"{block}, {smem} bytes dynamic shared memory) failed with {name} ({code})"
            + (f": {hint}" if hint else "")
        )
