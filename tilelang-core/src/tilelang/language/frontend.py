"""Frontend normalization, run right after a kernel is parsed."""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx

from .bounds import check_constant_bounds, legalize_negative_indices
from .ops import PARALLEL_EXTENT, is_call_to, substitute
from .persistent import expand_persistent_loops
from .reducer import rewrite_reducer_updates


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
                    annotations=loop.annotations)


def normalize(func: Any) -> Any:
    """Turn loops written with T.Parallel into ``ForKind.PARALLEL`` loops, and stepped
    loops into unit-step ones."""

    def on_for(loop: Any) -> Any:
        loop = _unit_step(loop)
        if not is_call_to(loop.extent, PARALLEL_EXTENT):
            return loop
        return tirx.For(
            loop.loop_var,
            loop.min,
            loop.extent.args[0],
            tirx.ForKind.PARALLEL,
            loop.body,
            annotations={"tilelang.parallel": 1},
        )

    # T.Persistent nests first: their wave loops are ordinary loops for what follows
    body = tvm_ffi.structural_map(expand_persistent_loops(func.body), (tirx.For, on_for), order="post")
    func = func.with_body(body) if not body.same_as(func.body) else func
    func = legalize_negative_indices(func)  # A[-1]: the last element, as upstream (and Python) read it
    check_constant_bounds(func)  # accesses certain to leave their buffer, with the line
    return rewrite_reducer_updates(func)  # T.alloc_reducer updates -> atomic element updates
