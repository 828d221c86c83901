"""CPU codegen. Host and device are the same processor, so after the host/device split a
CPU kernel has no device part: the device codegen only ever sees an empty module and says
so clearly if it does not."""

from __future__ import annotations

from typing import Any

from ..backend import DeviceCodegen, HostCodegen, tvm_build_function
from ..errors import CompileError


def _no_device_code(mod: Any, target: Any) -> Any:
    names = [gv.name_hint for gv in mod.functions]
    raise CompileError(
        f"CPU target {target}: the pipeline left device functions {names}; CPU kernels run "
        "entirely as host code (is a device-only construct in the kernel?)"
    )


CPU_DEVICE_CODEGEN = DeviceCodegen(source_only=_no_device_code, compiled=_no_device_code)
LLVM_HOST_CODEGEN = HostCodegen(build=tvm_build_function("llvm"))
C_HOST_CODEGEN = HostCodegen(build=tvm_build_function("c"))
