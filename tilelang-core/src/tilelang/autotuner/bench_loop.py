"""The autotuner's measuring loop: takes compile outcomes as they arrive, loads each kernel,
checks it against the reference, times it, and shows both phases as rich progress bars."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from . import compile_pool
from .param import ProfileArgs, Trial

if TYPE_CHECKING:
    from .tuner import AutoTuner

log = logging.getLogger("tilelang.autotuner")


class BenchLoop:
    """Measures every compiled configuration of one AutoTuner.run. ``early_stop_factor``:
    a configuration whose estimate exceeds that multiple of the best so far is not timed
    in full (None: every configuration is)."""

    def __init__(self, tuner: AutoTuner, configs: Sequence[Mapping[str, Any]],
                 tasks: Sequence[compile_pool.CompileTask], profile: ProfileArgs,
                 early_stop_factor: float | None) -> None:
        self.tuner = tuner
        self.configs = configs
        self.tasks = tasks
        self.profile = profile
        self.early_stop_factor = early_stop_factor
        self.trials: dict[int, Trial] = {}
        self.kernels: dict[int, Any] = {}
        self.funcs: dict[int, Any] = {}
        self.ref_latency: float | None = None
        self.best: float | None = None
        self._inputs: list[Any] | None = None  # cache_input_tensors: reused across configurations

    def run(self, outcomes: Iterable[compile_pool.CompileOutcome], use_pipeline: bool) -> list[Trial]:
        n = len(self.tasks)
        columns = (TextColumn("[progress.description]{task.description}"), BarColumn(),
                   MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=self.tuner.console) as progress:
            compiling = progress.add_task(f"Compiling {n} configurations", total=n)
            timing = progress.add_task("Benchmarking", total=n)
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
        self.trials[trial.index] = trial
        level = logging.INFO if self.tuner.compile_args.verbose else logging.DEBUG
        if trial.ok:
            log.log(level, "config %d %s: %.6f ms", trial.index, trial.config, trial.latency)
        else:
            log.log(level, "config %d %s: %s failed: %s", trial.index, trial.config, trial.stage, trial.error)

    def _measure(self, outcome: compile_pool.CompileOutcome, progress: Progress, timing: Any) -> None:
        index = outcome.index
        config = dict(self.configs[index])
        loaded = outcome
        if outcome.kernel is None:  # compiled by a worker: a kernel-cache hit here
            loaded = compile_pool.compile_one(self.tuner.fn, self.tuner.args, self.tasks[index])
            if loaded.kernel is not None and loaded.kernel.cache_key != outcome.cache_key:
                log.warning("tilelang autotuner: config %d compiled again in this process (its "
                            "kernel-cache key differs from the worker's)", index)
        stage = {"name": "load"}
        try:
            if loaded.error is not None:
                raise _Failed(loaded.error)
            self.kernels[index], self.funcs[index] = loaded.kernel, loaded.func
            latency = run_with_timeout(lambda: self._check_and_time(loaded.kernel, stage), self.profile.timeout)
        except Exception as err:
            text = str(err) if isinstance(err, _Failed) else compile_pool.describe_error(err)
            self._record(Trial(index, config, error=text, stage=stage["name"], compile_pid=outcome.pid))
        else:
            self._record(Trial(index, config, latency=latency, compile_pid=outcome.pid))
            if self.best is None or latency < self.best:
                self.best = latency
                progress.update(timing, description=f"Benchmarking (best {latency:.4g} ms)")
        progress.advance(timing)

    def _inputs_for(self, profiler: Any) -> list[Any]:
        p = self.profile
        params = profiler._get_params()
        if p.cache_input_tensors and self._inputs is not None and _fits(self._inputs, params):
            return self._inputs
        inputs = list(p.supply_prog(params)) if p.supply_prog is not None else profiler._get_inputs()
        if p.cache_input_tensors:
            self._inputs = inputs
        return inputs

    def _check_and_time(self, kernel: Any, stage: dict[str, str]) -> float:
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
        baseline = None
        if self.early_stop_factor is not None and self.best is not None:
            baseline = self.best * self.early_stop_factor
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
        except BaseException as err:  # handed to the caller's thread
            box["error"] = err

    thread = threading.Thread(target=target, daemon=True, name="tilelang-autotune-bench")
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(f"timed out after {timeout:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


class _Failed(Exception):
    """A failure already described (the text is the whole message)."""


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


__all__ = ["BenchLoop", "run_with_timeout"]
