"""CUDA-event timing shared by the GPU benchmarks."""

from __future__ import annotations

from collections.abc import Callable


def time_ms(fn: Callable[[], object], repeat: int = 20, inner: int = 10) -> float:
    """Median over `repeat` samples of the mean time (ms) of `inner` back-to-back calls,
    after one warm-up call."""
    import torch

    fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / inner)
    samples.sort()
    return samples[len(samples) // 2]


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
        for f, out in ((fn, samples[0]), (reference, samples[1])):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(inner):
                f()
            end.record()
            end.synchronize()
            out.append(start.elapsed_time(end) / inner)
    return tuple(sorted(s)[len(s) // 2] for s in samples)
