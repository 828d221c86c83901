"""The ``cython`` execution backend (distribution ``tilelang-exec-cython``).

Build: for each kernel, a launcher is generated (a small Cython module over generated C)
and compiled with the machine's C compiler; CPU kernels' C compute function is compiled
into it, CUDA kernels get a cubin from the target backend's toolchain. Load: the extension
is imported. Launch: one call checks the arguments in C (dtype, shape and symbolic
dimensions, device, contiguity, alignment), allocates the outputs and runs the kernel.

Importing this package stays light (the plugin entry point imports it): the backend and
launcher classes, Cython and torch load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .backend import CythonExecutionBackend

__all__ = ["CythonExecutionBackend"]


def __getattr__(name: str) -> Any:
    if name == "CythonExecutionBackend":
        from .backend import CythonExecutionBackend

        return CythonExecutionBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
