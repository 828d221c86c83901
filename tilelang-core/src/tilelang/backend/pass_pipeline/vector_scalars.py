"""InlineScalarsInVectorizedLoops: scalars declared inside a vectorized loop stay per lane,
and a vectorized loop whose lanes would all store to one element runs one lane at a time.

``q_idx = bx * block_M + i`` written in a ``T.Parallel`` body declares a one-element local
buffer inside the loop (TVMScript's mutable scalar). Once a backend has partitioned the
loop and marked its innermost level vectorized, ``VectorizeLoop`` writes all lanes' values
into that one element (a scatter to index ``Broadcast(0, n)``) and every lane then reads
the last lane's value. Upstream's attention-sink kernel masked element ``j`` with the mask
of ``j + 1`` that way; a row whose only visible key was the diagonal became all ``-inf``
(NaN after the softmax) on the GPU, while the CPU, which did not vectorize that loop, was
right.

Inside a vectorized loop this pass replaces each such scalar that is written once, at the
level it is declared, by the value written (an expression, so each lane computes its own).
A value that reads a buffer the loop body writes could change between the write and a use,
and a scalar written conditionally or more than once has no single value: a loop with such
a scalar left runs serially instead of vectorized, which keeps its meaning. So does a loop
that stores to an element its variable does not select (an accumulation into ``B[row]``
under ``T.vectorized(K)``): vectorized, all lanes would store at once and the last win.
"""

from __future__ import annotations

from typing import Any

from .pipeline import prim_func_pass


def _walk(node: Any, node_type: Any) -> list[Any]:
    import tvm_ffi

    found: list[Any] = []
    tvm_ffi.structural_walk(node, (node_type, found.append))
    return found


def _contains(buffers: list[Any], buffer: Any) -> bool:
    return any(b.same_as(buffer) for b in buffers)


def _is_scalar(buffer: Any) -> bool:
    from tvm import tirx

    shape = list(buffer.shape)
    return len(shape) == 1 and isinstance(shape[0], tirx.IntImm) and int(shape[0]) == 1


def _inlinable(body: Any) -> list[Any]:
    """Scalars allocated in ``body``, stored exactly once, whose value reads nothing the
    body writes."""
    from tvm import tirx
    from tvm.ir import TensorLoad

    stores = _walk(body, tirx.BufferStore)
    written = [store.buffer for store in stores]
    chosen = []
    for alloc in _walk(body, tirx.AllocBuffer):
        buffer = alloc.buffer
        own = [store for store in stores if store.buffer.same_as(buffer)]
        if not _is_scalar(buffer) or len(own) != 1:
            continue
        if any(_contains(written, load.source) for load in _walk(own[0].value, TensorLoad)):
            continue
        chosen.append(buffer)
    return chosen


def _inline(body: Any, scalars: list[Any]) -> Any:
    """Post order: an inner sequence is resolved first; a scalar of an outer sequence is then
    replaced in the later statements, inner ones included."""
    import tvm_ffi
    from tvm import tirx
    from tvm.ir import TensorLoad

    def replace_loads(stmt: Any, values: list[tuple[Any, Any]]) -> Any:
        def on_load(load: Any) -> Any:
            for buffer, value in values:
                if load.source.same_as(buffer):
                    return value
            return load

        return tvm_ffi.structural_map(stmt, (TensorLoad, on_load), order="post")

    def on_seq(seq: Any) -> Any:
        declared: list[Any] = []
        values: list[tuple[Any, Any]] = []
        kept: list[Any] = []
        for stmt in seq.seq:
            if values:
                stmt = replace_loads(stmt, values)
            if isinstance(stmt, tirx.AllocBuffer) and _contains(scalars, stmt.buffer):
                declared.append(stmt.buffer)
                continue
            if isinstance(stmt, tirx.BufferStore) and _contains(declared, stmt.buffer):
                values.append((stmt.buffer, stmt.value))
                continue
            kept.append(stmt)
        # a declared scalar whose store was not at this level keeps its allocation
        missing = [b for b in declared if not any(b.same_as(v) for v, _ in values)]
        kept = [tirx.AllocBuffer(b) for b in missing] + kept
        if not values:
            return seq
        if not kept:
            return tirx.Evaluate(tirx.const(0, "int32"))
        return kept[0] if len(kept) == 1 else tirx.SeqStmt(kept)

    return tvm_ffi.structural_map(body, (tirx.SeqStmt, on_seq), order="post")


def _stores_one_element(body: Any, loop_var: Any) -> bool:
    """A store whose element does not depend on the vectorized loop's variable (upstream's
    ``B[row] = B[row] + A[row, k]`` under ``T.vectorized(K)``): every lane would write the
    same element at once, and VectorizeLoop keeps only the last lane's value."""
    from tvm import tirx

    def uses(expr: Any) -> bool:
        return any(v.same_as(loop_var) for v in _walk(expr, tirx.Var))

    return any(not any(uses(i) for i in store.indices) for store in _walk(body, tirx.BufferStore))


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    import tvm_ffi
    from tvm import tirx

    def on_for(loop: Any) -> Any:
        if loop.kind != tirx.ForKind.VECTORIZED:
            return loop
        body = loop.body
        if _walk(body, tirx.AllocBuffer):
            body = _inline(body, _inlinable(body))
        # a scalar left, or a store every lane makes to one element: one lane at a time
        serial = bool(_walk(body, tirx.AllocBuffer)) or _stores_one_element(body, loop.loop_var)
        if body.same_as(loop.body) and not serial:
            return loop
        return tirx.For(loop.loop_var, loop.min, loop.extent, tirx.ForKind.SERIAL if serial else loop.kind,
                        body, loop.thread_binding, loop.annotations, loop.step)

    body = tvm_ffi.structural_map(func.body, (tirx.For, on_for), order="post")
    return func if body.same_as(func.body) else func.with_body(body)


def InlineScalarsInVectorizedLoops() -> Any:
    return prim_func_pass(_run, "tl.InlineScalarsInVectorizedLoops")
