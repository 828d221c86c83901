"""Programmatic dependent launch, as upstream spells it: ``T.pdl_trigger()`` (this block is
done with what the next kernel of the stream depends on; it may start) and
``T.pdl_sync()`` (wait until the kernels this one depends on have finished and their
writes are visible). Without a launch that allows the overlap, both order nothing that
the stream does not already order: a backend without the instructions drops them
(transform/grid_dependencies.py).
"""

from __future__ import annotations

from tvm import tirx
from tvm.script.ir_builder import tirx as _ib

from ..errors import LanguageError
from .kernel import _ACTIVE
from .ops import PDL_SYNC, PDL_TRIGGER


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
