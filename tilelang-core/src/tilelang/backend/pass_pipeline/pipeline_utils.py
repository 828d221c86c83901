"""Small pieces that several backends' pipelines share. A pipeline still lists its own
order: these only name a run of passes that means the same thing everywhere."""

from __future__ import annotations

from typing import Any

from .pipeline import pass_config


def RestoreDynamicUnroll() -> Any:
    """Loops marked :data:`~tilelang.language.frontend.DYNAMIC_UNROLL` (by the frontend: a
    run-time extent, which TVM's UnrollLoop refuses; by BoundExplicitUnrolling: too large to
    expand) unrolled again once UnrollLoop ran, for the device compiler to unroll."""
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


#: the most statements a loop nest marked unrolled may expand to in the IR (extent times its
#: body's statements, nested unrolled loops multiplied out); a larger one stays a loop under
#: ``#pragma unroll`` and the device compiler unrolls it (see BoundExplicitUnrolling)
MAX_UNROLLED_STATEMENTS = 256


def _lanes(stmt: Any) -> int:
    """The scalar statements a store stands for: a vector store of n lanes prints as n
    element operations (CUDA's float4 arithmetic is written lane by lane)."""
    import tvm
    from tvm import tirx

    if not isinstance(stmt, tirx.BufferStore):
        return 1
    ty = getattr(stmt.value, "ty", None)
    dtype = getattr(ty, "dtype", None)
    return max(1, tvm.DataType(str(dtype)).lanes) if dtype is not None else 1


def unrolled_size(stmt: Any) -> int:
    """How many statements ``stmt`` becomes once TVM's UnrollLoop expands its loops marked
    unrolled (a loop that stays a loop counts its body once); a vector store counts its
    lanes."""
    import tvm_ffi
    from tvm import tirx
    from tvm_ffi.structural import WalkResult

    total = 0

    def on_for(loop: Any) -> Any:
        nonlocal total
        body = unrolled_size(loop.body)
        expands = loop.kind == tirx.ForKind.UNROLLED and isinstance(loop.extent, tirx.IntImm)
        total += body * int(loop.extent.value) if expands else body
        return WalkResult.SKIP

    def on_leaf(leaf: Any) -> Any:
        nonlocal total
        total += _lanes(leaf)
        return WalkResult.SKIP

    tvm_ffi.structural_walk(stmt, [(tirx.For, on_for), ((tirx.BufferStore, tirx.Evaluate), on_leaf)], order="pre")
    return total


def BoundExplicitUnrolling(limit: int = MAX_UNROLLED_STATEMENTS) -> Any:
    """Loops marked unrolled whose expansion would exceed ``limit`` statements stay loops,
    unrolled by the device compiler (``#pragma unroll``) instead of in the IR. A per-thread
    loop over a large register fragment (32 rows of 2048 floats on 128 threads: 512
    iterations) otherwise becomes hundreds of kilobytes of source, which takes seconds to
    simplify here and seconds more to parse in NVRTC / nvcc; ``#pragma unroll`` over a
    constant trip count unrolls it completely there, so register arrays still see constant
    indices. Inner loops that fit stay unrolled in the IR. Innermost loops decide first."""
    import tvm_ffi
    from tvm import tirx

    from ...language.frontend import DYNAMIC_UNROLL
    from .pipeline import prim_func_pass

    def on_for(loop: Any) -> Any:
        if loop.kind != tirx.ForKind.UNROLLED or not isinstance(loop.extent, tirx.IntImm):
            return loop
        if int(loop.extent.value) * unrolled_size(loop.body) <= limit:
            return loop
        return tirx.For(loop.loop_var, loop.min, loop.extent, tirx.ForKind.SERIAL, loop.body,
                        annotations={**dict(loop.annotations), DYNAMIC_UNROLL: 1})

    def run(func: Any, mod: Any, ctx: Any) -> Any:
        body = tvm_ffi.structural_map(func.body, (tirx.For, on_for), order="post")
        return func if body.same_as(func.body) else func.with_body(body)

    return prim_func_pass(run, "tl.BoundExplicitUnrolling")


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
        BoundExplicitUnrolling(),  # huge unrolled nests: #pragma unroll, not kilobytes of IR
        tirx.transform.UnrollLoop(),
        RestoreDynamicUnroll(),  # T.unroll over a run-time extent: #pragma unroll (language/frontend.py)
        tirx.transform.StmtSimplify(),
        tirx.transform.CommonSubexprElim(),
    ]
