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


def _paired_samples(fn: Callable[[], object], reference: Callable[[], object], repeat: int,
                    inner: int) -> tuple[list[float], list[float]]:
    import torch

    fn()
    reference()
    torch.cuda.synchronize()
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        samples[0].append(_sample_ms(fn, inner))
        samples[1].append(_sample_ms(reference, inner))
    return samples


def paired_ms(fn: Callable[[], object], reference: Callable[[], object], repeat: int = 20,
              inner: int = 10) -> tuple[float, float]:
    """Medians (ms) of ``fn`` and ``reference``, sampled alternately: the clocks a long run
    drifts through (a cool GPU boosts higher than one that has run GEMMs for a minute)
    apply to both, so their ratio does not depend on which ran first."""
    mine, theirs = _paired_samples(fn, reference, repeat, inner)
    return _median(mine), _median(theirs)


def paired_ratio(fn: Callable[[], object], reference: Callable[[], object], repeat: int = 30,
                 inner: int = 3) -> dict[str, float]:
    """``reference``'s time over ``fn``'s (above 1: ``fn`` is faster), from alternate
    samples: the median of each adjacent pair's ratio, with the quartiles of those ratios
    (``ratio_q1``, ``ratio_q3``), and both medians in ms. A pair shares the clock of its
    moment, so a GPU whose clock moves within a run (the lent H200's did by 10% between
    two pairings of one kernel) moves both samples of a pair; the quartiles show how far
    the ratio itself moved."""
    mine, theirs = _paired_samples(fn, reference, repeat, inner)
    ratios = sorted(r / m for m, r in zip(mine, theirs))
    return {"ratio": _median(ratios), "ratio_q1": ratios[len(ratios) // 4], "ratio_q3": ratios[(3 * len(ratios)) // 4],
            "ms": _median(mine), "reference_ms": _median(theirs)}
