"""CheckSharedMemory: a kernel that needs more shared memory per block than its GPU allows
is a compile error, named with its sizes and the knobs that shrink it, instead of a launch
failure ("Failed to set the allowed dynamic shared memory size") on the device.

Runs after CaptureLaunchMetadata, whose launches carry each kernel's dynamic shared memory;
the kernel's static shared arrays (mbarriers) count too. Dynamic sizes that depend on the
arguments are left to the launch.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tilelang.errors import CompileError
from tilelang.plugin import captured_launches, dtype_bytes, prim_func_pass, static_ints
from tvm import tirx

# The most shared memory one block may opt in to, per compute capability (CUDA C++
# Programming Guide, "Technical Specifications per Compute Capability"; 1 KiB of each SM's
# shared memory stays reserved by the driver and is not part of these).
MAX_SHARED_PER_BLOCK = {
    "sm_70": 96 * 1024, "sm_72": 96 * 1024, "sm_75": 64 * 1024,
    "sm_80": 163 * 1024, "sm_86": 99 * 1024, "sm_87": 163 * 1024, "sm_89": 99 * 1024,
    "sm_90": 227 * 1024, "sm_100": 227 * 1024, "sm_120": 99 * 1024,
}


def _arch(func: Any) -> str:
    target = func.attrs.get("target") if func.attrs else None
    arch = str(target.export().get("arch", "")) if target is not None else ""
    return arch.removesuffix("a")  # sm_90a: sm_90's limits


def _static_shared_bytes(func: Any) -> int:
    sizes: list[int] = []

    def visit(alloc: Any) -> None:
        buf = alloc.buffer
        shape = static_ints(buf.shape)
        if buf.scope() == "shared" and shape is not None:
            count = 1
            for d in shape:
                count *= d
            sizes.append(count * dtype_bytes(buf.dtype))

    tvm_ffi.structural_walk(func.body, (tirx.AllocBuffer, visit))
    return sum(sizes)


def _check(func: Any, mod: Any) -> Any:
    limit = MAX_SHARED_PER_BLOCK.get(_arch(func))
    symbol = str(func.attrs.get("global_symbol", "")) if func.attrs else ""
    if limit is None or not symbol:
        return func
    for launch in captured_launches(mod):
        if launch["symbol"] != symbol or not str(launch["dynamic_smem"]).isdigit():
            continue
        dynamic = int(launch["dynamic_smem"])
        static = _static_shared_bytes(func)
        if dynamic + static > limit:
            raise CompileError(
                f"kernel {symbol!r} needs {dynamic + static} bytes of shared memory per block ({dynamic} dynamic: "
                f"its tiles and pipeline stages; {static} static), more than the {limit} a block may have on "
                f"{_arch(func)}; use fewer pipeline stages (num_stages), smaller tiles, or drop a shared tile")
    return func


def CheckSharedMemory() -> Any:
    return prim_func_pass(lambda func, mod, ctx: _check(func, mod), "tl.cuda.CheckSharedMemory")


__all__ = ["MAX_SHARED_PER_BLOCK", "CheckSharedMemory"]
