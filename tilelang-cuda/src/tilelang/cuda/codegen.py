"""CUDA device codegen: TVM's CUDA codegen (source, no toolchain needed) and a compiled
mode that also builds the cubin with this backend's toolchain, so compile errors surface
at build time and the runtime's load-time compile is a cache hit."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from tilelang.backend import DeviceCodegen, tvm_build_function

from . import toolchain

_build = tvm_build_function("cuda")
DEVICE_HEADER = Path(__file__).with_name("tl_device.h")
_HELPER_PREFIX = "tl_"  # every helper in tl_device.h is named tl_*


@functools.cache
def _device_header() -> str:
    return DEVICE_HEADER.read_text()


def _postproc(code: str, target: Any = None) -> str:
    """TVM's CUDA codegen hands every generated source to ``tvm_callback_cuda_postproc``:
    a kernel that calls our tensor-core / cp.async helpers gets their definitions."""
    if _HELPER_PREFIX + "mma" in code or _HELPER_PREFIX + "cp_async" in code or \
            _HELPER_PREFIX + "ldmatrix" in code:
        return _device_header() + "\n" + code
    return code


@functools.cache
def _install_postproc() -> None:
    import tvm_ffi

    tvm_ffi.register_global_func("tvm_callback_cuda_postproc", _postproc, override=True)


def _build_cuda(mod: Any, target: Any) -> Any:
    _install_postproc()
    return _build(mod, target)


def cuda_source(mod: Any, target: Any) -> str:
    return str(_build_cuda(mod, target).inspect_source())


def cuda_compiled(mod: Any, target: Any) -> Any:
    module = _build_cuda(mod, target)
    names = [gv.name_hint for gv in mod.functions]
    toolchain.compile_for_target(str(module.inspect_source()), target, name=names[0] if names else "kernel")
    return module


CUDA_DEVICE_CODEGEN = DeviceCodegen(source_only=cuda_source, compiled=cuda_compiled)
