"""The Python side of a compiled launcher: the objects its C state borrows, the error a
failed C check becomes, and ``stream=`` handles.

The C checks and the shared :class:`tilelang.jit.arguments.ArgumentBinder` agree on what
is valid, so when C gives up on a call (a *miss*) the binder's full checks run and raise
the same ArgumentError every execution backend raises. A few conditions only C checks
(declared strides, tensors on two devices, an integer that does not fit its parameter,
a tensor DLPack cannot describe); for those the binder passes and the reason recorded by
C is worded here.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from tilelang.errors import ArgumentError, BackendUnavailableError, LaunchError
from tilelang.plugin import (
    DEVICE_NAMES,
    ArgumentBinder,
    CompiledArtifact,
    KernelLauncher,
    output_torch_dtype,
    stream_handle,
)

# tl_runtime.h's TL_MISS_* codes, in order
(ARGC, NOT_TENSOR, DTYPE, DEVICE, NDIM, SHAPE, SYMBOL, STRIDES, ALIGN, SCALAR, RANGE, DEVICE_ID,
 NO_TORCH) = range(1, 14)

_ONLY_C_CHECKS = {
    NOT_TENSOR: "torch cannot export it through DLPack (a sparse or otherwise non-strided "
                "tensor?); pass a dense tensor",
    STRIDES: "its strides {strides} are not the ones the kernel declares ({declared}); pass a "
             "tensor with that layout",
    RANGE: "{value!r} does not fit its type {dtype}",
    DEVICE_ID: "it is on {device} but an earlier tensor argument is on another device; move "
               "all tensors to one device",
    NO_TORCH: "it is an output, and the cython launcher allocates outputs on the device of the "
              "first torch tensor argument, which this call does not have; pass the output "
              "yourself (compile without out_idx) or use the tvm_ffi or nvrtc execution backend",
}


class _Miss:
    """The sentinel ``tl_call`` returns when a check fails."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<tilelang cython launcher: checks failed>"


@dataclass
class LauncherConfig:
    """Everything the C state reads at creation (tl_runtime.h, tl_state_init_common); the
    launcher keeps this object, so the C side may borrow its references."""

    kernel: str
    miss: object
    launch_error: type
    unavailable_error: type
    torch_tensor: Any
    dlpack_api: Any
    ndarray: Any
    torch_empty: Any
    numpy_empty: Any
    torch_kwnames: tuple[str, ...]
    masked_array: Any
    torch_device: Any
    device_name: str
    cubin: bytes | None
    torch_dtypes: tuple[Any, ...]
    numpy_dtypes: tuple[Any, ...]


def launcher_config(artifact: CompiledArtifact, device_type: int, cubin: bytes | None) -> LauncherConfig:
    """The config for the array libraries this process has imported: loading a cached
    kernel imports neither torch (~1 s) nor numpy, since no argument can be a tensor of a
    library not imported yet; MissHandler reconfigures the launcher when one arrives. Nor
    numpy.ma (5-15 ms, a third of a hit in a torch program): masked arrays are refused (the
    mask would be ignored), and until numpy.ma is imported the C checks send every ndarray
    subclass to MissHandler, which imports it then."""
    torch = sys.modules.get("torch")
    numpy = sys.modules.get("numpy")
    masked = sys.modules.get("numpy.ma") if numpy is not None else None

    outputs = [artifact.params[i] for i in artifact.out_idx]

    def numpy_dtype(name: str) -> Any:
        try:
            return numpy.dtype(name)
        except TypeError:
            return None  # e.g. bfloat16: numpy inputs cannot have such outputs

    return LauncherConfig(
        kernel=artifact.kernel_name,
        miss=_Miss(),
        launch_error=LaunchError,
        unavailable_error=BackendUnavailableError,
        torch_tensor=torch.Tensor if torch is not None else None,
        dlpack_api=torch.Tensor.__dlpack_c_exchange_api__ if torch is not None else None,
        ndarray=numpy.ndarray if numpy is not None else None,
        torch_empty=torch.empty if torch is not None else None,
        numpy_empty=numpy.empty if numpy is not None else None,
        torch_kwnames=("dtype", "device"),
        masked_array=masked.MaskedArray if masked is not None else None,
        torch_device=torch.device if torch is not None else None,
        device_name=DEVICE_NAMES.get(device_type, "cuda"),
        cubin=cubin,
        torch_dtypes=tuple(output_torch_dtype(torch, p) if torch is not None else None for p in outputs),
        numpy_dtypes=tuple(numpy_dtype(p.dtype) if numpy is not None else None for p in outputs),
    )


#: the array libraries a launcher config refers to (launcher_config)
ARRAY_LIBRARIES = ("numpy", "torch")


class MissHandler:
    """Raises the error for a call the C checks refused (see the module docstring). A
    launcher made before numpy or torch was imported does not know their arrays: the first
    call refused after one of them arrived reconfigures it and calls it again."""

    def __init__(self, artifact: CompiledArtifact, binder: ArgumentBinder, device_type: int,
                 cubin: bytes | None, config: LauncherConfig) -> None:
        self.artifact = artifact
        self.binder = binder
        self.device_type = device_type
        self.cubin = cubin
        self.config = config  # the launcher's current one
        self.missing = [m for m in ARRAY_LIBRARIES if m not in sys.modules and importlib.util.find_spec(m)]

    def __call__(self, launcher: Any, args: tuple[Any, ...], stream: Any, code: int, index: int) -> Any:
        arrived = [m for m in self.missing if m in sys.modules]
        # an argument refused as no tensor may be an ndarray subclass, which a launcher
        # configured before numpy.ma was imported cannot tell from a masked array
        unsure = code == NOT_TENSOR and self.config.ndarray is not None and self.config.masked_array is None
        if (arrived and code in (NOT_TENSOR, NO_TORCH)) or unsure:
            if unsure:
                import numpy.ma  # noqa: F401 - launcher_config takes it from sys.modules
            self.missing = [m for m in self.missing if m not in arrived]
            self.config = launcher_config(self.artifact, self.device_type, self.cubin)
            launcher.reconfigure(self.config)
            return launcher(*args) if stream is None else launcher(*args, stream=stream)
        self.binder.bind_checked(args)  # raises the shared, detailed ArgumentError
        kernel = self.artifact.kernel_name
        if index < 0:
            raise ArgumentError(f"kernel {kernel!r}: the compiled launcher refused the call "
                                f"(check {code}) although the shared checks accept it")
        param = self.artifact.params[index]
        value = args[self.binder.inputs.index(index)] if index in self.binder.inputs else None
        template = _ONLY_C_CHECKS.get(code, "the compiled launcher refused it (check {code}) "
                                            "although the shared checks accept it")
        stride = getattr(value, "stride", None)  # torch: elements; numpy: bytes
        strides = tuple(stride()) if callable(stride) else tuple(
            s // value.itemsize for s in getattr(value, "strides", ()))
        device = getattr(value, "device", "cpu")
        raise ArgumentError(f"kernel {kernel!r}, argument {param.name!r} (#{index}): " + template.format(
            code=code, strides=strides, declared=param.strides, value=value, dtype=param.dtype,
            device=device))


def stream_handle_for(device_type: int, kernel: str) -> Any:
    """``stream=`` -> a CUstream handle (an int, or a torch.cuda.Stream/ExternalStream);
    host kernels ignore it, as the tvm_ffi backend does."""
    if device_type == 1:
        return lambda stream: 0
    return lambda stream: stream_handle(stream, kernel)


def make_launcher(module: ModuleType, artifact: CompiledArtifact, device_type: int,
                  cubin: bytes | None) -> KernelLauncher:
    """The extension's Launcher for ``artifact``; it is a KernelLauncher (registered as a
    virtual subclass: a Cython type cannot inherit from a Python ABC)."""
    launcher_type = module.Launcher
    if not issubclass(launcher_type, KernelLauncher):
        KernelLauncher.register(launcher_type)
    binder = ArgumentBinder(artifact, device_type)
    config = launcher_config(artifact, device_type, cubin)
    on_miss = MissHandler(artifact, binder, device_type, cubin, config)
    return launcher_type(config, on_miss, stream_handle_for(device_type, artifact.kernel_name))
