"""Upstream's loop spellings: ``T.Serial``/``T.Unroll``/``T.Vectorized`` (tile-level aliases
of TVMScript's loops) and a ``step`` on ``T.serial``/``T.unroll``."""

from __future__ import annotations

from typing import Any

from tvm.script.ir_builder import tirx as _ib


def serial(start: Any, stop: Any = None, step: Any = None, *, annotations: dict | None = None) -> Any:
    """``for i in T.serial(n)`` / ``T.serial(start, stop, step)``: a sequential loop."""
    return _ib.serial(start, stop, step=step, annotations=annotations)


def unroll(start: Any, stop: Any = None, step: Any = None, *, explicit: bool = False,
           unroll_factor: int | None = None, annotations: dict | None = None) -> Any:
    """A loop the compiler unrolls (fully; ``unroll_factor`` and ``explicit`` are upstream's
    hints and unroll the same way here)."""
    del explicit, unroll_factor
    return _ib.unroll(start, stop, step=step, annotations=annotations)


def vectorized(start: Any, stop: Any = None, *, annotations: dict | None = None) -> Any:
    return _ib.vectorized(start, stop, annotations=annotations)


Serial = serial
Unroll = unroll
Vectorized = vectorized
