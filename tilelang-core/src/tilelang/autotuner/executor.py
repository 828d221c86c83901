"""Where an AutoTuner.run compiles and measures its configurations: the executor contract
(TuneExecutor), the job it is handed (TuneJob), what it hands back (Measurements), and the
default, LocalExecutor (a process pool of this machine compiles; this process measures).

An executor is two calls, compile then measure, so that one on a cluster can spread the
compiles over CPUs and the measurements over accelerators while the tuner keeps what
every executor shares: the configurations, the tuning cache, the choice of the best and
its error report. ``tilelang.autotuner.RayExecutor`` is the other one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..errors import TileLangError
from . import compile_pool
from .compile_pool import CompileOutcome, CompileTask
from .param import ProfileArgs, Trial


@dataclass(frozen=True)
class TuneJob:
    """One AutoTuner.run, as an executor sees it.

    builder / args: what compile_pool.compile_one builds each task from; configs[i] is
    task i's configuration as the user wrote it (for Trials); cache_dir: this process's
    kernel-cache root, None when the cache is off; group_size: configurations per compile
    submission; early_stop_factor: None, or skip the full timing of a configuration whose
    estimate exceeds that multiple of the best so far; use_pipeline: measure each
    configuration as soon as it compiled (else after all compiled); console / verbose: the
    progress display and whether each trial is logged at INFO; runs_on_host: the kernels
    run on the host's CPU (the target's device type is the CPU), else on an accelerator."""

    name: str
    builder: Callable[..., Any]
    args: tuple[Any, ...]
    configs: Sequence[Mapping[str, Any]]
    tasks: Sequence[CompileTask]
    profile: ProfileArgs
    cache_dir: str | None
    group_size: int = 1
    early_stop_factor: float | None = None
    use_pipeline: bool = False
    verbose: bool = False
    console: Any = None
    runs_on_host: bool = True


@dataclass
class Measurements:
    """What ``measure`` returns: one Trial per task (in index order, compile failures
    included with stage "compile"), the reference's latency (ms) when it was timed, and
    the kernels (and prim_funcs) already loaded in this process, by task index. The tuner
    loads the best one from the kernel cache when it is not among them."""

    trials: list[Trial]
    ref_latency: float | None = None
    kernels: dict[int, Any] = field(default_factory=dict)
    funcs: dict[int, Any] = field(default_factory=dict)


@runtime_checkable
class TuneExecutor(Protocol):
    """Compiles and measures the configurations of one tuning job.

    compile(job): start compiling every task; yields exactly one CompileOutcome per task,
    in any order, as each finishes. A configuration that fails is an outcome with
    ``error`` set, never an exception (the rest go on). A successful outcome either holds
    the loaded ``kernel`` or guarantees that its kernel is in this process's kernel cache
    under ``cache_key`` when it is yielded (when ``job.cache_dir`` is set), so that
    loading it here is a cache hit, not a compilation; it may also carry the compiled
    entry's bytes (``artifact``).

    measure(job, outcomes): check each compiled configuration against the reference and
    time it (job.profile), consuming ``outcomes`` as they arrive when
    ``job.use_pipeline``; returns Measurements. A configuration that fails its load,
    check or timing is a Trial with that stage and the error, never an exception.
    Timings of one job must be comparable: one configuration per device at a time."""

    def compile(self, job: TuneJob) -> Iterator[CompileOutcome]: ...

    def measure(self, job: TuneJob, outcomes: Iterable[CompileOutcome]) -> Measurements: ...


class LocalExecutor:
    """This machine: a pool of spawned processes compiles (one per CPU, at most one per
    submission; ``max_workers`` caps them), this process checks and times one configuration
    after another. Without a kernel cache, or with one worker, it compiles in this process.

    A pipelined tune (``use_pipeline``) times configurations while the rest compile, so it
    starts half the CPUs' workers (at least 2, at most the CPUs): each holds torch and TVM
    (350 MB resident on the CPU machine, more with CUDA libraries), and the timing process
    keeps CPUs of its own. Measured on the H200 host (16 CPUs, 16 GEMM configurations,
    ``benchmarks/autotune_ray.py --bytecode``, three runs): with 4, 8 or 16 workers every
    configuration had compiled 4-8 s into the tune, and the tune then waited for the timing
    (about 0.35 s a configuration). The time to the tuned kernel followed the order of the
    tunes in a process (the first 11.7-16.0 s, later ones 9.5-12.5 s) more than the pool's
    size, so the smaller pool is not shown to be faster, only not slower.
    """

    def __init__(self, max_workers: int | None = None) -> None:
        if max_workers is not None and (isinstance(max_workers, bool) or not isinstance(max_workers, int)
                                        or max_workers < 1):
            raise TileLangError(f"LocalExecutor: max_workers must be an int >= 1 (or None: one per CPU), "
                                f"got {max_workers!r}")
        self.max_workers = max_workers

    def compile(self, job: TuneJob) -> Iterator[CompileOutcome]:
        group = max(1, job.group_size)
        cpus = compile_pool.available_cpus()
        if job.use_pipeline:  # the timing process keeps CPUs of its own
            cpus = min(cpus, max(2, cpus // 2))
        workers = min(cpus, -(-len(job.tasks) // group), self.max_workers or cpus)
        if job.cache_dir is None or workers < 2:
            return compile_pool.compile_in_process(job.builder, job.args, job.tasks)
        return compile_pool.compile_in_pool(job.builder, job.args, job.tasks, job.cache_dir, workers, group)

    def measure(self, job: TuneJob, outcomes: Iterable[CompileOutcome]) -> Measurements:
        from .bench_loop import BenchLoop

        loop = BenchLoop(job)
        trials = loop.run(outcomes, job.use_pipeline)
        return Measurements(trials, loop.timer.ref_latency, loop.kernels, loop.funcs)

    def __repr__(self) -> str:
        return "LocalExecutor()" if self.max_workers is None else f"LocalExecutor(max_workers={self.max_workers})"


def checked_executor(executor: Any) -> TuneExecutor | None:
    """``executor`` when it is an object with the TuneExecutor methods (or None), else
    TileLangError."""
    if executor is not None and (isinstance(executor, type) or not isinstance(executor, TuneExecutor)):
        got = f"the class {executor.__name__}" if isinstance(executor, type) else type(executor).__name__
        raise TileLangError(f"autotune: executor= takes a TuneExecutor (an object with compile(job) and "
                            f"measure(job, outcomes), such as tilelang.autotuner.RayExecutor()), got {got}")
    return executor


__all__ = ["LocalExecutor", "Measurements", "TuneExecutor", "TuneJob", "checked_executor"]
