"""The JIT: ``@tilelang.jit`` and ``tilelang.compile``."""

from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .kernel import JITKernel


def compile(
    func: Any,
    out_idx: Sequence[int] | int | None = None,
    target: Any = "auto",
    target_host: Any = None,
    execution_backend: str = "auto",
    pass_configs: Mapping[str, Any] | None = None,
    instruments: Sequence[Any] = (),
) -> JITKernel:
    """Compile a T.prim_func for a target and execution backend (both "auto" by default).

    ``instruments``: TVM pass instruments for this compilation's pass-instrumentation
    session; the backend pipeline's phases appear in it as ``<pipeline>.lower``,
    ``<pipeline>.finalize_host`` ... A cached kernel runs no passes.
    """
    return JITKernel(func, out_idx=out_idx, target=target, target_host=target_host,
                     execution_backend=execution_backend, pass_configs=pass_configs,
                     instruments=instruments)


def lower(func: Any, target: Any = "auto", target_host: Any = None,
          out_idx: Sequence[int] | int | None = None,
          pass_configs: Mapping[str, Any] | None = None) -> Any:
    """Lower and generate code without choosing an execution backend: returns the
    CompiledArtifact (sources, signature, launch metadata). Works for targets this machine
    cannot run, e.g. CUDA source on a machine without a GPU."""
    from ..backend.module import create_backend_context
    from ..engine.lower import lower as engine_lower

    context = create_backend_context(target, target_host, execution_backend=None)
    out = [out_idx] if isinstance(out_idx, int) else list(out_idx or ())
    return engine_lower(func, context, out_idx=out, pass_configs=pass_configs)


class JITFunction:
    """What ``@tilelang.jit`` returns: call it with the kernel's parameters (sizes, tile
    shapes) to get a compiled JITKernel; each parameter set compiles once per process and
    once per machine (the disk cache)."""

    def __init__(self, builder: Callable[..., Any], options: dict[str, Any]) -> None:
        self.builder = builder
        self.options = options
        self._kernels: dict[Any, JITKernel] = {}
        functools.update_wrapper(self, builder)

    def __call__(self, *args: Any, **kwargs: Any) -> JITKernel:
        key = (args, tuple(sorted(kwargs.items())))
        kernel = self._kernels.get(key)
        if kernel is None:
            kernel = compile(self.builder(*args, **kwargs), **self.options)
            self._kernels[key] = kernel
        return kernel


def jit(
    func: Callable[..., Any] | None = None,
    *,
    out_idx: Sequence[int] | int | None = None,
    target: Any = "auto",
    target_host: Any = None,
    execution_backend: str = "auto",
    pass_configs: Mapping[str, Any] | None = None,
) -> Any:
    """``@tilelang.jit(out_idx=[-1])`` on a function that returns a T.prim_func."""
    options = dict(out_idx=out_idx, target=target, target_host=target_host,
                   execution_backend=execution_backend, pass_configs=pass_configs)
    if func is not None:
        return JITFunction(func, options)
    return lambda f: JITFunction(f, options)


__all__ = ["JITFunction", "JITKernel", "compile", "jit", "lower"]
