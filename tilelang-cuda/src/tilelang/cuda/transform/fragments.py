"""PlaceFragmentsInSharedMemory: where a tile allocated with T.alloc_fragment lives on
the GPU, until fragment layouts are inferred.

A fragment is a tile the block's threads hold together. Keeping it in registers needs a
layout that every operation on it agrees on (which thread holds which element); the
shared lowering writes tile ops as T.Parallel nests whose thread mappings differ between
ops (a row reduction reads whole rows). Shared memory is correct for any mapping — the
barriers come from ThreadSync — at the price of speed; register fragments with inferred
layouts and tensor-core GEMM replace this pass in the performance work.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx

FRAGMENT_SCOPE = "local.fragment"


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    fragments: list[tuple[Any, Any]] = []

    def collect(node: Any) -> None:
        if isinstance(node, tirx.AllocBuffer) and node.buffer.scope() == FRAGMENT_SCOPE:
            old = node.buffer
            new = tirx.decl_buffer(old.shape, old.dtype, name=old.name, scope="shared.dyn")
            fragments.append((old, new))

    tvm_ffi.structural_walk(func.body, collect)
    if not fragments:
        return func

    def on_buffer(buffer: Any) -> Any:
        for old, new in fragments:
            if buffer.same_as(old):
                return new
        return buffer

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.Buffer, on_buffer), order="post"))


def PlaceFragmentsInSharedMemory() -> Any:  # noqa: N802 - TVM pass naming
    return tirx.transform.prim_func_pass(_run, opt_level=0, name="tl.cuda.PlaceFragmentsInSharedMemory")
