"""The autotuner's measuring loop: takes compile outcomes as they arrive, loads each kernel,
checks it against the reference, times it, and shows both phases as rich progress bars.
KernelTimer is the check and the timing of one kernel, shared with the Ray executor's
measuring workers."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from ..errors import InputSupplyError
from . import compile_pool
from .param import ProfileArgs, Trial

if TYPE_CHECKING:
    from .executor import TuneJob

log = logging.getLogger("tilelang.autotuner")


def progress_bars(job: TuneJob) -> tuple[Progress, Any, Any]:
    """The display of a run: (progress, compiling task, timing task)."""
    columns = (TextColumn("[progress.description]{task.description}"), BarColumn(),
               MofNCompleteColumn(), TimeElapsedColumn())
    progress = Progress(*columns, console=job.console)
    n = len(job.tasks)
    return (progress, progress.add_task(f"Compiling {n} configurations", total=n),
            progress.add_task("Benchmarking", total=n))


def record(job: TuneJob, trials: dict[int, Trial], trial: Trial) -> None:
    trials[trial.index] = trial
    level = logging.INFO if job.verbose else logging.DEBUG
    if trial.ok:
        log.log(level, "config %d %s: %.6f ms", trial.index, trial.config, trial.latency)
    else:
        log.log(level, "config %d %s: %s failed: %s", trial.index, trial.config, trial.stage, trial.error)


class BenchLoop:
    """Measures every compiled configuration of one tuning job in this process, one after
    another (kernels timed side by side would disturb each other)."""

    def __init__(self, job: TuneJob) -> None:
        self.job = job
        self.configs = job.configs
        self.tasks = job.tasks
        self.timer = KernelTimer(job.profile)
        self.early_stop_factor = job.early_stop_factor
        self.trials: dict[int, Trial] = {}
        self.kernels: dict[int, Any] = {}
        self.funcs: dict[int, Any] = {}
        self.best: float | None = None

    def run(self, outcomes: Iterable[compile_pool.CompileOutcome], use_pipeline: bool) -> list[Trial]:
        progress, compiling, timing = progress_bars(self.job)
        with progress:
            waiting = []
            for outcome in outcomes:
                progress.advance(compiling)
                if outcome.error is not None:
                    self._record(Trial(outcome.index, dict(self.configs[outcome.index]), error=outcome.error,
                                       stage="compile", compile_pid=outcome.pid))
                    progress.advance(timing)
                elif use_pipeline:
                    self._measure(outcome, progress, timing)
                else:
                    waiting.append(outcome)
            for outcome in sorted(waiting, key=lambda o: o.index):
                self._measure(outcome, progress, timing)
        return [self.trials[i] for i in sorted(self.trials)]

    def _record(self, trial: Trial) -> None:
        record(self.job, self.trials, trial)

    def _measure(self, outcome: compile_pool.CompileOutcome, progress: Progress, timing: Any) -> None:
        index = outcome.index
        config = dict(self.configs[index])
        loaded = outcome
        if outcome.kernel is None:  # compiled by a worker: a kernel-cache hit here
            loaded = compile_pool.load_compiled(self.job.builder, self.job.args, self.tasks[index],
                                                outcome.cache_key)
        if loaded.error is not None:
            latency, error, stage = None, loaded.error, "load"
        else:
            self.kernels[index], self.funcs[index] = loaded.kernel, loaded.func
            baseline = None
            if self.early_stop_factor is not None and self.best is not None:
                baseline = self.best * self.early_stop_factor
            latency, error, stage = time_kernel(self.timer, loaded.kernel, baseline)
        if latency is None:
            self._record(Trial(index, config, error=error, stage=stage, compile_pid=outcome.pid))
        else:
            self._record(Trial(index, config, latency=latency, compile_pid=outcome.pid))
            if self.best is None or latency < self.best:
                self.best = latency
                progress.update(timing, description=f"Benchmarking (best {latency:.4g} ms)")
        progress.advance(timing)


def time_kernel(timer: KernelTimer, kernel: Any, baseline: float | None) -> tuple[float | None, str, str]:
    """(latency in ms, "", "") or (None, the error, the stage that failed: "check" or
    "bench"), within the profile's timeout."""
    stage = {"name": "check"}
    try:
        latency = run_with_timeout(lambda: timer.check_and_time(kernel, stage, baseline), timer.profile.timeout)
    except InputSupplyError as err:  # no configuration could run: the tune stops here
        raise InputSupplyError(f"{err}; to autotune, give the inputs: `with tilelang.autotuner."
                               "set_autotune_inputs(a, s, ...):` around the call, or supply_prog=") from None
    except Exception as err:  # noqa: BLE001  (any failure of a configuration is its trial's error)
        return None, compile_pool.describe_error(err), stage["name"]
    return latency, "", ""


class KernelTimer:
    """Checks kernels against the reference and times them, as ProfileArgs says; it keeps
    the inputs across kernels (cache_input_tensors) and times the reference once."""

    def __init__(self, profile: ProfileArgs) -> None:
        self.profile = profile
        self.ref_latency: float | None = None
        self._inputs: list[Any] | None = None

    def _inputs_for(self, profiler: Any) -> list[Any]:
        p = self.profile
        params = profiler._get_params()
        if p.cache_input_tensors and self._inputs is not None and _fits(self._inputs, params):
            return self._inputs
        inputs = list(p.supply_prog(params)) if p.supply_prog is not None else profiler._get_inputs()
        if p.cache_input_tensors:
            self._inputs = inputs
        return inputs

    def check_and_time(self, kernel: Any, stage: dict[str, str], baseline: float | None = None) -> float:
        """The kernel's latency in ms; ``stage["name"]`` says how far it got when this
        raises. ``baseline``: stop timing early above it (the estimate is returned)."""
        p = self.profile
        stage["name"] = "check"
        profiler = kernel.get_profiler(tensor_supply_type=p.supply_type)
        inputs = self._inputs_for(profiler)
        if p.ref_prog is not None and not p.skip_check:
            if p.manual_check_prog is not None:
                profiler.manual_assert_close(p.ref_prog, input_tensors=inputs, manual_check_prog=p.manual_check_prog)
            else:
                profiler.assert_allclose(p.ref_prog, input_tensors=inputs, rtol=p.rtol, atol=p.atol,
                                         max_mismatched_ratio=p.max_mismatched_ratio)
        stage["name"] = "bench"
        latency = profiler.do_bench(n_warmup=p.warmup, n_repeat=p.rep, input_tensors=inputs,
                                    backend=p.backend, early_stop_baseline=baseline)
        if self.ref_latency is None and p.ref_prog is not None:
            self.ref_latency = profiler.do_bench(p.ref_prog, n_warmup=p.warmup, n_repeat=p.rep,
                                                 input_tensors=inputs, backend=p.backend)
        return latency


def run_with_timeout(fn: Callable[[], Any], timeout: float) -> Any:
    """``fn()``, or TimeoutError after ``timeout`` seconds (<= 0: no limit). The call runs
    on a daemon thread that is left behind on timeout: Python cannot stop a thread that is
    inside a native kernel, so a runaway kernel keeps its core until it returns."""
    if timeout is None or timeout <= 0:
        return fn()
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as err:  # noqa: BLE001  (handed to the caller's thread)
            box["error"] = err

    thread = threading.Thread(target=target, daemon=True, name="tilelang-autotune-bench")
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(f"timed out after {timeout:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _fits(tensors: Sequence[Any], params: Sequence[Any]) -> bool:
    """Cached inputs still match these parameters (dtype and static shape)."""
    if len(tensors) != len(params):
        return False
    for tensor, param in zip(tensors, params):
        shape = getattr(tensor, "shape", None)
        if shape is None or param.shape is None:
            continue
        if str(tensor.dtype).removeprefix("torch.") != param.dtype:
            return False
        if any(not isinstance(d, str) and d != s for d, s in zip(param.shape, shape)):
            return False
    return True


__all__ = ["BenchLoop", "KernelTimer", "progress_bars", "record", "run_with_timeout", "time_kernel"]
