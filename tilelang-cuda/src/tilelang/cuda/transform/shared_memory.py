"""Shared memory per block: the arch's limit, what a kernel's tiles take, and
CheckSharedMemory, which makes a kernel over the limit a compile error (named with its
sizes and the knobs that shrink it) instead of a launch failure ("Failed to set the allowed
dynamic shared memory size") on the device.

The sm_90 passes that add shared memory (merge_k_steps.py, shared_epilogue.py) plan against
``PLANNING_BUDGET``: the limit less room for what later passes add (the mbarriers' static
KiB, padded epilogue rows, 1 KiB alignment of swizzled tiles).
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tilelang.errors import CompileError
from tilelang.plugin import (
    captured_launches,
    dtype_bytes,
    prim_func_pass,
    static_ints,
    tile_op_name,
)
from tvm import tirx

from ..target import kernel_arch

# The most shared memory one block may opt in to, per compute capability (CUDA C++
# Programming Guide, "Technical Specifications per Compute Capability"; 1 KiB of each SM's
# shared memory stays reserved by the driver and is not part of these).
MAX_SHARED_PER_BLOCK = {
    "sm_70": 96 * 1024, "sm_72": 96 * 1024, "sm_75": 64 * 1024,
    "sm_80": 163 * 1024, "sm_86": 99 * 1024, "sm_87": 163 * 1024, "sm_89": 99 * 1024,
    "sm_90": 227 * 1024, "sm_100": 227 * 1024, "sm_120": 99 * 1024,
}
PLANNING_BUDGET = MAX_SHARED_PER_BLOCK["sm_90"] - 7 * 1024


def buffer_bytes(buffer: Any) -> int:
    """A buffer's bytes (0 for a shape that is not static)."""
    count = 1
    for d in static_ints(buffer.shape) or [0]:
        count *= d
    return count * dtype_bytes(buffer.dtype)


def staged_shared_bytes(body: Any) -> int:
    """What the kernel's shared tiles take, a pipelined loop's copy destinations once per
    stage (what its ring will allocate)."""
    stages: dict[Any, int] = {}

    def on_loop(loop: Any) -> None:
        count = int(loop.annotations["num_stages"]) if "num_stages" in (loop.annotations or {}) else 0

        def on_copy(stmt: Any) -> None:
            if count and tile_op_name(stmt) == "copy":
                dst = stmt.value.args[1].source
                stages[dst] = max(stages.get(dst, 1), count)

        tvm_ffi.structural_walk(loop.body, (tirx.Evaluate, on_copy))

    tvm_ffi.structural_walk(body, (tirx.For, on_loop))
    shared: list[Any] = []
    tvm_ffi.structural_walk(body, (tirx.AllocBuffer, lambda a: shared.append(a.buffer)
                                   if str(a.buffer.scope()).startswith("shared") else None))
    return sum(buffer_bytes(b) * stages.get(b, 1) for b in shared)


def _static_shared_bytes(func: Any) -> int:
    found: list[Any] = []
    tvm_ffi.structural_walk(func.body, (tirx.AllocBuffer, lambda a: found.append(a.buffer)
                                        if a.buffer.scope() == "shared" else None))
    return sum(buffer_bytes(b) for b in found)


def _check(func: Any, mod: Any) -> Any:
    arch = kernel_arch(func).removesuffix("a")  # sm_90a: sm_90's limits
    limit = MAX_SHARED_PER_BLOCK.get(arch)
    symbol = str(func.attrs.get("global_symbol", "")) if func.attrs else ""
    if limit is None or not symbol:
        return func
    for launch in captured_launches(mod):
        if launch["symbol"] != symbol or not str(launch["dynamic_smem"]).isdigit():
            continue  # another kernel, or a size the arguments decide: left to the launch
        dynamic = int(launch["dynamic_smem"])
        static = _static_shared_bytes(func)
        if dynamic + static > limit:
            raise CompileError(
                f"kernel {symbol!r} needs {dynamic + static} bytes of shared memory per block ({dynamic} dynamic: "
                f"its tiles and pipeline stages; {static} static), more than the {limit} a block may have on "
                f"{arch}; use fewer pipeline stages (num_stages), smaller tiles, or drop a shared tile")
    return func


def CheckSharedMemory() -> Any:
    """Runs after CaptureLaunchMetadata, whose launches carry each kernel's dynamic shared
    memory; the kernel's static shared arrays (mbarriers) count too."""
    return prim_func_pass(lambda func, mod, ctx: _check(func, mod), "tl.cuda.CheckSharedMemory")


__all__ = ["MAX_SHARED_PER_BLOCK", "PLANNING_BUDGET", "CheckSharedMemory", "buffer_bytes", "staged_shared_bytes"]
