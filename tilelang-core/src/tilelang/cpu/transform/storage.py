"""LowerScopesToCPU: GPU storage scopes mean nothing on a CPU."""

from __future__ import annotations

from typing import Any

from tvm import tirx


def LowerScopesToCPU() -> Any:  # noqa: N802 - TVM pass naming
    def run(func: Any, mod: Any, ctx: Any) -> Any:
        return func

    return tirx.transform.prim_func_pass(run, opt_level=0, name="tl.cpu.LowerScopesToCPU")
