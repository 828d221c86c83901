"""CPU codegen. Host and device are the same processor, so after the host/device split a
CPU kernel has no device part: the device codegen only ever sees an empty module and says
so clearly if it does not."""

from __future__ import annotations

import math
import re
from typing import Any

from ..backend import DeviceCodegen, HostCodegen, tvm_build_function
from ..engine.callback import apply_source_postproc
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
_build_c = tvm_build_function("c", source_lines=True)
# TVM's C codegen prints infinite and NaN constants as printf does, plus a float suffix
# (`-inff`, `(half)-inff`, `nanf`; `-inf` for doubles): no C tokens. C99's <math.h>
# (which the generated source includes) names them INFINITY and NAN.
_NON_FINITE = re.compile(r"(?<![\w.])(inf|nan)f?(?![\w(])")
_C99_NAMES = {"inf": "INFINITY", "nan": "NAN"}


# TVM's C codegen prints a float constant with printf's %e (7 significant digits), which
# does not round-trip every float32 (that takes 9) or float64 (17): 100.34375f came out as
# 1.003438e+02f. A constant that %e would change is written as its bits instead.
# (static inline functions, defined before TVM's own declaration of the extern it calls:
# that later declaration then keeps the internal linkage, C11 6.2.2p5)
_EXACT_PRELUDE = (
    "#ifndef TILELANG_FLOAT_BITS_DEFINED\n#define TILELANG_FLOAT_BITS_DEFINED\n#include <stdint.h>\n"
    "static inline float TL_F32_BITS(uint32_t b) { union { uint32_t u; float f; } c; c.u = b; return c.f; }\n"
    "static inline double TL_F64_BITS(uint64_t b) { union { uint64_t u; double f; } c; c.u = b; return c.f; }\n"
    "#endif\n")


def _exact_float_constants(mod: Any) -> tuple[Any, bool]:
    """``mod`` with every float32/float64 constant that %e would round written as its bits."""
    import struct

    import tvm
    import tvm_ffi
    from tvm import tirx

    changed = [False]

    def on_float(node: Any) -> Any:
        dtype, value = str(node.ty.dtype), float(node.value)
        if dtype not in ("float32", "float64") or not math.isfinite(value):
            return node
        if float(f"{value:e}") == value:
            return node
        changed[0] = True
        if dtype == "float32":
            bits = struct.unpack("<I", struct.pack("<f", value))[0]
            return tirx.call_pure_extern("float32", "TL_F32_BITS", tirx.IntImm("uint32", bits))
        bits = struct.unpack("<Q", struct.pack("<d", value))[0]
        return tirx.call_pure_extern("float64", "TL_F64_BITS", tirx.IntImm("uint64", bits))

    functions = {}
    for gv, func in mod.functions.items():
        if isinstance(func, tirx.PrimFunc):
            func = func.with_body(tvm_ffi.structural_map(func.body, (tirx.FloatImm, on_float), order="post"))
        functions[gv] = func
    return (tvm.IRModule(functions, attrs=mod.attrs) if changed[0] else mod), changed[0]


def build_c_host(mod: Any, target: Any) -> Any:
    """TVM's C codegen, with a definition of ``half`` when the source uses it, C99 names
    for non-finite constants, and float constants that keep every bit."""
    import tvm

    mod, exact = _exact_float_constants(mod)
    module = _build_c(mod, target)
    source = str(module.inspect_source())
    fixed = _NON_FINITE.sub(lambda m: _C99_NAMES[m.group(1)], apply_source_postproc("c", source))
    if re.search(r"\bhalf\b", fixed):
        fixed = _HALF_PRELUDE + fixed
    if exact:
        fixed = _EXACT_PRELUDE + fixed
    if fixed == source:
        return module
    names = [str(f.attrs["global_symbol"]) for f in mod.functions.values()
             if f.attrs is not None and f.attrs.get("global_symbol") is not None]
    create = tvm.get_global_func("runtime.CSourceModuleCreate")
    return create(fixed, "c", names, [])


CPU_DEVICE_CODEGEN = DeviceCodegen(source_only=_no_device_code, compiled=_no_device_code)
LLVM_HOST_CODEGEN = HostCodegen(build=tvm_build_function("llvm"))
C_HOST_CODEGEN = HostCodegen(build=build_c_host)
