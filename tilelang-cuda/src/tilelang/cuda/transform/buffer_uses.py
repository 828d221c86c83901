"""Every reference a kernel makes to a shared tile, for the tensor-core pass's choices of a
tile's layout: a new layout is only safe where each of them can follow it (role_tiles.py,
in_place_swizzle.py, wgmma.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tvm
import tvm_ffi
from tilelang.plugin import tile_op_name
from tvm import tirx
from tvm.ir import TensorLoad

from .explicit_sync import op_name


@dataclass(frozen=True)
class Use:
    """One reference: ``kind`` is "region" (argument ``position`` among the regions of the
    call ``op``: a tile op's name, such as "copy" or "gemm", else the call's op name, such
    as "tl.tma_copy"), "store", "load" or "address" (``tirx.buffer_data``, the storage named
    as a value); ``node`` is the region, store, load or call; ``call`` a region's call."""

    kind: str
    node: Any
    op: str = ""
    position: int = 0
    call: Any = None  # a region's call

    @property
    def buffer(self) -> Any:
        if self.kind == "store":
            return self.node.buffer
        if self.kind == "address":
            return self.node.args[0]
        return self.node.source


def buffer_uses(body: Any, buffers: list[Any]) -> list[Use]:
    """The references ``body`` makes to any of ``buffers``, in walk order."""

    def ours(candidate: Any) -> bool:
        return isinstance(candidate, tirx.Buffer) and any(candidate.same_as(b) for b in buffers)

    uses: list[Use] = []

    def visit(node: Any) -> None:
        if isinstance(node, tirx.Evaluate):
            call = node.value
            op = tile_op_name(node) or op_name(call)
            regions = [a for a in getattr(call, "args", []) if isinstance(a, tvm.ir.TensorRegion)]
            uses.extend(Use("region", r, op, k, call) for k, r in enumerate(regions) if ours(r.source))
        elif isinstance(node, tirx.BufferStore):
            if ours(node.buffer):
                uses.append(Use("store", node))
        elif isinstance(node, TensorLoad):
            if ours(node.source):
                uses.append(Use("load", node))
        elif str(getattr(node.op, "name", "")) == "tirx.buffer_data" and ours(node.args[0]):
            uses.append(Use("address", node))

    tvm_ffi.structural_walk(body, [(tirx.Evaluate, visit), (tirx.BufferStore, visit), (TensorLoad, visit),
                                   (tvm.ir.Call, visit)])
    return uses


__all__ = ["Use", "buffer_uses"]
