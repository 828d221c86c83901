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
