"""GuardEmptyLaunches: a kernel whose grid is empty at run time is not launched.

``T.Kernel(num_tokens)`` over a dynamic ``num_tokens`` launches as many blocks as the call's
tensors say. With 0, TVM's CUDA runtime launches one block anyway, and that block writes
through the empty tensor's null pointer: an illegal address that poisons the process's CUDA
context (every later launch and copy fails; upstream TileLang's issue 1993). The launchers
of this project's other execution backends (nvrtc, cython) skip a launch with a zero grid
extent and refuse a negative one; this pass, run before SplitHostDevice, gives the host
code that TVM's runtime executes (tvm_ffi) the same behaviour: a check that no non-constant
extent of the launch is negative (the message names the dimension and its expression) and
the launch itself under ``if`` every such extent is positive. A constant 0 extent is
refused earlier, by T.Kernel.
"""

from __future__ import annotations

from functools import reduce
from typing import Any

from .pipeline import prim_func_pass


def _launch_chain(attr: Any) -> list[Any]:
    """The directly nested ``thread_extent`` attributes that start a kernel."""
    from tvm import tirx

    chain = []
    node = attr
    while isinstance(node, tirx.AttrStmt) and node.attr_key == "thread_extent":
        chain.append(node)
        node = node.body
    return chain


def _guarded(attr: Any, kernel: str) -> Any:
    from tvm import tirx
    from tvm.ir import StringImm

    dynamic = [a for a in _launch_chain(attr) if not isinstance(a.value, tirx.IntImm)]
    if not dynamic:
        return attr
    checks = []
    for extent_attr in dynamic:
        extent = extent_attr.value
        message = StringImm(f"kernel '{kernel}': launch extent {extent_attr.node.thread_tag} = {extent} "
                            "is negative for these arguments")
        # TVM 0.27's Python AssertStmt names its first two parameters (kind, condition) but
        # hands them on in that order to a constructor that takes (condition, kind)
        checks.append(tirx.AssertStmt(extent >= 0, StringImm("ValueError"), [message]))
    positive = reduce(tirx.And, [a.value > 0 for a in dynamic])
    return tirx.SeqStmt([*checks, tirx.IfThenElse(positive, attr, None)])


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    import tvm_ffi
    from tvm import tirx

    def launches(node: Any) -> list[Any]:
        found: list[Any] = []
        tvm_ffi.structural_walk(node, (tirx.AttrStmt, found.append))
        return [a for a in found if a.attr_key == "thread_extent"]

    every = launches(func.body)
    nested = [inner for attr in every for inner in launches(attr.body)]
    outermost = [a for a in every if not any(a.same_as(n) for n in nested)]
    if not outermost:
        return func
    attrs = func.attrs
    name = str(attrs["global_symbol"]) if attrs is not None and "global_symbol" in attrs else "kernel"

    def on_attr(attr: Any) -> Any:
        return _guarded(attr, name) if any(attr.same_as(o) for o in outermost) else attr

    body = tvm_ffi.structural_map(func.body, (tirx.AttrStmt, on_attr), order="post")
    return func if body.same_as(func.body) else func.with_body(body)


def GuardEmptyLaunches() -> Any:
    return prim_func_pass(_run, "tl.GuardEmptyLaunches")
