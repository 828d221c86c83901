"""``get_tensorized_func_and_tags(func, target)``: whether a function maps onto the
target's matrix units, and the tags ``TensorCorePolicy`` reads (upstream's helper)."""

from __future__ import annotations

from typing import Any


def get_tensorized_func_and_tags(func: Any, target: Any, layout: Any = None,
                                 allow_gemv: bool = False) -> tuple[Any, dict[str, Any] | None]:
    """(func, tags) where ``func`` is a GEMM (batch axes allowed) in a precision the target's
    device multiplies on its matrix units, else (func, None). The function is returned as
    given: T.gemm picks the instructions when the kernel is written, nothing is rewritten
    here (``layout`` and ``allow_gemv`` are accepted for upstream's signature)."""
    from .arch import get_arch, is_tensorcore_supported_precision
    from .roller.node import analyze_prim_func, gemm_tags

    tags = gemm_tags(analyze_prim_func(func))
    if tags is None:
        return func, None
    arch = target if hasattr(target, "tensorcore_precisions") else get_arch(target)
    info = tags["intrin_info"]
    if not is_tensorcore_supported_precision(info.in_dtype, info.out_dtype, arch):
        return func, None
    return func, tags
