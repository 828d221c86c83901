"""Source post-processing callbacks: user functions ``(code, target) -> code`` applied to
the device source a target backend generates, before it is compiled.

Upstream TileLang's spelling is kept (``register_cuda_postproc``,
``@register_cuda_postproc_callback``). Upstream stores the function as a TVM global that its
C++ codegen looks up; here the registry is a plain table keyed by target kind, and each
target backend that generates source asks for its own kind's callback
(``source_postproc(kind)``) — core neither applies it nor knows which backends do.
Backends that apply it: CUDA (``cuda``, after its own helper definitions are prepended), ROCm
(``hip``, before its prelude) and the CPU's C codegen (``c``). Before the registered function,
it turns ``tl.emit_line_directives``' line markers into ``#line`` directives.

The kernel cache keys kernels by their IR and options, not by these callbacks: a kernel
compiled before a callback was registered is served from the cache unchanged. Disable the
cache (``tilelang.disable_cache()``) while a post-processor is in use.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ..errors import TileLangError

SourcePostproc = Callable[[str, Any], str]

_LOCK = threading.Lock()
_POSTPROCS: dict[str, SourcePostproc] = {}


def register_source_postproc(kind: str, func: SourcePostproc, override: bool = True) -> None:
    """Register ``func(code, target) -> code`` for source generated for target kind ``kind``."""
    if not callable(func):
        raise TileLangError(f"register_{kind}_postproc: expected a function (code, target) -> code, "
                            f"got {type(func).__name__}")
    with _LOCK:
        if not override and kind in _POSTPROCS:
            raise TileLangError(f"a {kind} source post-processor is already registered "
                                f"({_describe(_POSTPROCS[kind])}); pass override=True to replace it")
        _POSTPROCS[kind] = func


def unregister_source_postproc(kind: str) -> None:
    """Remove ``kind``'s post-processor, if any."""
    with _LOCK:
        _POSTPROCS.pop(kind, None)


def source_postproc(kind: str) -> SourcePostproc | None:
    """The post-processor registered for ``kind`` (what a backend calls), or None."""
    return _POSTPROCS.get(kind)


def apply_source_postproc(kind: str, code: str, target: Any = None) -> str:
    """``code`` through ``kind``'s post-processor; a result that is not a string is an error
    naming the function. Line markers (``tl.emit_line_directives``) become ``#line`` first."""
    from ..transform.source_lines import line_directives

    code = line_directives(code)
    func = _POSTPROCS.get(kind)
    if func is None:
        return code
    result = func(code, target)
    if not isinstance(result, str):
        raise TileLangError(f"the {kind} source post-processor {_describe(func)} returned "
                            f"{type(result).__name__}, not the source string; return the (modified) code")
    return result


def _describe(func: Any) -> str:
    return f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', repr(func))}"


def register_cuda_postproc(func: SourcePostproc, override: bool = True) -> None:
    """Upstream's name: post-process generated CUDA source (``func(code, target) -> code``)."""
    register_source_postproc("cuda", func, override)


def register_cuda_postproc_callback(func: SourcePostproc | bool | None = None,
                                    override: bool = True) -> Any:
    """Decorator form: ``@register_cuda_postproc_callback``,
    ``@register_cuda_postproc_callback()`` or ``@register_cuda_postproc_callback(override=False)``
    (upstream also accepts the flag positionally: ``(False)``)."""
    if callable(func):
        register_cuda_postproc(func, override)
        return func
    if func is not None and not isinstance(func, bool):
        raise TileLangError("register_cuda_postproc_callback: use it as @register_cuda_postproc_callback "
                            f"or @register_cuda_postproc_callback(override=...), not with {func!r}")
    flag = func if isinstance(func, bool) else override

    def register(fn: SourcePostproc) -> SourcePostproc:
        register_cuda_postproc(fn, flag)
        return fn

    return register


__all__ = ["SourcePostproc", "apply_source_postproc", "register_cuda_postproc",
           "register_cuda_postproc_callback", "register_source_postproc", "source_postproc",
           "unregister_source_postproc"]
