"""The backend conformance kit: any target backend (vendor ones included) runs these
kernels against itself and numpy.

    from tilelang.testing import run_conformance
    report = run_conformance(target="acme")          # raises ConformanceError on a mismatch

Each case compiles one kernel for the given target/execution backend, runs it on numpy
inputs (CPU backends) or on torch tensors on ``device`` (device backends), and compares
with a numpy reference at a stated tolerance.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import TileLangError
from . import kernels
from . import upstream as _upstream
from .upstream import *  # noqa: F403  (upstream TileLang's test helpers, for its test files)


class ConformanceError(TileLangError, AssertionError):
    """A backend produced a wrong result (or failed) on a conformance case."""


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[], Any]
    inputs: Callable[[np.random.Generator], list[Any]]
    reference: Callable[..., np.ndarray]
    rtol: float
    atol: float


def _rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype("float32")


CASES = (
    Case("elementwise_add", lambda: kernels.elementwise_add(70, 33),
         lambda r: [_rand(r, 70, 33), _rand(r, 70, 33)], lambda a, b: a + b, 1e-6, 1e-6),
    Case("loop_reduction_symbolic_rows", lambda: kernels.row_softmax_sum(19),
         lambda r: [_rand(r, 45, 19), 0.5],
         lambda a, s: s * np.exp(a - a.max(axis=1, keepdims=True)).sum(axis=1), 1e-5, 1e-5),
    Case("tiled_matmul_shared_local", lambda: kernels.tiled_matmul(65, 40, 70),
         lambda r: [_rand(r, 65, 70), _rand(r, 70, 40)], lambda a, b: a @ b, 1e-4, 1e-4),
)


def run_conformance(target: Any = "auto", execution_backend: str = "auto",
                    device: str | None = None, seed: int = 0) -> dict[str, str]:
    """Run every case; returns {case: "ok"}; raises ConformanceError naming the first failure.

    device: None for host (numpy) backends; e.g. "cuda" to pass torch tensors on it.
    """
    import tilelang

    report = {}
    for case in CASES:
        rng = np.random.default_rng(seed)
        inputs = case.inputs(rng)
        try:
            kernel = tilelang.compile(case.build(), out_idx=[-1], target=target,
                                      execution_backend=execution_backend)
            args = inputs if device is None else [_to_device(x, device) for x in inputs]
            out = kernel(*args)
            out = out if device is None else out.cpu().numpy()
        except TileLangError as err:
            raise ConformanceError(f"case {case.name!r} failed for target {target!r}: {err}") from err
        expected = case.reference(*inputs)
        try:
            np.testing.assert_allclose(out, expected, rtol=case.rtol, atol=case.atol)
        except AssertionError as err:
            raise ConformanceError(f"case {case.name!r} gave wrong results for target "
                                   f"{target!r} ({kernel.describe()}):\n{err}") from None
        report[case.name] = "ok"
    return report


_TORCH_DEVICE = {1: "cpu", 2: "cuda", 10: "cuda"}  # DLPack device type -> torch device


def kernel_device(kernel: Any) -> str | None:
    """Where a compiled kernel's tensors live: None for the host (numpy works), else the
    torch device name. Decided by the target's device type, not by its kind's name."""
    device_type = int(kernel.context.target.get_target_device_type())
    return None if device_type == 1 else _TORCH_DEVICE.get(device_type, "cuda")


def to_kernel_device(kernel: Any, *arrays: np.ndarray) -> list[Any]:
    """numpy inputs as the kernel wants them (numpy for host kernels, torch on the device)."""
    device = kernel_device(kernel)
    return list(arrays) if device is None else [_to_device(a, device) for a in arrays]


def to_numpy(value: Any) -> np.ndarray:
    return value if isinstance(value, np.ndarray) else value.cpu().numpy()


def _to_device(value: Any, device: str) -> Any:
    if isinstance(value, np.ndarray):
        import torch

        return torch.from_numpy(value).to(device)
    return value


__all__ = ["CASES", "ConformanceError", "kernel_device", "run_conformance", "to_kernel_device", "to_numpy",
           *_upstream.__all__]  # upstream's helpers, re-exported for its test files
