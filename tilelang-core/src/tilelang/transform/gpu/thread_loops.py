"""BindNestedThreadLoops: ``kr = T.thread_binding(0, 32, thread="threadIdx.x")`` inside a
``T.Kernel(..., threads=(32, 4))`` names the kernel's own thread index, as upstream writes
it (dequantize_gemm's gemv: ``T.tvm_thread_allreduce(..., kr)``).

The frontend leaves such a name as a loop bound to the thread tag inside the kernel's
launch of that tag. TVM's LowerThreadAllreduce looks for the reduce index among the launch
attributes only, so the loop's variable was "not presented in the context" and lowering
failed. A loop of the launch's extent that starts at 0 is that launch: its variable becomes
the launch's, and the loop goes. Any other loop bound to a thread (another extent, no
launch of its tag) is left to TVM as it was.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx

from ...backend.pass_pipeline import prim_func_pass
from .ir_util import substitute


def _launches(body: Any) -> dict[str, tuple[Any, Any]]:
    """thread tag -> (variable, extent) of the kernel's thread launches."""
    found: dict[str, tuple[Any, Any]] = {}

    def on_attr(attr: Any) -> None:
        if attr.attr_key == "thread_extent" and str(attr.node.thread_tag).startswith("threadIdx"):
            found.setdefault(str(attr.node.thread_tag), (attr.node.var, attr.value))

    tvm_ffi.structural_walk(body, (tirx.AttrStmt, on_attr))
    return found


def _constant(expr: Any) -> int | None:
    return int(expr.value) if isinstance(expr, tirx.IntImm) else None


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    launches = _launches(func.body)
    if not launches:
        return func

    def on_for(loop: Any) -> Any:
        binding = loop.thread_binding
        if loop.kind != tirx.ForKind.THREAD_BINDING or binding is None:
            return loop
        launch = launches.get(str(binding.thread_tag))
        extent = _constant(loop.extent)
        if launch is None or _constant(loop.min) != 0 or extent is None or extent != _constant(launch[1]):
            return loop
        return substitute(loop.body, [(loop.loop_var, launch[0])])

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.For, on_for), order="post"))


def BindNestedThreadLoops() -> Any:
    return prim_func_pass(_run, "tl.BindNestedThreadLoops")
