"""CUDA-event timing shared by the GPU benchmarks."""

from __future__ import annotations

from collections.abc import Callable


def _sample_ms(fn: Callable[[], object], inner: int) -> float:
    """The mean time (ms) of ``inner`` back-to-back calls, between two CUDA events."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(inner):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / inner


def _median(samples: list[float]) -> float:
    return sorted(samples)[len(samples) // 2]


def time_ms(fn: Callable[[], object], repeat: int = 20, inner: int = 10) -> float:
    """Median over `repeat` samples of the mean time (ms) of `inner` back-to-back calls,
    after one warm-up call."""
    import torch

    fn()
    torch.cuda.synchronize()
    return _median([_sample_ms(fn, inner) for _ in range(repeat)])


def paired_ms(fn: Callable[[], object], reference: Callable[[], object], repeat: int = 20,
              inner: int = 10) -> tuple[float, float]:
    """Medians (ms) of ``fn`` and ``reference``, sampled alternately: the clocks a long run
    drifts through (a cool GPU boosts higher than one that has run GEMMs for a minute)
    apply to both, so their ratio does not depend on which ran first."""
    import torch

    fn()
    reference()
    torch.cuda.synchronize()
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        samples[0].append(_sample_ms(fn, inner))
        samples[1].append(_sample_ms(reference, inner))
    return _median(samples[0]), _median(samples[1])
