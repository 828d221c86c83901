"""Buffer allocation with upstream TileLang's spelling and storage scopes."""

from __future__ import annotations

from typing import Any

from tvm.script.ir_builder import tirx as _ib


def alloc_shared(shape: Any, dtype: str = "float32", scope: str = "shared.dyn") -> Any:
    """A tile shared by the block's threads (GPU shared memory; a block-local array on CPU)."""
    return _ib.alloc_buffer(shape, dtype, scope=scope)


def alloc_local(shape: Any, dtype: str = "float32", scope: str = "local") -> Any:
    """Per-thread storage (registers on the GPU; a block-local array on CPU)."""
    return _ib.alloc_buffer(shape, dtype, scope=scope)
