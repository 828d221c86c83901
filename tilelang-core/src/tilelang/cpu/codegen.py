"""CPU codegen. Host and device are the same processor, so after the host/device split a
CPU kernel has no device part: the device codegen only ever sees an empty module and says
so clearly if it does not."""

from __future__ import annotations

import re
from typing import Any

from ..backend import DeviceCodegen, HostCodegen, tvm_build_function
from ..errors import CompileError


def _no_device_code(mod: Any, target: Any) -> Any:
    names = [gv.name_hint for gv in mod.functions]
    raise CompileError(
        f"CPU target {target}: the pipeline left device functions {names}; CPU kernels run "
        "entirely as host code (is a device-only construct in the kernel?)"
    )


# TVM's C codegen writes float16 as `half` and defines no such type; GCC >= 12 and
# Clang >= 15 provide _Float16 on x86-64 and AArch64 (ISO/IEC TS 18661-3 interchange type).
_HALF_PRELUDE = "#ifndef TILELANG_HALF_DEFINED\n#define TILELANG_HALF_DEFINED\ntypedef _Float16 half;\n#endif\n"
_build_c = tvm_build_function("c")
# TVM's C codegen prints infinite and NaN constants as printf does, plus a float suffix
# (`-inff`, `(half)-inff`, `nanf`; `-inf` for doubles): no C tokens. C99's <math.h>
# (which the generated source includes) names them INFINITY and NAN.
_NON_FINITE = re.compile(r"(?<![\w.])(inf|nan)f?(?![\w(])")
_C99_NAMES = {"inf": "INFINITY", "nan": "NAN"}


def build_c_host(mod: Any, target: Any) -> Any:
    """TVM's C codegen, with a definition of ``half`` when the source uses it and C99
    names for non-finite constants."""
    import tvm

    module = _build_c(mod, target)
    source = str(module.inspect_source())
    fixed = _NON_FINITE.sub(lambda m: _C99_NAMES[m.group(1)], source)
    if re.search(r"\bhalf\b", fixed):
        fixed = _HALF_PRELUDE + fixed
    if fixed == source:
        return module
    names = [str(f.attrs["global_symbol"]) for f in mod.functions.values()
             if f.attrs is not None and f.attrs.get("global_symbol") is not None]
    create = tvm.get_global_func("runtime.CSourceModuleCreate")
    return create(fixed, "c", names, [])


CPU_DEVICE_CODEGEN = DeviceCodegen(source_only=_no_device_code, compiled=_no_device_code)
LLVM_HOST_CODEGEN = HostCodegen(build=tvm_build_function("llvm"))
C_HOST_CODEGEN = HostCodegen(build=build_c_host)
