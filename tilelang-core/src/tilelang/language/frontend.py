"""Frontend normalization, run right after a kernel is parsed."""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx

from .ops import PARALLEL_EXTENT, is_call_to


def normalize(func: Any) -> Any:
    """Turn loops written with T.Parallel into ``ForKind.PARALLEL`` loops."""

    def on_for(loop: Any) -> Any:
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

    body = tvm_ffi.structural_map(func.body, (tirx.For, on_for), order="post")
    return func.with_body(body) if not body.same_as(func.body) else func
