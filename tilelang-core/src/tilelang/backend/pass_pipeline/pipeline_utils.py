"""Small pieces that several backends' pipelines share. A pipeline still lists its own
order: these only name a run of passes that means the same thing everywhere."""

from __future__ import annotations

from typing import Any

from .pipeline import pass_config


def RestoreDynamicUnroll() -> Any:
    """Loops the frontend marked :data:`~tilelang.language.frontend.DYNAMIC_UNROLL` unrolled
    again, once TVM's UnrollLoop (which refuses them) ran."""
    import tvm_ffi
    from tvm import tirx

    from ...language.frontend import DYNAMIC_UNROLL
    from .pipeline import prim_func_pass

    def on_for(loop: Any) -> Any:
        if DYNAMIC_UNROLL not in loop.annotations:
            return loop
        annotations = {k: v for k, v in loop.annotations.items() if k != DYNAMIC_UNROLL}
        return tirx.For(loop.loop_var, loop.min, loop.extent, tirx.ForKind.UNROLLED, loop.body,
                        annotations=annotations)

    def run(func: Any, mod: Any, ctx: Any) -> Any:
        body = tvm_ffi.structural_map(func.body, (tirx.For, on_for), order="post")
        return func if body.same_as(func.body) else func.with_body(body)

    return prim_func_pass(run, "tl.RestoreDynamicUnroll")


def flatten_and_vectorize() -> list[Any]:
    """Simplify, flatten buffers to 1-D, legalize bf16 arithmetic, vectorize loops marked
    vectorized (unless the ``tl.disable_vectorize`` pass config says not to), unroll, and
    eliminate common subexpressions: TVM's standard middle end, after a backend has mapped
    its kernels onto loops and threads and before it splits host from device."""
    from tvm import tirx

    from .index_bits import WidenLargeBufferIndices
    from .negated_division import FlipNegatedDivisions
    from .vector_scalars import InlineScalarsInVectorizedLoops

    return [
        # scalars declared in a vectorized loop: one per lane, not one element the lanes
        # share (see vector_scalars.py)
        InlineScalarsInVectorizedLoops(),
        tirx.transform.StmtSimplify(),
        # indices of buffers that may hold 2**31+ elements in int64 (see index_bits.py)
        WidenLargeBufferIndices(),
        FlipNegatedDivisions(),  # (c - i) // d: TVM's iterator maps get it wrong (negated_division.py)
        tirx.transform.FlattenBuffer(),
        tirx.transform.BF16ComputeLegalize(),
        tirx.transform.NarrowDataType(32),
        tirx.transform.VectorizeLoop(not pass_config("tl.disable_vectorize", False)),
        tirx.transform.UnrollLoop(),
        RestoreDynamicUnroll(),  # T.unroll over a run-time extent: #pragma unroll (language/frontend.py)
        tirx.transform.StmtSimplify(),
        tirx.transform.CommonSubexprElim(),
    ]
