"""Passes of this backend only."""

from __future__ import annotations

import json
from typing import Any

from tilelang.plugin import LanguageError, extension_name, prim_func_pass

#: PrimFunc attribute: shared buffer name -> [bits, base, shift] of its CuTe Swizzle
SWIZZLE_ATTR = "tilelang.cutedsl.swizzle"
KNOWN = ("swizzled_shared",)


def _collect(func: Any, mod: Any, ctx: Any) -> Any:
    """Take the ``tl.ext`` markers out of the body (no other pass knows them) and keep what
    they say as PrimFunc attributes, which the printer reads."""
    import tvm_ffi
    from tvm import tirx

    swizzles: dict[str, list[int]] = {}

    def on_evaluate(stmt: Any) -> Any:
        name = extension_name(stmt.value)
        if name is None:
            return stmt
        if name not in KNOWN:
            raise LanguageError(f"T.ext.{name}: the cutedsl backend has no lowering for it (it lowers {KNOWN})")
        buffer, *params = stmt.value.args[1:]
        swizzles[str(buffer.value)] = [int(p.value) for p in params]
        return tirx.Evaluate(tirx.const(0, "int32"))

    body = tvm_ffi.structural_map(func.body, (tirx.Evaluate, on_evaluate), order="post")
    if not swizzles:
        return func
    return func.with_body(body).with_attr(SWIZZLE_ATTR, json.dumps(swizzles, sort_keys=True))


def CollectExtensions() -> Any:
    return prim_func_pass(_collect, "tl.cutedsl.CollectExtensions")


def _static_shared(func: Any, mod: Any, ctx: Any) -> Any:
    """Every ``shared.dyn`` buffer becomes a ``shared`` one of the same shape and type: TVM's
    SplitHostDevice takes one dynamic allocation only (the CUDA pipeline merges them first),
    while here each tile stays its own typed SmemAllocator tensor."""
    import tvm_ffi
    from tvm import tirx

    twins: dict[int, Any] = {}

    def find(alloc: Any) -> None:
        buffer = alloc.buffer
        if buffer.scope() == "shared.dyn":
            twins[hash(buffer)] = tirx.decl_buffer(buffer.shape, buffer.dtype, buffer.name, scope="shared")

    tvm_ffi.structural_walk(func.body, (tirx.AllocBuffer, find))
    if not twins:
        return func

    def on_buffer(buffer: Any) -> Any:
        return twins.get(hash(buffer), buffer)

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.Buffer, on_buffer), order="post"))


def StaticSharedBuffers() -> Any:
    return prim_func_pass(_static_shared, "tl.cutedsl.StaticSharedBuffers")


def _swizzles_to_module(mod: Any, ctx: Any) -> Any:
    """Right after SplitHostDevice: the device kernels are new functions without the
    kernel's attributes, so the swizzles, the accumulators' tiled MMAs and the tiles' stages move to the module
    (which the device module keeps, as it keeps the launch metadata)."""
    from tilelang.plugin import ALIGNMENT_ATTR

    from .gemm import MMA_ATTR, WGMMA_ATTR
    from .stages import STAGES_ATTR

    # the tensors' alignment (what the binder checks): the printer's vector accesses rely on it
    alignments = [int(f.attrs[ALIGNMENT_ATTR]) for f in mod.functions.values()
                  if f.attrs is not None and f.attrs.get(ALIGNMENT_ATTR) is not None]
    if alignments:
        mod = mod.with_attr(ALIGNMENT_ATTR, max(alignments))
    for attr in (SWIZZLE_ATTR, MMA_ATTR, STAGES_ATTR, WGMMA_ATTR):
        merged: dict[str, Any] = {}
        for func in mod.functions.values():
            raw = func.attrs.get(attr) if func.attrs is not None else None
            if raw is not None:
                merged.update(json.loads(str(raw)))
        if merged:
            mod = mod.with_attr(attr, json.dumps(merged, sort_keys=True))
    return mod


def SwizzlesToModule() -> Any:
    import tvm

    return tvm.transform.module_pass(_swizzles_to_module, opt_level=0, name="tl.cutedsl.SwizzlesToModule")
