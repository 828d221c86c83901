"""Tolerance checks that allow a stated fraction of elements to differ (low-precision
kernels round differently from their references in a few places)."""

from __future__ import annotations

from typing import Any

from ..errors import TileLangError
from .supply import import_torch


class ToleranceError(TileLangError, AssertionError):
    """A kernel's output differs from its reference beyond the allowed tolerance. An
    AssertionError too, so test code written for upstream's profiler catches it."""


def _as_torch(value: Any, name: str) -> Any:
    torch = import_torch()
    if isinstance(value, torch.Tensor):
        return value
    try:
        return torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError) as err:
        raise TileLangError(f"{name} is {type(value).__name__}, not a tensor; return torch tensors "
                            "(or numpy arrays) from the kernel and the reference") from err


def assert_close(actual: Any, expected: Any, *, rtol: float = 1e-2, atol: float = 1e-3,
                 max_mismatched_ratio: float = 0.001, equal_nan: bool = True,
                 name: str = "tilelang", ref_name: str = "ref") -> None:
    """Raise ToleranceError when more than ``max_mismatched_ratio`` of the elements fail
    ``|actual - expected| <= atol + rtol * |expected|``; the message gives the count, the
    first mismatch and the largest differences."""
    torch = import_torch()
    actual, expected = _as_torch(actual, name), _as_torch(expected, ref_name)
    if actual.shape != expected.shape:
        raise ToleranceError(f"{name} has shape {tuple(actual.shape)} but {ref_name} has "
                             f"{tuple(expected.shape)}; the reference must return the kernel's outputs")
    # compare where both are (a GPU's tensors on that GPU: on the host, an fp16 8192 x 8192
    # check took about 3 s in a Ray actor, whose torch runs one thread when it reserves no
    # CPU), in a dtype both promote to (float8 and bf16 lack some ops)
    device = actual.device if actual.device == expected.device else torch.device("cpu")
    actual = actual.detach().to(device)
    expected = expected.detach().to(device)
    common = torch.promote_types(actual.dtype, expected.dtype)
    if common.is_floating_point and common.itemsize < 4:
        common = torch.float32
    actual, expected = actual.to(common), expected.to(common)
    close = torch.isclose(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan)
    total = close.numel()
    mismatched = int(total - close.sum().item())
    allowed = int(total * max_mismatched_ratio)
    if mismatched <= allowed:
        return
    first = int(torch.argmax((~close).reshape(-1).to(torch.int32)).item())
    index = [int(i) for i in torch.unravel_index(torch.tensor(first), tuple(actual.shape))]
    diff = (actual - expected).abs().to(torch.float64)
    rel = diff / (expected.abs().to(torch.float64) + 1e-12)
    raise ToleranceError(
        f"Too many mismatched elements: {mismatched} > {allowed} "
        f"({max_mismatched_ratio * 100:.2f}% allowed, got {mismatched / total * 100:.2f}%; "
        f"rtol={rtol}, atol={atol}). First mismatch at index {index}: "
        f"{name}={actual.reshape(-1)[first].item():.6g}, {ref_name}={expected.reshape(-1)[first].item():.6g}. "
        f"Greatest absolute difference: {diff.max().item():.6g}, greatest relative difference: "
        f"{rel.max().item():.6g}.")


__all__ = ["ToleranceError", "assert_close"]
