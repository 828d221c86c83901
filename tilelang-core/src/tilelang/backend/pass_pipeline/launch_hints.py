"""KernelLaunchBounds: the blocks per SM a function asked for, on each kernel split off it.

``T.annotate_min_blocks_per_sm(n)`` records ``tl.min_blocks_per_sm`` on the PrimFunc
(tilelang.language.hints); TVM's SplitHostDevice does not hand function attributes on to
the kernels it creates. A backend whose code generator reads a minimum-blocks attribute
runs this pass after the split, naming that attribute (CUDA: TVM's
``tirx.launch_bounds_min_blocks_per_sm``, printed as ``__launch_bounds__(threads, n)``).
A kernel compilation holds one user function, so every kernel of the module gets it.
"""

from __future__ import annotations

from typing import Any


def device_kernels(mod: Any) -> list[tuple[Any, Any]]:
    """(global var, function) of each device kernel of ``mod`` after the host/device split
    (TVM's calling convention 2, kDeviceKernelLaunch)."""
    return [(gvar, func) for gvar, func in mod.functions.items()
            if func.attrs is not None and int(func.attrs.get("calling_conv", 0)) == 2]


def KernelLaunchBounds(min_blocks_attr: str) -> Any:
    import tvm

    from ...language.ops import MIN_BLOCKS_PER_SM_ATTR

    def run(mod: Any, ctx: Any) -> Any:
        asked = [f.attrs[MIN_BLOCKS_PER_SM_ATTR] for f in mod.functions.values()
                 if f.attrs is not None and MIN_BLOCKS_PER_SM_ATTR in f.attrs]
        if not asked:
            return mod
        for gvar, func in device_kernels(mod):
            mod[gvar] = func.with_attr(min_blocks_attr, int(asked[0]))
        return mod

    return tvm.transform.module_pass(run, opt_level=0, name="tl.KernelLaunchBounds")
