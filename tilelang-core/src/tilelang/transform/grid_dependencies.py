"""LowerGridDependencies: T.pdl_trigger() / T.pdl_sync() as a backend's functions, or gone.

A backend with the instructions names its device functions (CUDA: ``griddepcontrol``
PTX on sm_90 and newer); one without them passes None and the calls are dropped, which
keeps the kernel's meaning (language/grid_dependencies.py). A kernel that waits reads
what an earlier kernel wrote while that kernel may still run, so after the host/device
split :func:`WaitingKernelsMayAlias` takes its parameters' no-alias promise away
(``tirx.noalias``, CUDA's ``__restrict__``): read-only loads could otherwise be served
before the wait.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx

from ..backend.pass_pipeline import prim_func_pass
from ..language.ops import PDL_SYNC, PDL_TRIGGER, is_call_to


def LowerGridDependencies(trigger: str | None = None, wait: str | None = None) -> Any:
    names = {PDL_TRIGGER: trigger, PDL_SYNC: wait}

    def run(func: Any, mod: Any, ctx: Any) -> Any:
        seen: set[str] = set()

        def on_evaluate(node: Any) -> Any:
            for op, name in names.items():
                if is_call_to(node.value, op):
                    seen.add(op)
                    call = tirx.const(0, "int32") if name is None else tirx.call_extern("int32", name)
                    return tirx.Evaluate(call)
            return node

        body = tvm_ffi.structural_map(func.body, (tirx.Evaluate, on_evaluate), order="post")
        return func if not seen else func.with_body(body)

    return prim_func_pass(run, "tl.LowerGridDependencies")


def WaitingKernelsMayAlias(wait: str) -> Any:
    """After the host/device split: kernels that call ``wait`` lose ``tirx.noalias``."""
    import tvm

    def calls_wait(func: Any) -> bool:
        found: list[Any] = []

        def on_call(call: Any) -> None:
            if is_call_to(call, "tirx.call_extern") and str(call.args[0].value) == wait:
                found.append(call)

        tvm_ffi.structural_walk(func.body, (tvm.ir.Call, on_call))
        return bool(found)

    def run(mod: Any, ctx: Any) -> Any:
        for gvar, func in list(mod.functions.items()):
            attrs = func.attrs
            if attrs is not None and int(attrs.get("calling_conv", 0)) == 2 and calls_wait(func):
                mod[gvar] = func.with_attr("tirx.noalias", False)
        return mod

    return tvm.transform.module_pass(run, opt_level=0, name="tl.WaitingKernelsMayAlias")
