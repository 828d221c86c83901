"""The ``nvrtc`` execution backend (distribution ``tilelang-exec-nvrtc``).

Build: the target backend's ``compile_device`` callback turns the artifact's CUDA source
into a cubin (NVRTC or nvcc, with its cubin cache). Load: the CUDA driver API loads the
cubin into the current device's context. Launch: ``cuLaunchKernel`` with grid, block,
shared memory and operands computed from the artifact's launch metadata, on the caller's
current torch stream or an explicit ``stream=``.

Importing this package stays light (the plugin entry point imports it): the backend and
launcher classes, cuda-bindings and torch load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .backend import NVRTCExecutionBackend
    from .launcher import NVRTCLauncher

__all__ = ["NVRTCExecutionBackend", "NVRTCLauncher"]


def __getattr__(name: str) -> Any:
    if name == "NVRTCExecutionBackend":
        from .backend import NVRTCExecutionBackend

        return NVRTCExecutionBackend
    if name == "NVRTCLauncher":
        from .launcher import NVRTCLauncher

        return NVRTCLauncher
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
