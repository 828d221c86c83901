"""AutoTuner: compile a kernel builder for each configuration, check and time each, and
keep the fastest (upstream TileLang's ``AutoTuner.from_kernel(...).run()``).

Compilation is parallel (compile_pool), benchmarking is serial in this process (kernels
timed side by side would disturb each other), and the outcome is cached on disk
(result_cache): a second run of the same problem loads the best kernel from the kernel
cache and times nothing.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..cache import KernelCache
from ..errors import TileLangError
from ..jit import JITFunction
from ..profiler.supply import TensorSupplyType
from . import compile_pool, result_cache
from .capture import get_autotune_inputs
from .executor import LocalExecutor, TuneExecutor, TuneJob, checked_executor
from .param import AutotuneResult, CompileArgs, ProfileArgs, Trial

log = logging.getLogger("tilelang.autotuner")

RESERVED_KEYS = frozenset({"pass_configs"})  # a config's own pass configs, not a parameter


class AutotuneError(TileLangError):
    """No configuration compiled, passed its check and ran; the message lists each one,
    ``trials`` holds their full errors."""

    def __init__(self, message: str, trials: Sequence[Trial] = ()) -> None:
        super().__init__(message)
        self.trials = list(trials)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


class AutoTuner:
    """Tunes ``fn`` (a function returning a T.prim_func, or a @tilelang.jit function) over
    ``configs`` (dicts of its keyword arguments; a callable returning them gets the fixed
    arguments). ``args`` / ``kwargs``: fixed arguments passed on every call of ``fn``.
    ``executor``: where configurations compile and are timed (a TuneExecutor; default
    LocalExecutor(): this machine's CPUs, then this process)."""

    def __init__(self, fn: Callable[..., Any], configs: Any, *, args: Sequence[Any] = (),
                 kwargs: Mapping[str, Any] | None = None, executor: TuneExecutor | None = None) -> None:
        self.compile_args = CompileArgs()
        self.profile_args = ProfileArgs()
        if isinstance(fn, JITFunction):  # its options are the defaults of set_compile_args
            known = {k: v for k, v in fn.options.items() if k in CompileArgs.__dataclass_fields__}
            self.compile_args = CompileArgs(**known)
            fn = fn.builder
        self.fn = fn
        self.configs = configs
        self.args = tuple(args)
        self.kwargs = dict(kwargs or {})
        self.console: Any = None  # a rich Console for the progress display (default: stdout)
        self.executor = checked_executor(executor)

    @classmethod
    def from_kernel(cls, kernel: Callable[..., Any], configs: Any,
                    executor: TuneExecutor | None = None) -> AutoTuner:
        return cls(kernel, configs, executor=executor)

    def set_compile_args(self, out_idx: Sequence[int] | int | None = None, target: Any = None,
                         execution_backend: str | None = None, target_host: Any = None,
                         verbose: bool | None = None,
                         pass_configs: Mapping[str, Any] | None = None) -> AutoTuner:
        """tilelang.compile's options for every configuration; ``verbose`` logs each trial."""
        self.compile_args = CompileArgs(out_idx=out_idx, target="auto" if target is None else target,
                                        target_host=target_host,
                                        execution_backend=execution_backend or "auto",
                                        pass_configs=pass_configs, verbose=bool(verbose))
        return self

    def set_profile_args(self, warmup: int = 25, rep: int = 100, timeout: float = 30,
                         supply_type: TensorSupplyType = TensorSupplyType.Auto,
                         ref_prog: Callable[..., Any] | None = None,
                         supply_prog: Callable[..., Any] | None = None, rtol: float = 1e-2,
                         atol: float = 1e-2, max_mismatched_ratio: float = 0.01,
                         skip_check: bool = False, manual_check_prog: Callable[..., Any] | None = None,
                         cache_input_tensors: bool = False, backend: str = "event") -> AutoTuner:
        """How configurations are checked and timed (see ProfileArgs). Inside
        ``with set_autotune_inputs(...)`` the captured inputs replace supply_prog."""
        captured = get_autotune_inputs()
        if captured is not None:
            supply_prog = captured
        self.profile_args = ProfileArgs(warmup, rep, timeout, supply_type, ref_prog, supply_prog, rtol,
                                        atol, max_mismatched_ratio, skip_check, manual_check_prog,
                                        cache_input_tensors, backend)
        return self

    # -- configurations ------------------------------------------------------------------
    def _config_list(self) -> list[dict[str, Any]]:
        configs = self.configs(*self.args, **self.kwargs) if callable(self.configs) else self.configs
        configs = [dict(c) for c in configs or ()]
        if not configs:
            raise TileLangError(f"autotune of {self._name()!r}: no configurations to tune; pass "
                                "configs=[{...}, ...] (or a function returning them)")
        try:
            params = inspect.signature(self.fn).parameters
        except (TypeError, ValueError):
            return configs
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            return configs
        for i, config in enumerate(configs):
            unknown = set(config) - set(params) - RESERVED_KEYS
            if unknown:
                raise TileLangError(f"autotune of {self._name()!r}: config {i} {config} has keys "
                                    f"{sorted(unknown)} that the builder does not take; its "
                                    f"parameters are {list(params)}")
        return configs

    def _name(self) -> str:
        return getattr(self.fn, "__qualname__", repr(self.fn))

    def _task(self, index: int, config: Mapping[str, Any]) -> compile_pool.CompileTask:
        kwargs = {**self.kwargs, **{k: v for k, v in config.items() if k not in RESERVED_KEYS}}
        return compile_pool.CompileTask(index, kwargs, self._options(config.get("pass_configs")))

    def _options(self, per_config_pass_configs: Mapping[str, Any] | None) -> dict[str, Any]:
        options = self.compile_args.compile_options(per_config_pass_configs)
        # one resolution of "auto" for parent and workers, so their kernel-cache keys agree
        options.update(target=self._context.target, target_host=self._context.target_host,
                       execution_backend=self._context.execution_spec.name)
        return options

    def _problem_key(self, configs: list[dict[str, Any]]) -> str | None:
        p = self.profile_args
        ca = self.compile_args
        return result_cache.problem_key({
            "builder": self.fn, "args": list(self.args), "kwargs": self.kwargs, "configs": configs,
            "context": self._context.fingerprint(), "out_idx": ca.out_idx,
            "pass_configs": ca.pass_configs,
            "profile": [p.warmup, p.rep, p.supply_type, p.ref_prog, p.supply_prog, p.rtol, p.atol,
                        p.max_mismatched_ratio, p.skip_check, p.manual_check_prog,
                        p.cache_input_tensors, p.backend],
        })

    # -- the run -------------------------------------------------------------------------
    def run(self, warmup: int | None = None, rep: int | None = None, timeout: float | None = None,
            use_pipeline: bool = False, enable_grouped_compile: bool = False,
            group_compile_size: int = 1, benchmark_devices: Sequence[int] | None = None,
            benchmark_multi_gpu: bool = False, early_stop: bool = False,
            early_stop_factor: float = 2.0) -> AutotuneResult:
        """Tune and return the best configuration (``warmup`` / ``rep`` / ``timeout``
        override set_profile_args'). use_pipeline: time each configuration as soon as it is
        compiled; enable_grouped_compile: a worker takes ``group_compile_size``
        configurations at a time; early_stop: skip the full timing of a configuration whose
        estimate is ``early_stop_factor`` times the best so far. benchmark_multi_gpu /
        benchmark_devices: accepted for upstream's scripts; the local executor times
        configurations one after another on the current device (a warning says so), a
        RayExecutor on every GPU of its cluster."""
        from ..backend.module import create_backend_context

        if early_stop and early_stop_factor < 1.0:
            raise TileLangError(f"early_stop_factor must be >= 1.0, got {early_stop_factor}")
        executor = self.executor if self.executor is not None else LocalExecutor()
        if (benchmark_multi_gpu or benchmark_devices) and isinstance(executor, LocalExecutor):
            log.warning("tilelang autotuner: the local executor times every configuration on the "
                        "current device; pass executor=tilelang.autotuner.RayExecutor() to use several")
        overrides = {k: v for k, v in {"warmup": warmup, "rep": rep, "timeout": timeout}.items() if v is not None}
        profile = replace(self.profile_args, **overrides)
        self.profile_args = profile
        ca = self.compile_args
        self._context = create_backend_context(ca.target, ca.target_host, ca.execution_backend)
        configs = self._config_list()
        cache = KernelCache()
        key = self._problem_key(configs) if cache.enabled else None
        if key is not None:
            stored = result_cache.load(key)
            if stored is not None:
                return self._from_stored(stored, configs)
        tasks = [self._task(i, c) for i, c in enumerate(configs)]
        job = TuneJob(name=self._name(), builder=self.fn, args=self.args, configs=configs, tasks=tasks,
                      profile=profile, cache_dir=str(cache.root) if cache.enabled else None,
                      group_size=group_compile_size if enable_grouped_compile else 1,
                      early_stop_factor=early_stop_factor if early_stop else None, use_pipeline=use_pipeline,
                      verbose=ca.verbose, console=self.console, runs_on_host=self._runs_on_host())
        measured = executor.measure(job, executor.compile(job))
        trials = measured.trials
        best = min((t for t in trials if t.ok), key=lambda t: t.latency, default=None)
        if best is None:
            listing = "\n".join(f"  config {t.index} {t.config}: {t.stage} failed: {_first_line(t.error or '')}"
                                for t in trials)
            raise AutotuneError(f"autotune of {self._name()!r}: all {len(trials)} configurations failed:\n"
                                f"{listing}\nThe full errors are in the exception's .trials; fix "
                                "the kernel or drop the failing configurations.", trials)
        kernel, func = measured.kernels.get(best.index), measured.funcs.get(best.index)
        if kernel is None:  # measured elsewhere: a kernel-cache hit here
            kernel, func = self._load(best.index, configs, "the best config")
        result = AutotuneResult(latency=best.latency, config=dict(configs[best.index]),
                                ref_latency=measured.ref_latency, kernel=kernel, func=func, trials=trials)
        result.libcode = result.kernel.get_kernel_source()
        if key is not None:
            result_cache.store(key, {"best_index": best.index, "latency": best.latency,
                                     "ref_latency": measured.ref_latency,
                                     "trials": [t.to_json() for t in trials]})
        return result

    def _from_stored(self, stored: Mapping[str, Any], configs: list[dict[str, Any]]) -> AutotuneResult:
        """The cached outcome; the best kernel comes from the kernel cache (no compiling
        when it is still there) and nothing is timed."""
        index = stored["best_index"]
        kernel, _ = self._load(index, configs, "the cached best config")
        log.info("tilelang autotuner: %s: best config %s from the tuning cache", self._name(), configs[index])
        return AutotuneResult(latency=stored["latency"], config=dict(configs[index]),
                              ref_latency=stored["ref_latency"], libcode=kernel.get_kernel_source(),
                              func=None, kernel=kernel,
                              trials=[Trial.from_json(t) for t in stored["trials"]], from_cache=True)

    def _load(self, index: int, configs: list[dict[str, Any]], what: str) -> tuple[Any, Any]:
        """(kernel, prim_func) of one configuration, built here (from the kernel cache when
        it holds the kernel)."""
        outcome = compile_pool.compile_one(self.fn, self.args, self._task(index, configs[index]))
        if outcome.error is not None:
            raise TileLangError(f"autotune of {self._name()!r}: {what} {configs[index]} does not "
                                f"compile in this process:\n{outcome.error}")
        return outcome.kernel, outcome.func

    def _runs_on_host(self) -> bool:
        from tvm_ffi import DLDeviceType

        return self._context.target.get_target_device_type() == DLDeviceType.kDLCPU

    def __call__(self) -> AutotuneResult:
        return self.run()


__all__ = ["AutoTuner", "AutotuneError"]
