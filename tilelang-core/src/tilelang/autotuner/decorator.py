"""``@tilelang.autotune(configs=...)`` stacked over ``@tilelang.jit(...)``, as upstream writes it:

    @tilelang.autotune(configs=[{"block_M": 64, ...}, ...], warmup=10, rep=50)
    @tilelang.jit(out_idx=[-1])
    def matmul(M, N, K, block_M=None, ...): ...

    kernel = matmul(1024, 1024, 1024)   # tunes once per set of fixed arguments, returns the best
    matmul(1024, 1024, 1024, block_M=128, ...)  # tunable arguments given: no tuning, plain JIT
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import TileLangError
from ..jit import JITFunction
from ..profiler.supply import TensorSupplyType
from .capture import get_autotune_inputs, set_autotune_inputs
from .eager_builder import EagerBuilder
from .executor import TuneExecutor, checked_executor
from .param import AutotuneResult
from .tuner import RESERVED_KEYS, AutoTuner


class AutoTuneImpl:
    """What ``@tilelang.autotune(...)`` returns: calling it tunes the wrapped JITFunction
    for those fixed arguments (once per process; the tuning cache makes later processes
    cheap) and returns the best JITKernel. ``results`` maps call arguments to outcomes."""

    def __init__(self, jit_fn: JITFunction, configs: Any, *, warmup: int, rep: int, timeout: float,
                 profile: dict[str, Any], early_stop: bool, early_stop_factor: float,
                 do_not_specialize: Sequence[str] | None, executor: TuneExecutor | None = None) -> None:
        self.jit_fn = jit_fn
        self.executor = executor
        self.configs = configs
        self.warmup, self.rep, self.timeout = warmup, rep, timeout
        self.profile = profile
        self.early_stop, self.early_stop_factor = early_stop, early_stop_factor
        self.do_not_specialize = tuple(do_not_specialize or ())
        self.results: dict[Any, AutotuneResult] = {}
        self.__wrapped__ = jit_fn
        self.__doc__ = jit_fn.__doc__
        self.__name__ = getattr(jit_fn, "__name__", "kernel")

    def get_tuner(self, *args: Any, **kwargs: Any) -> AutoTuner:
        """The AutoTuner this call would run (fixed arguments bound, options of @jit)."""
        tuner = AutoTuner(self.jit_fn, self.configs, args=args, kwargs=kwargs, executor=self.executor)
        return tuner.set_profile_args(warmup=self.warmup, rep=self.rep, timeout=self.timeout, **self.profile)

    def _configs(self, args: tuple, kwargs: dict) -> list[dict[str, Any]]:
        """The configurations for these fixed arguments (``configs`` may be a function of them)."""
        return self.configs(*args, **kwargs) if callable(self.configs) else list(self.configs or ())

    def _tunables_given(self, configs: list[dict[str, Any]], args: tuple, kwargs: dict) -> bool:
        tunables = set().union(*(c.keys() for c in configs)) - RESERVED_KEYS
        # keywords, not a signature binding: an eager kernel's T.const sizes are keywords
        # that its function does not declare
        positional = list(inspect.signature(self.jit_fn.builder).parameters)[:len(args)]
        return bool(tunables & (set(positional) | set(kwargs)))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs.pop("__return_kernel", False):  # upstream's spelling of .compile(...)
            return self.compile(*args, **kwargs)
        if getattr(self.jit_fn, "is_eager", False):
            return self._call_eager(args, kwargs)
        tuner = self.get_tuner(*args, **kwargs)
        configs = tuner._config_list()
        if self._tunables_given(configs, args, kwargs):
            return self.jit_fn(*args, **kwargs)  # upstream: explicit tunables skip tuning
        key = self._call_key(args, kwargs)
        result = self.results.get(key)
        if result is None:
            result = tuner.run(early_stop=self.early_stop, early_stop_factor=self.early_stop_factor)
            self.results[key] = result
        return result.kernel

    def compile(self, *args: Any, **kwargs: Any) -> Any:
        """The best kernel for these fixed arguments (upstream's ``.compile``). An eager
        kernel takes its ``T.const`` sizes here as keywords, beside the builder's own
        parameters; as upstream, any tunable argument given means no tuning: that
        configuration (the builder's defaults for the rest) is compiled."""
        if not getattr(self.jit_fn, "is_eager", False):
            return self(*args, **kwargs)
        configs = self._configs(args, kwargs)
        if self._tunables_given(configs, args, kwargs):
            return self.jit_fn.compile(*args, **kwargs)
        key = self._call_key(args, kwargs)
        result = self.results.get(key)
        if result is None:
            tuner = AutoTuner(EagerBuilder(self.jit_fn.builder, self.jit_fn.options), self.configs,
                              args=args, kwargs=kwargs, executor=self.executor)
            tuner.set_profile_args(warmup=self.warmup, rep=self.rep, timeout=self.timeout, **self.profile)
            result = tuner.run(early_stop=self.early_stop, early_stop_factor=self.early_stop_factor)
            self.results[key] = result
        return result.kernel

    def _call_eager(self, args: tuple, kwargs: dict) -> Any:
        """An eager kernel called with its tensors, as upstream's: the T.const sizes come
        from the tensors' shapes, the kernel is tuned for them (once per sizes, as
        ``.compile`` tunes), and the best one runs on the tensors; its outputs are returned."""
        configs = self._configs(args, kwargs)
        if self._tunables_given(configs, args, kwargs):
            return self.jit_fn(*args, **kwargs)
        eager = self.jit_fn._eager
        bound = inspect.signature(self.jit_fn.builder).bind_partial(*args, **kwargs).arguments
        inputs = [name for name in eager.source.inputs if name in bound]  # tensors, run-time scalars
        fixed = {name: value for name, value in bound.items() if name not in inputs}
        values = [bound[name] for name in inputs]
        # the profiler makes tensors, not scalars: time the configurations on this call's inputs
        timed_on_call = eager.source.scalars and get_autotune_inputs() is None
        with set_autotune_inputs(*values) if timed_on_call else contextlib.nullcontext():
            kernel = self.compile(**fixed, **eager.const_values(args, kwargs))
        return kernel(*values)

    def _call_key(self, args: tuple, kwargs: dict) -> Any:
        if self.do_not_specialize:
            bound = inspect.signature(self.jit_fn.builder).bind_partial(*args, **kwargs)
            named = {k: v for k, v in bound.arguments.items() if k not in self.do_not_specialize}
            return repr(sorted(named.items()))
        return repr((args, sorted(kwargs.items())))


def autotune(func: Any = None, *, configs: Any, warmup: int = 25, rep: int = 100, timeout: float = 100,
             supply_type: TensorSupplyType = TensorSupplyType.Auto, ref_prog: Callable[..., Any] | None = None,
             supply_prog: Callable[..., Any] | None = None, rtol: float = 1e-2, atol: float = 1e-2,
             max_mismatched_ratio: float = 0.01, skip_check: bool = False,
             manual_check_prog: Callable[..., Any] | None = None, cache_input_tensors: bool = False,
             do_not_specialize: Sequence[str] | None = None, early_stop: bool = False,
             early_stop_factor: float = 2.0,
             executor: TuneExecutor | None = None) -> Callable[[JITFunction], AutoTuneImpl]:
    """Tune a ``@tilelang.jit`` function over ``configs`` (a list of dicts of its keyword
    arguments, or a function of the fixed arguments returning one). warmup / rep: calls
    before and during each timing; timeout: seconds per configuration's check and timing;
    executor: where configurations compile and are timed (default: this machine; see
    tilelang.autotuner.RayExecutor); the rest as AutoTuner.set_profile_args. Put it above
    ``@tilelang.jit``."""
    if func is not None:
        raise TileLangError("@tilelang.autotune needs its configurations: write "
                            "@tilelang.autotune(configs=[...]) above @tilelang.jit(...)")
    executor = checked_executor(executor)  # wrong here, not at the first call
    profile = {"supply_type": supply_type, "ref_prog": ref_prog, "supply_prog": supply_prog, "rtol": rtol,
               "atol": atol, "max_mismatched_ratio": max_mismatched_ratio, "skip_check": skip_check,
               "manual_check_prog": manual_check_prog, "cache_input_tensors": cache_input_tensors}

    def decorator(jit_fn: Any) -> AutoTuneImpl:
        if not isinstance(jit_fn, JITFunction):
            raise TileLangError(f"@tilelang.autotune wraps a @tilelang.jit function, got "
                                f"{type(jit_fn).__name__} {getattr(jit_fn, '__name__', '')!r}; put "
                                "@tilelang.jit(...) between @tilelang.autotune(...) and the def")
        return AutoTuneImpl(jit_fn, configs, warmup=warmup, rep=rep, timeout=timeout, profile=profile,
                            early_stop=early_stop, early_stop_factor=early_stop_factor,
                            do_not_specialize=do_not_specialize, executor=executor)

    return decorator


__all__ = ["AutoTuneImpl", "autotune"]
