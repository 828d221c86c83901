"""``with set_autotune_inputs(*tensors):`` — tune on these inputs instead of generated ones
(upstream's spelling; needed where inputs cannot be made from the signature: scalars,
index tensors, symbolic shapes)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any

_local = threading.local()


class CapturedInputs:
    """A supply_prog that returns the captured inputs; its repr (part of the tuning-cache
    key) names their dtypes and shapes, which is what a tuning outcome depends on."""

    def __init__(self, inputs: Sequence[Any]) -> None:
        self.inputs = list(inputs)

    def __call__(self, params: Sequence[Any] = ()) -> list[Any]:
        return self.inputs

    def __repr__(self) -> str:
        parts = [f"{x.dtype}{list(x.shape)}" if hasattr(x, "shape") else repr(x) for x in self.inputs]
        return f"CapturedInputs({', '.join(parts)})"


@contextlib.contextmanager
def set_autotune_inputs(*inputs: Any) -> Iterator[None]:
    """Within the block, autotuning in this thread checks and times on ``inputs`` (all of
    the kernel's inputs, in order; a single list or tuple is taken as that list)."""
    if len(inputs) == 1 and isinstance(inputs[0], (list, tuple)):
        inputs = tuple(inputs[0])
    stack = _local.__dict__.setdefault("stack", [])
    stack.append(CapturedInputs(inputs))
    try:
        yield
    finally:
        stack.pop()


def get_autotune_inputs() -> CapturedInputs | None:
    """The innermost captured inputs of this thread, or None."""
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


__all__ = ["CapturedInputs", "get_autotune_inputs", "set_autotune_inputs"]
