"""``do_bench``: how long a function takes, in milliseconds (upstream TileLang's spelling).

On a CUDA device it times with CUDA events (or CUDA-graph replay, or the CUPTI kernel
times torch.profiler collects), zeroing a buffer larger than the L2 cache before each
call so every call starts cold, as upstream does. On the CPU it times each call with
``time.perf_counter``: the call is synchronous there, so wall time is the kernel's time.
CPU caches are not flushed — a Python-side flush costs more than the small kernels being
measured, and warm caches are what a CPU kernel sees in a loop.
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import TileLangError

log = logging.getLogger("tilelang.profiler")

RETURN_MODES = ("min", "max", "mean", "median")
BACKENDS = ("event", "cupti", "cudagraph")
_FLUSH_RANGE = "tilelang::cache_flush"  # the torch.profiler range excluded from CUPTI times


def do_bench(fn: Callable[[], Any], warmup: float = 25, rep: float = 100, _n_warmup: int = 0,
             _n_repeat: int = 0, quantiles: Sequence[float] | None = None, fast_flush: bool = True,
             backend: str = "event", return_mode: str = "mean", device: Any = None,
             cache_size: int = 256, early_stop_baseline: float | None = None) -> float | list[float]:
    """Milliseconds per call of ``fn`` (aggregated by ``return_mode``, or the ``quantiles``).

    warmup / rep: milliseconds of warm-up and of measured calls; the counts follow from a
    5-call estimate unless ``_n_warmup`` / ``_n_repeat`` give them. device: None picks CUDA
    when torch sees a GPU, else the CPU; "cpu" forces wall-clock timing (CPU kernels);
    an int or "cuda:i" a GPU. backend: "event", "cupti" or "cudagraph" (CUDA only; the CPU
    has one timer). early_stop_baseline: when the estimate is already slower, return it
    without the full measurement (the autotuner's early stop).
    """
    if return_mode not in RETURN_MODES:
        raise TileLangError(f"do_bench: return_mode {return_mode!r} is not one of {RETURN_MODES}")
    if backend not in BACKENDS:
        raise TileLangError(f"do_bench: backend {backend!r} is not one of {BACKENDS}")
    cuda_index = _cuda_device_index(device)
    if cuda_index is None:
        return _bench_wall_clock(fn, warmup, rep, _n_warmup, _n_repeat, quantiles, return_mode,
                                 early_stop_baseline)
    import torch

    with torch.cuda.device(cuda_index):
        return _bench_cuda(fn, warmup, rep, _n_warmup, _n_repeat, quantiles, fast_flush, backend,
                           return_mode, cache_size, early_stop_baseline)


def _cuda_device_index(device: Any) -> int | None:
    """The CUDA device to time on, or None for wall-clock timing on the host."""
    if device is None:
        try:
            import torch
        except ImportError:
            return None
        return torch.cuda.current_device() if torch.cuda.is_available() else None
    if isinstance(device, int):
        return device
    kind, _, index = str(device).partition(":")
    if kind == "cpu":
        return None
    if kind != "cuda":
        raise TileLangError(f"do_bench: device {device!r} is neither 'cpu' nor a CUDA device "
                            "(an int, 'cuda' or 'cuda:<i>')")
    import torch

    return int(index) if index else torch.cuda.current_device()


def _counts(estimate_ms: float, warmup: float, rep: float, n_warmup: int, n_repeat: int) -> tuple[int, int]:
    estimate_ms = max(estimate_ms, 1e-6)  # a call faster than the timer's resolution
    return (n_warmup if n_warmup > 0 else max(1, int(warmup / estimate_ms)),
            n_repeat if n_repeat > 0 else max(1, int(rep / estimate_ms)))


def aggregate(times: Sequence[float], quantiles: Sequence[float] | None,
              return_mode: str) -> float | list[float]:
    """``return_mode`` of ``times``, or their quantiles (linear interpolation, as torch.quantile)."""
    if quantiles is not None:
        ordered = sorted(times)
        values = []
        for q in quantiles:
            pos = q * (len(ordered) - 1)
            lo, hi = math.floor(pos), math.ceil(pos)
            values.append(ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo))
        return values[0] if len(values) == 1 else values
    if return_mode == "median":
        return statistics.median(times)
    if return_mode == "mean":
        return statistics.fmean(times)
    return min(times) if return_mode == "min" else max(times)


def _bench_wall_clock(fn: Callable[[], Any], warmup: float, rep: float, n_warmup: int, n_repeat: int,
                      quantiles: Sequence[float] | None, return_mode: str,
                      early_stop_baseline: float | None) -> float | list[float]:
    clock = time.perf_counter
    fn()  # first call: lazy initialization, page faults of fresh outputs
    start = clock()
    for _ in range(5):
        fn()
    estimate_ms = (clock() - start) * 1e3 / 5
    if early_stop_baseline is not None and estimate_ms > early_stop_baseline:
        log.debug("do_bench: estimate %.4f ms exceeds the baseline %.4f ms; stopping early",
                  estimate_ms, early_stop_baseline)
        return [estimate_ms] * len(quantiles) if quantiles is not None else estimate_ms
    n_warmup, n_repeat = _counts(estimate_ms, warmup, rep, n_warmup, n_repeat)
    for _ in range(n_warmup):
        fn()
    times = []
    for _ in range(n_repeat):
        start = clock()
        fn()
        times.append((clock() - start) * 1e3)
    return aggregate(times, quantiles, return_mode)


def _bench_cuda(fn: Callable[[], Any], warmup: float, rep: float, n_warmup: int, n_repeat: int,
                quantiles: Sequence[float] | None, fast_flush: bool, backend: str, return_mode: str,
                cache_size: int, early_stop_baseline: float | None) -> float | list[float]:
    import torch

    fn()
    torch.cuda.synchronize()
    # zeroing a buffer larger than L2 (H100/H200: 50 MB) before each call evicts the
    # previous call's data, so every call reads its inputs from HBM as in a real workload
    flush = torch.empty(cache_size * 2**20 // (4 if fast_flush else 1),
                        dtype=torch.int32 if fast_flush else torch.int8, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        flush.zero_()
        fn()
    end.record()
    end.synchronize()
    estimate_ms = start.elapsed_time(end) / 5
    if early_stop_baseline is not None and estimate_ms > early_stop_baseline:
        return [estimate_ms] * len(quantiles) if quantiles is not None else estimate_ms
    n_warmup, n_repeat = _counts(estimate_ms, warmup, rep, n_warmup, n_repeat)
    for _ in range(n_warmup):
        fn()
    if backend == "cupti":
        return _cupti_ms(fn, flush, n_repeat)
    if backend == "cudagraph":
        times = _graph_times(fn, flush, n_repeat)
    else:
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_repeat)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_repeat)]
        for s, e in zip(starts, ends):
            flush.zero_()
            s.record()
            fn()
            e.record()
        torch.cuda.synchronize()
        times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    return aggregate(times, quantiles, return_mode)


def _graph_times(fn: Callable[[], Any], flush: Any, n_repeat: int, replays: int = 10) -> list[float]:
    """Per-call times from replaying one CUDA graph of ``n_repeat`` calls: no launch
    overhead from the host (the flush runs outside the graph, before each replay)."""
    import torch

    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(n_repeat):
                fn()
        torch.cuda.synchronize()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(replays)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(replays)]
        for s, e in zip(starts, ends):
            flush.zero_()
            s.record()
            graph.replay()
            e.record()
        torch.cuda.synchronize()
    return [s.elapsed_time(e) / n_repeat for s, e in zip(starts, ends)]


def _cupti_ms(fn: Callable[[], Any], flush: Any, n_repeat: int) -> float:
    """Mean device time per call from torch.profiler's CUPTI records: the kernels' own
    time, without launch gaps; the flush runs in a named range that is subtracted."""
    import torch

    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(n_repeat):
            with torch.profiler.record_function(_FLUSH_RANGE):
                flush.zero_()
            fn()
        torch.cuda.synchronize()
    total_us = flush_us = 0.0
    for event in prof.events():
        if getattr(getattr(event, "device_type", None), "name", "") != "CUDA":
            continue
        if not event.is_user_annotation:
            total_us += event.self_device_time_total
        elif event.key == _FLUSH_RANGE:
            flush_us += event.self_device_time_total
    return (total_us - flush_us) / n_repeat * 1e-3


__all__ = ["BACKENDS", "RETURN_MODES", "aggregate", "do_bench"]
