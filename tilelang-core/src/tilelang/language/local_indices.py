"""A ``T.alloc_local`` buffer indexed by a ``T.Parallel`` loop variable is a fragment.

T.Parallel spreads its iterations over the block's threads, and a local buffer is one
copy per thread: the thread that runs iteration ``i`` held only the elements its own
iterations wrote. ``local[i] = A[i]`` then ``B[i] = local[31 - i]`` compiled for CUDA read
registers no iteration of that thread had written (garbage), while the CPU, whose
threads run one after another over one buffer, gave the reversed copy. Such a buffer is
a tile spread over the threads like the loops that index it, which is what
``T.alloc_fragment`` declares: it becomes one, so the layout pass places its elements
with the loops' iterations (in shared memory, with a barrier, where a loop reads another
thread's elements), and every backend gives the same result. Upstream refuses such an
index instead ("Local buffer ... is indexed by T.Parallel loop variable"); an index that
does not depend on the parallel variables (``local[0]``, a lane of an inner
``T.vectorized`` or ``T.serial`` loop) keeps the buffer local.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx
from tvm.ir import TensorLoad

from .ops import uses_var

FRAGMENT = "local.fragment"


def parallel_indexed(body: Any, scope: str, run_time_range_only: bool = False) -> list[tuple[Any, Any, Any, int]]:
    """Accesses to buffers of ``scope`` that index with the variable of an enclosing
    T.Parallel loop (with ``run_time_range_only``, of a loop whose range is not constant):
    (the loop, the buffer, the store's span or None for a load, the first axis it indexes)."""
    found: list[tuple[Any, Any, Any, int]] = []

    def on_loop(loop: Any) -> None:
        if loop.kind != tirx.ForKind.PARALLEL or (run_time_range_only and isinstance(loop.min, tirx.IntImm)
                                                  and isinstance(loop.extent, tirx.IntImm)):
            return

        def check(buffer: Any, indices: Any, span: Any) -> None:
            if isinstance(buffer, tirx.Buffer) and buffer.scope() == scope:
                axes = [axis for axis, index in enumerate(indices) if uses_var(index, loop.loop_var)]
                if axes:
                    found.append((loop, buffer, span, axes[0]))

        tvm_ffi.structural_walk(loop.body, [(tirx.BufferStore, lambda s: check(s.buffer, s.indices, s.span)),
                                            (TensorLoad, lambda load: check(load.source, load.indices, None))])

    tvm_ffi.structural_walk(body, (tirx.For, on_loop))
    return found


def parallel_indexed_locals(body: Any) -> list[Any]:
    """The local buffers some access indexes with the variable of an enclosing T.Parallel loop."""
    found: list[Any] = []
    for _, buffer, _, _ in parallel_indexed(body, "local"):
        if not any(buffer.same_as(b) for b in found):
            found.append(buffer)
    return found


def parallel_locals_as_fragments(func: Any) -> Any:
    """``func`` with each local buffer that a T.Parallel loop variable indexes declared a
    fragment (see the module docstring)."""
    locals_ = parallel_indexed_locals(func.body)
    if not locals_:
        return func
    replaced = [(b, tirx.decl_buffer(b.shape, b.dtype, name=b.name, scope=FRAGMENT)) for b in locals_]

    def on_buffer(buffer: Any) -> Any:
        return next((new for old, new in replaced if buffer.same_as(old)), buffer)

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.Buffer, on_buffer), order="post"))
