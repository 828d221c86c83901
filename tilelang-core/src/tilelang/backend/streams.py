"""CUDA-style streams for execution backends that launch kernels themselves: what a
``stream=`` argument may be, and the caller's current stream. One place, so that every
launcher accepts the same values and says the same thing about a wrong one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import ArgumentError


def stream_handle(stream: Any, kernel: str) -> int:
    """``stream=`` -> the stream handle as an int: an int, or an object with ``.cuda_stream``
    (torch.cuda.Stream / ExternalStream)."""
    handle = getattr(stream, "cuda_stream", None)
    if handle is not None:
        return int(handle)
    if isinstance(stream, bool) or not hasattr(stream, "__int__"):
        raise ArgumentError(f"kernel {kernel!r}: stream= takes a CUDA stream handle (int) or a "
                            f"torch.cuda.Stream, got {type(stream).__name__}")
    return int(stream)


def current_stream_accessor(torch: Any) -> Callable[[int], int]:
    """``(device) -> the raw stream torch launches on for that device now``. torch's private
    accessor is what its own generated launchers (Inductor/Triton) read; the public one
    allocates a Stream object per call."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw or (lambda device: torch.cuda.current_stream(device).cuda_stream)


def as_current_stream(stream: Any, kernel: str) -> Any:
    """A context manager making ``stream=`` torch's current stream (for launchers that
    launch on the current one, as TVM's runtime does)."""
    import torch

    if not isinstance(stream, torch.cuda.Stream):
        stream = torch.cuda.ExternalStream(stream_handle(stream, kernel))
    return torch.cuda.stream(stream)


__all__ = ["as_current_stream", "current_stream_accessor", "stream_handle"]
