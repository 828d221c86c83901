"""Tuning an eager kernel (``T.const`` sizes, ``T.empty`` outputs).

An eager kernel has no builder that returns a T.prim_func: its JITFunction specializes
the function body itself and knows which tensors are outputs. The tuner therefore takes
``EagerBuilder``, which stands for ``jit_fn.compile(**sizes, **config)`` and returns the
JITKernel. It travels to compile workers as the plain function and the @jit options (the
JITFunction holds compiled kernels and TVM objects, which do not pickle); a worker makes
its own JITFunction from them.
"""

from __future__ import annotations

import inspect
from typing import Any


class EagerBuilder:
    def __init__(self, function: Any, options: dict[str, Any]) -> None:
        self.function = function
        self.options = dict(options)
        self._jit: Any = None
        self.__qualname__ = getattr(function, "__qualname__", "eager kernel")  # for messages

    @property
    def __signature__(self) -> inspect.Signature:  # the tuner checks config keys against it
        return inspect.signature(self.function)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._jit is None:
            from ..jit import JITFunction

            self._jit = JITFunction(self.function, self.options)
        return self._jit.compile(*args, **kwargs)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_jit": None}

    def __repr__(self) -> str:  # the tuning cache's key: what decides what it builds
        from .result_cache import function_text

        return f"EagerBuilder({function_text(self.function)!r}, {sorted(self.options.items())!r})"


__all__ = ["EagerBuilder"]
