"""CUDA device codegen: TVM's CUDA codegen (source, no toolchain needed) and a compiled
mode that also builds the cubin with this backend's toolchain, so compile errors surface
at build time and the runtime's load-time compile is a cache hit."""

from __future__ import annotations

from typing import Any

from tilelang.backend import DeviceCodegen, tvm_build_function

from . import toolchain

_build_cuda = tvm_build_function("cuda")


def cuda_source(mod: Any, target: Any) -> str:
    return str(_build_cuda(mod, target).inspect_source())


def cuda_compiled(mod: Any, target: Any) -> Any:
    module = _build_cuda(mod, target)
    names = [gv.name_hint for gv in mod.functions]
    toolchain.compile_for_target(str(module.inspect_source()), target, name=names[0] if names else "kernel")
    return module


CUDA_DEVICE_CODEGEN = DeviceCodegen(source_only=cuda_source, compiled=cuda_compiled)
