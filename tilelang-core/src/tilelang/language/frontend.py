"""Frontend normalization, run right after a kernel is parsed."""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx

from .bounds import check_constant_bounds, legalize_negative_indices
from .local_indices import parallel_locals_as_fragments
from .ops import PARALLEL_EXTENT, is_call_to, substitute
from .persistent import expand_persistent_loops
from .reducer import rewrite_reducer_updates
from .safe_values import apply_safe_values


def _unit_step(loop: Any) -> Any:
    """``for i in T.serial(start, stop, step)`` as a loop of step 1 over
    ``ceildiv(stop - start, step)`` iterations with ``i = start + k * step``: the backends'
    passes rebuild loops from (var, min, extent, kind), which would drop the step."""
    step = getattr(loop, "step", None)
    if step is None or (isinstance(step, tirx.IntImm) and step.value == 1):
        return loop
    var = loop.loop_var
    k = tirx.Var(var.name, var.ty)
    body = substitute(loop.body, [(var, loop.min + k * step)])
    extent = tirx.ceildiv(loop.extent, step)
    return tirx.For(k, tirx.const(0, str(var.ty)), extent, loop.kind, body,
                    annotations=loop.annotations, span=loop.span)


#: a T.unroll loop whose extent is known only at run time (``T.unroll(tid % 32)``): TVM's
#: UnrollLoop refuses it ("Cannot unroll non-constant loop"), so it is serial, so marked,
#: until that pass ran, and unrolled again after it (RestoreDynamicUnroll), which leaves the
#: code generator's ``#pragma unroll`` to the device compiler, as upstream does. A constant
#: loop too large to expand in the IR gets the same mark (BoundExplicitUnrolling).
DYNAMIC_UNROLL = "tl.dynamic_unroll"
_LAUNCH_TAGS = ("blockIdx.", "threadIdx.")


def _dynamic_unroll(loop: Any) -> Any:
    if loop.kind != tirx.ForKind.UNROLLED or isinstance(loop.extent, tirx.IntImm):
        return loop
    return tirx.For(loop.loop_var, loop.min, loop.extent, tirx.ForKind.SERIAL, loop.body,
                    annotations={**dict(loop.annotations), DYNAMIC_UNROLL: 1}, span=loop.span)


def _launch_from_bindings(body: Any) -> Any:
    """A kernel written with ``T.thread_binding`` loops over block and thread indices and no
    ``T.Kernel`` (TVMScript's own style, upstream's unroll tests): the loops become the
    launch a T.Kernel makes (``thread_extent`` attributes); "cannot handle for type
    launch_thread" in the host code generator before. Inside a T.Kernel such loops stay
    for BindNestedThreadLoops."""
    launches: list[Any] = []
    tvm_ffi.structural_walk(body, (tirx.AttrStmt, lambda a: launches.append(a) if a.attr_key == "thread_extent" else None))
    if launches:
        return body

    def on_for(loop: Any) -> Any:
        binding = loop.thread_binding
        if loop.kind != tirx.ForKind.THREAD_BINDING or binding is None:
            return loop
        tag = str(binding.thread_tag)
        if not tag.startswith(_LAUNCH_TAGS) or not (isinstance(loop.min, tirx.IntImm) and loop.min.value == 0):
            return loop
        import tvm

        var = loop.loop_var
        iter_var = tirx.IterVar(tvm.ir.Range.from_min_extent(loop.min, loop.extent), var, 1, tag)
        return tirx.AttrStmt(iter_var, "thread_extent", loop.extent, loop.body, loop.span)

    return tvm_ffi.structural_map(body, (tirx.For, on_for), order="post")


def normalize(func: Any) -> Any:
    """Turn loops written with T.Parallel into ``ForKind.PARALLEL`` loops, and stepped
    loops into unit-step ones."""

    def on_for(loop: Any) -> Any:
        loop = _dynamic_unroll(_unit_step(loop))
        if not is_call_to(loop.extent, PARALLEL_EXTENT):
            return loop
        return tirx.For(
            loop.loop_var,
            loop.min,
            loop.extent.args[0],
            tirx.ForKind.PARALLEL,
            loop.body,
            annotations={"tilelang.parallel": 1},
            span=loop.span,
        )

    # T.Persistent nests first: their wave loops are ordinary loops for what follows
    body = tvm_ffi.structural_map(expand_persistent_loops(_launch_from_bindings(func.body)), (tirx.For, on_for),
                                  order="post")
    func = func.with_body(body) if not body.same_as(func.body) else func
    func = legalize_negative_indices(func)  # A[-1]: the last element, as upstream (and Python) read it
    func = apply_safe_values(func)  # T.annotate_safe_value: reads outside a tensor give its value
    func = check_constant_bounds(func)  # accesses certain to leave their buffer, with the line
    func = parallel_locals_as_fragments(func)  # a T.alloc_local tile T.Parallel indexes: spread like the loop
    return rewrite_reducer_updates(func)  # T.alloc_reducer updates -> atomic element updates
