"""``T.thread_binding`` inside a ``T.Kernel`` on the CPU.

``for kr in T.thread_binding(0, 32, thread="threadIdx.x")`` inside
``T.Kernel(..., threads=32)`` names the kernel's own thread index (upstream's
dequantize_gemm GEMV sums a row's slice per ``kr`` and reduces over it). On the GPU, core's
``BindNestedThreadLoops`` (transform/gpu/thread_loops.py) makes the loop's variable the
launch's and drops the loop; the CPU pipeline runs the same pass before
LowerKernelLaunchToLoops, which then runs the block's threads in phases between barriers,
as for any kernel that reads its thread index (barrier_phases.py). Before, the loop reached
TVM's CPU codegen as a thread launch ("cannot handle for type launch_thread").

A thread-bound loop that is not the kernel's own index (another extent, a start other than
0, or a thread axis the kernel does not launch) has no meaning on the CPU's sequential
threads; :func:`RefuseForeignThreadLoops` names it instead of TVM's internal error.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx

from ...backend.pass_pipeline import prim_func_pass
from ...errors import LanguageError


def _refuse(func: Any, mod: Any, ctx: Any) -> Any:
    kernel = str(func.attrs.get("global_symbol", "main")) if func.attrs else "main"
    found: list[Any] = []

    def on_for(loop: Any) -> None:
        if loop.kind == tirx.ForKind.THREAD_BINDING:
            found.append(loop)

    tvm_ffi.structural_walk(func.body, (tirx.For, on_for))
    if found:
        loop = found[0]
        tag = loop.thread_binding.thread_tag if loop.thread_binding is not None else "?"
        raise LanguageError(
            f"kernel {kernel!r}: loop {loop.loop_var.name!r} is bound to {tag!r} over "
            f"[{loop.min}, {loop.min} + {loop.extent}), which is not the kernel's own {tag} "
            "(from 0 over the extent given to T.Kernel's threads); the CPU backend runs only "
            "those: bind the loop over the launch's whole extent, or write it as T.serial")
    return func


def RefuseForeignThreadLoops() -> Any:
    return prim_func_pass(_refuse, "tl.cpu.RefuseForeignThreadLoops")
