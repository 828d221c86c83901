"""Programmatic dependent launch, as upstream spells it: ``T.pdl_trigger()`` (this block is
done with what the next kernel of the stream depends on; it may start) and
``T.pdl_sync()`` (wait until the kernels this one depends on have finished and their
writes are visible). Without a launch that allows the overlap, both order nothing that
the stream does not already order: a backend without the instructions drops them
(transform/grid_dependencies.py).

``T.sync_grid()`` is a barrier for every thread of the grid (upstream's, CUDA's
``cooperative_groups::this_grid().sync()``): what any block wrote before it is visible to
every block after it. All blocks must be resident at once, so a kernel that calls it is
launched cooperatively, and a grid larger than the GPU holds at once is refused when
launched. A backend without such launches refuses it by name.
"""

from __future__ import annotations

from tvm import tirx
from tvm.script.ir_builder import tirx as _ib

from ..errors import LanguageError
from .kernel import _ACTIVE
from .ops import PDL_SYNC, PDL_TRIGGER, SYNC_GRID


def _emit(op: str, what: str) -> None:
    if not _ACTIVE:
        raise LanguageError(f"{what} is only valid inside a T.Kernel frame")
    _ib.evaluate(tirx.call_intrin("int32", op))


def pdl_trigger() -> None:
    """Let the next kernel of the stream start (its ``T.pdl_sync()`` still waits for this one)."""
    _emit(PDL_TRIGGER, "T.pdl_trigger()")


def pdl_sync() -> None:
    """Wait for the kernels this one depends on to finish (their writes then visible)."""
    _emit(PDL_SYNC, "T.pdl_sync()")


def sync_grid() -> None:
    """Wait until every thread of the grid arrives here (see the module docstring)."""
    _emit(SYNC_GRID, "T.sync_grid()")
