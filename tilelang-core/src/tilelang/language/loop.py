"""Loops: ``T.Parallel`` plus TVM's ``T.serial``/``T.unroll``/``T.vectorized``."""

from __future__ import annotations

from typing import Any

from tvm.script.ir_builder import tirx as _ib
from tvm.tirx import call_intrin

from ..errors import LanguageError
from .ops import PARALLEL_EXTENT


def Parallel(*extents: Any, coalesced_width: int | None = None, loop_layout: Any = None,
             prefer_async: bool | None = None, annotations: dict | None = None) -> Any:
    """``for i, j in T.Parallel(M, N)``: a data-parallel loop nest over a tile.

    Each iteration is independent; the backend decides how the nest runs (CPU: the thread
    pool and SIMD; GPU: partitioned across the block's threads). Upstream's hints
    (``coalesced_width``, ``loop_layout``, ``prefer_async``, ``annotations``) are accepted
    and leave that choice to the backend.
    """
    del coalesced_width, loop_layout, prefer_async, annotations
    if not extents:
        raise LanguageError("T.Parallel needs at least one extent")
    # TVMScript's `for` only takes a ForFrame; a multi-variable one is T.grid. The marker
    # call on each extent tells the frontend (tilelang.language.frontend) which loops were
    # written as T.Parallel; it replaces them by parallel loops right after parsing.
    marked = [call_intrin(_extent_type(e), PARALLEL_EXTENT, e) for e in extents]
    return _ib.grid(*marked)


def _extent_type(extent: Any) -> str:
    ty = getattr(extent, "ty", None)
    return str(ty) if ty is not None else "int32"
