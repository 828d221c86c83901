"""ApplyGlobalLayouts: global tensors stored in a ``tilelang.layout.Layout``'s order.

``T.annotate_layout({dQ: T.Layout(dQ.shape, fn)})`` on a kernel parameter leaves (see
``language/tile.py``) a flat view of the tensor's data and a marker loop nest over the
tensor's shape whose body holds the storage offset of element (i0, i1, ...). This pass,
run right after ``LowerTileOps`` (tile ops on the tensor are element accesses by then),
drops the marker and rewrites every access ``dQ[i0, i1, ...]`` into ``view[offset(i0, i1,
...)]``. Upstream's flash-attention backward stores dQ this way so that its atomic updates
land on contiguous addresses; the kernels that write and read dQ agree on the layout.
"""

from __future__ import annotations

from typing import Any

from ..backend.pass_pipeline import prim_func_pass
from ..language.ops import GLOBAL_LAYOUT, is_call_to, substitute


def _marker(loop: Any) -> tuple[list[Any], Any] | None:
    """(loop variables, the tl.global_layout call) of a marker nest, else None."""
    from tvm import tirx

    loops, inner = [], loop
    while isinstance(inner, tirx.For):
        loops.append(inner.loop_var)
        inner = inner.body
    if isinstance(inner, tirx.Evaluate) and is_call_to(inner.value, GLOBAL_LAYOUT):
        return loops, inner.value
    return None


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    import tvm_ffi
    from tvm import tirx
    from tvm.ir import TensorLoad
    from tvm.sym.analyzer import Analyzer

    layouts: list[tuple[Any, list[Any], Any]] = []  # (flat view, loop vars, offset)

    def on_for(loop: Any) -> Any:
        found = _marker(loop)
        if found is None:
            return loop
        loop_vars, call = found
        layouts.append((call.args[0].source, loop_vars, call.args[1]))
        return tirx.Evaluate(tirx.const(0, "int32"))

    body = tvm_ffi.structural_map(func.body, (tirx.For, on_for), order="pre")
    if not layouts:
        return func
    analyzer = Analyzer()

    # the tensor each flat view was declared over: DeclBuffer(view, data=buffer_data(T))
    sources: list[tuple[Any, Any]] = []

    def on_decl(decl: Any) -> None:
        data = decl.data
        if is_call_to(data, "tirx.buffer_data") and isinstance(data.args[0], tirx.Buffer):
            sources.append((decl.buffer, data.args[0]))

    tvm_ffi.structural_walk(body, (tirx.DeclBuffer, on_decl))

    def layout_of(buffer: Any) -> tuple[Any, list[Any], Any] | None:
        for flat, loop_vars, offset in layouts:
            if any(view.same_as(flat) and src.same_as(buffer) for view, src in sources):
                return flat, loop_vars, offset
        return None

    def storage(entry: tuple[Any, list[Any], Any], indices: list[Any]) -> Any:
        _, loop_vars, offset = entry
        return analyzer.simplify(substitute(offset, list(zip(loop_vars, indices))))

    def on_store(store: Any) -> Any:
        entry = layout_of(store.buffer)
        if entry is None:
            return store
        return tirx.BufferStore(entry[0], store.value, [storage(entry, list(store.indices))])

    def on_load(load: Any) -> Any:
        source = load.source
        entry = layout_of(source) if isinstance(source, tirx.Buffer) else None
        if entry is None:
            return load
        return tirx.BufferLoad(entry[0], [storage(entry, list(load.indices))])

    body = tvm_ffi.structural_map(body, [(tirx.BufferStore, on_store), (TensorLoad, on_load)], order="post")
    return func.with_body(body)


def ApplyGlobalLayouts() -> Any:
    return prim_func_pass(_run, "tl.ApplyGlobalLayouts")
