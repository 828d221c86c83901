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
from ..language.ops import (
    CLUSTER_ARRIVE,
    CLUSTER_ARRIVE_RELAXED,
    CLUSTER_DIMS_ATTR,
    CLUSTER_RANK,
    CLUSTER_WAIT,
)


def LowerClusterOps(rank: str, arrive: str, arrive_relaxed: str, wait: str) -> Any:
    """Each cluster op becomes a call of the named device function (int32 result)."""
    names = {CLUSTER_RANK: rank, CLUSTER_ARRIVE: arrive, CLUSTER_ARRIVE_RELAXED: arrive_relaxed, CLUSTER_WAIT: wait}

    def run(func: Any, mod: Any, ctx: Any) -> Any:
        def on_call(call: Any) -> Any:
            name = names.get(getattr(call.op, "name", None))
            return call if name is None else tirx.call_extern("int32", name)

        import tvm

        body = tvm_ffi.structural_map(func.body, (tvm.ir.Call, on_call), order="post")
        return func if body.same_as(func.body) else func.with_body(body)

    return prim_func_pass(run, "tl.LowerClusterOps")


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
