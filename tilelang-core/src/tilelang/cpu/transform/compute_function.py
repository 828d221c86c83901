"""The CPU kernel as a plain C function, for execution backends that call it themselves.

TVM's C host codegen normally emits one packed entry point, ``__tvm_ffi_<name>``, which
unpacks ``TVMFFIAny`` arguments, checks every DLTensor and then runs the kernel body inline;
its scratch buffers come from ``TVMBackendAllocWorkspace`` (libtvm_runtime). An execution
backend that validates arguments itself (cython) wants the body alone, so for it the CPU
pipeline runs three extra passes around SplitHostDevice:

- :func:`AllocateOnStack`: every ``T.alloc_local`` / ``T.alloc_shared`` buffer gets the
  ``global`` scope, which the C codegen emits as a fixed-size stack array (it refuses other
  scopes, and ``LowerTVMBuiltin`` would turn them into runtime workspace calls);
- :func:`OutlineComputeFunction`: the body becomes a ``target`` region, which
  SplitHostDevice outlines into ``<name>_kernel(T* A_ptr, ..., int32_t M, float scale)``
  returning 0 (pointers first, then scalars and symbolic dimensions, in TVM's order);
  ``CaptureLaunchMetadata(host_calls=True)`` then records that call as launch metadata;
- :func:`KeepComputeFunctions`: the packed entry is dropped, so the generated C needs no
  TVM runtime symbol and no MakePackedAPI.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ...backend.pass_pipeline import prim_func_pass


def _allocate_on_stack(func: Any, mod: Any, ctx: Any) -> Any:
    replaced: list[tuple[Any, Any]] = []

    def on_alloc(stmt: Any) -> None:
        buffer = stmt.buffer
        if buffer.scope() != "global":
            fresh = tirx.decl_buffer(buffer.shape, buffer.dtype, buffer.name, scope="global")
            replaced.append((buffer, fresh))

    tvm_ffi.structural_walk(func.body, (tirx.AllocBuffer, on_alloc))
    if not replaced:
        return func

    def on_var(var: Any) -> Any:
        for old, new in replaced:
            if var.same_as(old):
                return new
        return var

    return func.with_body(tvm_ffi.structural_map(func.body, (tvm.ir.Var, on_var), order="post"))


def AllocateOnStack() -> Any:
    return prim_func_pass(_allocate_on_stack, "tl.cpu.AllocateOnStack")


def _outline(func: Any, mod: Any, ctx: Any) -> Any:
    target = func.attrs["target"]
    return func.with_body(tirx.AttrStmt(target, "target", 0, func.body))


def OutlineComputeFunction() -> Any:
    return prim_func_pass(_outline, "tl.cpu.OutlineComputeFunction")


def KeepComputeFunctions() -> Any:
    def run(mod: Any, ctx: Any) -> Any:
        kept = {gv: f for gv, f in mod.functions.items()
                if f.attrs is None or not f.attrs.get("tirx.is_entry_func", False)}
        return tvm.IRModule(kept, attrs=mod.attrs)

    return tvm.transform.module_pass(run, opt_level=0, name="tl.cpu.KeepComputeFunctions")
