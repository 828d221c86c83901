"""``T.Kernel``: the launch frame of a kernel.

``with T.Kernel(gx, gy, threads=128) as (bx, by):`` binds blockIdx.x/y to the grid and
threadIdx.x/y/z to ``threads``. The emitted IR is TVM's ``thread_extent`` launch
attributes, which every backend lowers its own way (the GPU binds hardware indices, the
CPU turns blocks into a parallel loop).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from tvm.script.ir_builder import tirx as _ib

from ..errors import LanguageError

BLOCK_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")


def _as_tuple(value: Any, what: str) -> tuple[Any, ...]:
    values = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if not 1 <= len(values) <= 3:
        raise LanguageError(f"T.Kernel: {what} takes 1 to 3 dimensions, got {len(values)}")
    for v in values:
        if isinstance(v, int) and v <= 0:
            raise LanguageError(f"T.Kernel: {what} extents must be positive, got {values}")
    return values


_ACTIVE: list[Kernel] = []


def get_thread_binding(dim: int = 0) -> Any:
    """The thread index along ``dim`` (0 = x) of the enclosing T.Kernel.

    TileLang code rarely needs it: T.Parallel distributes tile work across threads."""
    if not _ACTIVE:
        raise LanguageError("T.get_thread_binding() is only valid inside a T.Kernel frame")
    threads = _ACTIVE[-1].thread_vars
    if not 0 <= dim < len(threads):
        raise LanguageError(f"T.get_thread_binding({dim}): the kernel has {len(threads)} thread dimension(s)")
    return threads[dim]


def get_block_binding(dim: int = 0) -> Any:
    """The block index along ``dim`` (0 = x) of the enclosing T.Kernel."""
    if not _ACTIVE:
        raise LanguageError("T.get_block_binding() is only valid inside a T.Kernel frame")
    blocks = _ACTIVE[-1].block_vars
    if not 0 <= dim < len(blocks):
        raise LanguageError(f"T.get_block_binding({dim}): the kernel has {len(blocks)} grid dimension(s)")
    return blocks[dim]


class Kernel:
    """The ``T.Kernel(*grid, threads=128)`` frame; entering it yields the block indices."""

    def __init__(self, *grid: Any, threads: int | Sequence[int] = 128, **unsupported: Any) -> None:
        if unsupported:
            raise LanguageError(
                f"T.Kernel got unsupported keyword(s) {sorted(unsupported)}; "
                "supported: grid extents as positional arguments and threads="
            )
        # no extents: one block (upstream's `with T.Kernel(threads=1):`)
        self.grid = _as_tuple(grid or (1,), "the grid")
        self.threads = _as_tuple(threads, "threads")
        self._stack: contextlib.ExitStack | None = None
        self.thread_vars: tuple[Any, ...] = ()
        self.block_vars: tuple[Any, ...] = ()
        self.function_attrs: dict[str, Any] = {}  # for the enclosing PrimFunc (language/hints.py)

    def __enter__(self) -> Any:
        stack = contextlib.ExitStack()
        blocks = []
        for tag, extent in zip(BLOCK_TAGS, self.grid):
            blocks.append(stack.enter_context(_ib.launch_thread(tag, extent)))
        threads = []
        for tag, extent in zip(THREAD_TAGS, self.threads):
            threads.append(stack.enter_context(_ib.launch_thread(tag, extent)))
        self._stack, self.thread_vars, self.block_vars = stack, tuple(threads), tuple(blocks)
        _ACTIVE.append(self)
        return blocks[0] if len(blocks) == 1 else tuple(blocks)

    def __exit__(self, *exc: object) -> bool | None:
        assert self._stack is not None
        _ACTIVE.remove(self)
        result = self._stack.__exit__(*exc)
        if self.function_attrs and not any(exc):
            try:
                _ib.func_attr(self.function_attrs)
            except Exception as err:
                raise LanguageError(f"{', '.join(self.function_attrs)}: the T.Kernel that asks for it must be a "
                                    "statement of the function's body, not inside another frame") from err
        return result
