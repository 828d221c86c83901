"""InlineFragmentViews: accesses through ``T.view`` / ``T.reshape`` of a fragment become
accesses of the fragment itself.

A fragment is distributed over the block's threads, so a view of it (a second buffer over
the same data, ``A_local.view(1024)``) has no memory of its own to alias on the GPU; the
fragment's per-thread array replaced its allocation and the view was left declared over
nothing ("Buffer A_local is used before its definition", upstream's reshape tests).
Here, once the tile ops are loops of element accesses, each ``view[k]`` is rewritten to
the fragment's element at the same row-major offset (``A_local[k // 32, k % 32]``) and
the view's declaration dropped; PlaceFragments then sees every access of the fragment
(one not at a T.Parallel nest's own indices puts it in shared memory, where any mapping
is correct). A view with another element type, or with an offset or strides of its own,
is refused at its declaration: the fragment's values would have to be reinterpreted.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx
from tvm.ir import TensorLoad
from tvm.sym.analyzer import Analyzer

from ...backend.pass_pipeline import prim_func_pass
from ...errors import LanguageError
from ...language.ops import is_call_to
from .fragments import FRAGMENT_SCOPE


def _row_major(shape: Any) -> list[Any]:
    strides, step = [], tirx.const(1, "int32")
    for dim in reversed(list(shape)):
        strides.append(step)
        step = step * dim
    return list(reversed(strides))


def _unravel(offset: Any, shape: Any, analyzer: Analyzer) -> list[Any]:
    indices = []
    for stride, dim in zip(_row_major(shape), shape):
        indices.append(analyzer.simplify(tirx.floormod(tirx.floordiv(offset, stride), dim)))
    return indices


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    views: dict[Any, Any] = {}  # view buffer -> its fragment

    def on_decl(node: Any) -> None:
        view, data = node.buffer, node.data
        if not (is_call_to(data, "tirx.buffer_data") and isinstance(data.args[0], tirx.Buffer)):
            return
        base = data.args[0]
        if base.scope() != FRAGMENT_SCOPE or view.same_as(base):
            return
        offset = view.elem_offset
        if str(view.dtype) != str(base.dtype) or len(view.strides) or not (
                isinstance(offset, tirx.IntImm) and offset.value == 0):
            refused.append((view, base))
        views[view] = base

    refused: list[tuple[Any, Any]] = []
    tvm_ffi.structural_walk(func.body, (tirx.DeclBuffer, on_decl))
    for view, base in refused[:1]:  # raised here: an error inside the walk reaches us as a RuntimeError
        raise LanguageError(
            f"T.view / T.reshape of the fragment {base.name!r} as {view.dtype} of shape {list(view.shape)}: on "
            "the GPU a view of a fragment may only reshape it (same dtype, no offset or strides); view a "
            "shared tile instead, or copy the fragment")
    if not views:
        return func
    analyzer = Analyzer()

    def base_of(buffer: Any) -> Any:
        return next((b for v, b in views.items() if v.same_as(buffer)), None)

    def translated(buffer: Any, indices: Any) -> list[Any]:
        offset = sum((i * s for i, s in zip(indices, _row_major(buffer.shape))), tirx.const(0, "int32"))
        return _unravel(offset, base_of(buffer).shape, analyzer)

    def on_load(load: Any) -> Any:
        base = base_of(load.source) if isinstance(load.source, tirx.Buffer) else None
        return load if base is None else tirx.BufferLoad(base, translated(load.source, load.indices), span=load.span)

    def on_store(store: Any) -> Any:
        base = base_of(store.buffer)
        if base is None:
            return store
        return tirx.BufferStore(base, store.value, translated(store.buffer, store.indices), span=store.span)

    def on_decl_drop(node: Any) -> Any:
        return tirx.Evaluate(tirx.const(0, "int32")) if base_of(node.buffer) is not None else node

    body = tvm_ffi.structural_map(func.body, [(TensorLoad, on_load), (tirx.BufferStore, on_store),
                                              (tirx.DeclBuffer, on_decl_drop)], order="post")
    return func.with_body(body)


def InlineFragmentViews() -> Any:
    return prim_func_pass(_run, "tl.gpu.InlineFragmentViews")
