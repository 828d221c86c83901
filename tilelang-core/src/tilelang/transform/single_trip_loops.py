"""inline_single_trip_loops: a serial loop that runs once from a run-time start becomes its body.

``for b in T.serial(start, start + 1)`` with ``start`` a thread or block index (upstream's
issue 1728: ``stop = sm_id + 1; for block_idx in T.serial(sm_id, stop)``) stopped TVM's
StmtSimplify: it binds ``b`` to the one-point range twice with different bounds ("Trying
to update var 'block_idx' with a different maximum value"). The loop runs exactly once
with ``b == start``, so its body with ``start`` in place of ``b`` means the same.

Only plain serial loops are rewritten (no annotations: T.Pipelined, T.unroll and the
other kinds keep their loops), and only where the trip count is 1 once the kernel's
``T.let`` values are substituted into it; a constant start is left to TVM, which handles it.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx
from tvm.sym.analyzer import Analyzer

from ..language.ops import inline_lets, let_bindings, substitute


def inline_single_trip_loops(func: Any) -> Any:
    lets = let_bindings(func.body)
    analyzer = Analyzer()

    def on_for(loop: Any) -> Any:
        if (loop.kind != tirx.ForKind.SERIAL or len(loop.annotations) or isinstance(loop.min, tirx.IntImm)
                or getattr(loop, "step", None) is not None):
            return loop
        count = analyzer.simplify(inline_lets(loop.extent, lets))
        if not (isinstance(count, tirx.IntImm) and count.value == 1):
            return loop
        return substitute(loop.body, [(loop.loop_var, loop.min)])

    body = tvm_ffi.structural_map(func.body, (tirx.For, on_for), order="post")
    return func if body.same_as(func.body) else func.with_body(body)
