"""PassPipeline: a backend's complete, ordered lowering sequence.

The ordered lists live in the backend's ``pipeline.py`` as literal lists in functions; this
class only runs them. It never opens a pass-instrumentation session: the compiler entry
point owns that. Each phase runs as a named ``Sequential`` so that an active session sees
backend-specific phase scopes.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ...errors import ManifestError, TileLangError, take_recent_error

if TYPE_CHECKING:
    from ..context import BackendContext

PassList = Callable[["BackendContext"], Sequence[Any]]

#: the pass configs of the compilation running in this context; the compile entry point
#: (tilelang.engine.lower) sets it, passes read it through pass_config(). It lives here,
#: below the engine, so that passes do not import the engine (no import circle).
ACTIVE_PASS_CONFIGS: contextvars.ContextVar[Mapping[str, Any]] = contextvars.ContextVar(
    "tilelang_pass_configs", default=MappingProxyType({})
)


def current_pass_configs() -> Mapping[str, Any]:
    return ACTIVE_PASS_CONFIGS.get()


def prim_func_pass(run: Callable[[Any, Any, Any], Any], name: str, opt_level: int = 0,
                   per_kernel: bool = False) -> Any:
    """``tvm.tirx.transform.prim_func_pass`` for TileLang's Python passes. TVM's FFI hands
    an exception raised inside a pass on as a RuntimeError carrying only the message; the
    compile entry point raises the original again (``take_pass_error``), so a LanguageError
    stays a LanguageError. ``per_kernel``: ``run`` looks at one kernel, and a function that
    launches several gives it each of them as a function of its own
    (``tilelang.plugin.each_kernel``)."""
    from tvm import tirx

    def each(func: Any, mod: Any, ctx: Any) -> Any:
        from ...transform.gpu.ir_util import each_kernel

        return each_kernel(lambda f: run(f, mod, ctx))(func)

    return tirx.transform.prim_func_pass(each if per_kernel else run, opt_level=opt_level, name=name)


def take_pass_error() -> TileLangError | None:
    """The TileLang error a failing pass raised, wherever in it (a structural_map callback
    too), and forget it: the newest one made in this thread (errors.take_recent_error)."""
    return take_recent_error()


def pass_config(name: str, default: Any = None) -> Any:
    """Read a pass config of the active compilation (tilelang.compile(pass_configs=...))."""
    return current_pass_configs().get(name, default)


@dataclass(frozen=True)
class PassPipeline:
    """name: phase-scope prefix; lowering: passes up to and including MakePackedAPI;
    finalize_host / finalize_device: passes after the host/device split."""

    name: str
    lowering: PassList
    finalize_host: PassList
    finalize_device: PassList

    def __post_init__(self) -> None:
        for field in ("lowering", "finalize_host", "finalize_device"):
            if not callable(getattr(self, field)):
                raise ManifestError(f"PassPipeline({self.name!r}).{field} must be callable")

    def _run(self, phase: str, passes: Sequence[Any], mod: Any) -> Any:
        import tvm

        return tvm.transform.Sequential(list(passes), name=f"{self.name}.{phase}")(mod)

    def lower(self, mod: Any, context: BackendContext) -> Any:
        return self._run("lower", self.lowering(context), mod)

    def finalize_host_module(self, mod: Any, context: BackendContext) -> Any:
        return self._run("finalize_host", self.finalize_host(context), mod)

    def finalize_device_module(self, mod: Any, context: BackendContext) -> Any:
        return self._run("finalize_device", self.finalize_device(context), mod)
