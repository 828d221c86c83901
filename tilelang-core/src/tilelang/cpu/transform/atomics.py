"""LowerAtomics (CPU): ``tl.atomic_add_element(dst[i], v)`` -> ``dst[i] = dst[i] + v``.

A plain update is an atomic one only when nothing runs concurrently, so
LowerKernelLaunchToLoops runs a kernel that uses atomics on one thread (blocks and
T.Parallel loops in sequence: see :func:`uses_atomics`); this pass then lowers the
updates.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx

from ...backend.pass_pipeline import prim_func_pass
from ...language.ops import ATOMIC_ADD_ELEMENT


def _is_atomic(node: Any) -> bool:
    return isinstance(node, tirx.Evaluate) and \
        getattr(getattr(node.value, "op", None), "name", None) == ATOMIC_ADD_ELEMENT


def uses_atomics(node: Any) -> bool:
    found: list[Any] = []
    tvm_ffi.structural_walk(node, (tirx.Evaluate, lambda e: found.append(e) if _is_atomic(e) else None))
    return bool(found)


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    def on_evaluate(stmt: Any) -> Any:
        if not _is_atomic(stmt):
            return stmt
        target, value = stmt.value.args
        return tirx.BufferStore(target.source, target + value, list(target.indices))

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.Evaluate, on_evaluate), order="post"))


def LowerAtomics() -> Any:
    return prim_func_pass(_run, "tl.cpu.LowerAtomics")


__all__ = ["LowerAtomics", "uses_atomics"]
