"""LowerClusterOps: T.block_rank_in_cluster / T.cluster_arrive* / T.cluster_wait as a
backend's functions (language/clusters.py); and, after the host/device split,
:func:`KernelClusterDims` hands the function's cluster shape to its kernels under the
attribute the backend's code generator reads (SplitHostDevice does not pass function
attributes on)."""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx

from ..backend.pass_pipeline import prim_func_pass
from ..backend.pass_pipeline.launch_hints import device_kernels
from ..errors import LanguageError
from ..language.ops import (
    CLUSTER_ARRIVE,
    CLUSTER_ARRIVE_RELAXED,
    CLUSTER_DIMS_ATTR,
    CLUSTER_RANK,
    CLUSTER_STORE,
    CLUSTER_WAIT,
)


def LowerClusterOps(rank: str, arrive: str, arrive_relaxed: str, wait: str, store: str | None = None) -> Any:
    """Each cluster op becomes a call of the named device function (int32 result), with the
    op's arguments. ``store`` (plugin API 1.9): the function that stores ``value`` into the
    element ``address`` names in the shared memory of the cluster's block ``rank``,
    ``store(address, rank, value)`` (T.copy_cluster); without it such kernels are refused."""
    names = {CLUSTER_RANK: rank, CLUSTER_ARRIVE: arrive, CLUSTER_ARRIVE_RELAXED: arrive_relaxed, CLUSTER_WAIT: wait}
    if store is not None:
        names[CLUSTER_STORE] = store

    def run(func: Any, mod: Any, ctx: Any) -> Any:
        received: list[Any] = []  # shared buffers other blocks store into

        def on_call(call: Any) -> Any:
            op = getattr(call.op, "name", None)
            if op == CLUSTER_STORE:
                if store is None:
                    raise LanguageError("T.copy_cluster(..., dst_block=...): this target backend has thread-block "
                                        "clusters but no stores into another block's shared memory")
                target = call.args[0].args[0].source  # address_of(element)
                if not any(target.same_as(b) for b in received):
                    received.append(target)
            name = names.get(op)
            return call if name is None else tirx.call_extern("int32", name, *call.args)

        import tvm

        body = tvm_ffi.structural_map(func.body, (tvm.ir.Call, on_call), order="post")
        if received:
            body = _live_throughout(body, received)
        return func if body.same_as(func.body) else func.with_body(body)

    return prim_func_pass(run, "tl.LowerClusterOps")


def _live_throughout(body: Any, buffers: list[Any]) -> Any:
    """Other blocks store into ``buffers`` whenever they run, which this block's accesses do
    not show: a use right after each one's allocation and one at the end of its scope keep
    the shared-memory planner from giving its bytes to another buffer meanwhile. The uses
    are addresses with access mask 0 (no read or write for the barrier pass, no code)."""

    def use(buffer: Any) -> Any:
        return tirx.Evaluate(buffer.access_ptr(0, offset=0, extent=1))

    def on_seq(seq: Any) -> Any:
        out: list[Any] = []
        kept: list[Any] = []
        for stmt in seq.seq:
            out.append(stmt)
            if isinstance(stmt, tirx.AllocBuffer) and any(stmt.buffer.same_as(b) for b in buffers):
                out.append(use(stmt.buffer))
                kept.append(stmt.buffer)
        if not kept:
            return seq
        return tirx.SeqStmt(out + [use(b) for b in kept])

    return tvm_ffi.structural_map(body, (tirx.SeqStmt, on_seq), order="post")


def KernelClusterDims(kernel_attr: str) -> Any:
    """After SplitHostDevice: each device kernel gets the function's cluster shape as
    ``kernel_attr`` (a kernel compilation holds one user function)."""
    import tvm

    def run(mod: Any, ctx: Any) -> Any:
        asked = [f.attrs[CLUSTER_DIMS_ATTR] for f in mod.functions.values()
                 if f.attrs is not None and CLUSTER_DIMS_ATTR in f.attrs]
        if not asked:
            return mod
        dims = [int(d) for d in asked[0]]
        for gvar, func in device_kernels(mod):
            mod[gvar] = func.with_attr(kernel_attr, dims)
        return mod

    return tvm.transform.module_pass(run, opt_level=0, name="tl.KernelClusterDims")
