"""LowerGridDependencies: T.pdl_trigger() / T.pdl_sync() as a backend's functions, or gone.

A backend with the instructions names its device functions (CUDA: ``griddepcontrol``
PTX on sm_90 and newer); one without them passes None and the calls are dropped, which
keeps the kernel's meaning (language/grid_dependencies.py). A kernel that waits reads
what an earlier kernel wrote while that kernel may still run, so after the host/device
split :func:`WaitingKernelsMayAlias` takes its parameters' no-alias promise away
(``tirx.noalias``, CUDA's ``__restrict__``): read-only loads could otherwise be served
before the wait.

:func:`LowerGridSync` lowers ``T.sync_grid()`` after the split and marks each kernel that
calls it for a cooperative launch (TVM's launch parameter tag, which TVM's CUDA runtime
reads and CaptureLaunchMetadata records for launchers of their own).
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx

from ..backend.pass_pipeline import prim_func_pass
from ..backend.pass_pipeline.launch_hints import device_kernels
from ..language.ops import NOALIAS_ATTR, PDL_SYNC, PDL_TRIGGER, SYNC_GRID, is_call_to

#: TVM's launch parameter tag for a cooperative launch (all blocks resident at once)
COOPERATIVE_LAUNCH = "tirx.use_cooperative_launch"
_DYN_SMEM = "tirx.use_dyn_shared_memory"  # the tag TVM requires last


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
    """After the host/device split: kernels that call ``wait`` lose ``tirx.noalias``, and so
    does every kernel of a function whose own ``tirx.noalias`` is False
    (``T.annotate_restrict_buffers``: its tensors may overlap; the split does not hand
    function attributes on)."""
    import tvm

    def calls_wait(func: Any) -> bool:
        found: list[Any] = []

        def on_call(call: Any) -> None:
            if is_call_to(call, "tirx.call_extern") and str(call.args[0].value) == wait:
                found.append(call)

        tvm_ffi.structural_walk(func.body, (tvm.ir.Call, on_call))
        return bool(found)

    def run(mod: Any, ctx: Any) -> Any:
        may_alias = any(f.attrs is not None and NOALIAS_ATTR in f.attrs and not bool(f.attrs[NOALIAS_ATTR])
                        for f in mod.functions.values())
        for gvar, func in device_kernels(mod):
            if may_alias or calls_wait(func):
                mod[gvar] = func.with_attr(NOALIAS_ATTR, False)
        return mod

    return tvm.transform.module_pass(run, opt_level=0, name="tl.WaitingKernelsMayAlias")


def LowerGridSync(name: str) -> Any:
    """After the host/device split: ``T.sync_grid()`` in a device kernel becomes a call of
    the backend's grid barrier ``name``, and the kernel's launch parameters ask for a
    cooperative launch."""
    import tvm

    def lowered(body: Any) -> tuple[Any, bool]:
        seen: list[Any] = []

        def on_evaluate(node: Any) -> Any:
            if is_call_to(node.value, SYNC_GRID):
                seen.append(node)
                return tirx.Evaluate(tirx.call_extern("int32", name))
            return node

        return tvm_ffi.structural_map(body, (tirx.Evaluate, on_evaluate), order="post"), bool(seen)

    def run(mod: Any, ctx: Any) -> Any:
        for gvar, func in device_kernels(mod):
            body, found = lowered(func.body)
            if not found:
                continue
            tags = [str(t) for t in func.attrs.get("tirx.kernel_launch_params", [])]
            if COOPERATIVE_LAUNCH not in tags:
                at = tags.index(_DYN_SMEM) if _DYN_SMEM in tags else len(tags)
                tags.insert(at, COOPERATIVE_LAUNCH)
            mod[gvar] = func.with_body(body).with_attr("tirx.kernel_launch_params", tags)
        return mod

    return tvm.transform.module_pass(run, opt_level=0, name="tl.LowerGridSync")


def cooperative_kernels(mod: Any) -> set[str]:
    """The symbols of the device kernels marked for a cooperative launch."""
    return {str(func.attrs.get("global_symbol", "")) for _, func in device_kernels(mod)
            if COOPERATIVE_LAUNCH in [str(t) for t in func.attrs.get("tirx.kernel_launch_params", [])]}
