"""Environment switches, read in one place so that they are documented together.

TILELANG_PLUGINS_STRICT=1        a plugin that fails to load raises instead of being recorded
TILELANG_PLUGINS_ALLOW=a,b       only these entry-point names load (core's built-ins included)
TILELANG_PLUGINS_DENY=a,b        these entry-point names never load
TILELANG_NO_PLUGIN_AUTOLOAD=1    `import tilelang` loads no entry points; call
                                 tilelang.plugins.load_plugins() or register by hand
TILELANG_CACHE_DIR=path          root of every cache: kernels/, cython/, cubin/, autotuner/
                                 (default: the per-user cache dir); folders 0700, checked
TILELANG_CACHE_MAX_BYTES=size    evict least recently used compiled code above this (500M, 2G)
TILELANG_TMP_DIR=path            scratch files of a compilation (default: <cache dir>/tmp)
TILELANG_DISABLE_CACHE=1         compile every time; read and write no cache entries
TILELANG_PRINT_ON_COMPILATION=0  log compilations at DEBUG instead of INFO level
TILELANG_DEFAULT_TARGET=spec     what target="auto" means (a kind, an alias or a JSON dict)
TILELANG_EXECUTION_BACKEND=name  what execution_backend="auto" means
TILELANG_LOUD_TVM_IMPORT=1       let `import tvm` raise its 113 C++ errors (see tilelang.tvm_import)
TILELANG_JIT_REQUEST_CACHE=0     always build a kernel's IR before looking it up (see
                                 tilelang.jit.request_key: the TVM-free hit path)
TILELANG_JIT_DIAGNOSTICS=1       log each phase of a compile (cache lookup, lower, build,
                                 load) with its time, at INFO on "tilelang.jit.diagnostics"

Read where they apply: TILELANG_CPU_THREADS=n (the CPU backend's thread pool),
TILELANG_RAY_ADDRESS=addr (the autotuner's RayExecutor), TILELANG_ROUTE=name (per-kernel
routing: the routers of the installed backends read it, and may read switches of their own),
TILELANG_CUDA_TOOLCHAIN=nvrtc|nvcc|auto, TILELANG_PASS_PROFILE=1 and
TILELANG_PASS_PROFILE_THRESHOLD_MS=ms (tilelang.engine.instruments: each pass's time),
TL_LOWER_TRACE=terminal|html|both and TL_LOWER_TRACE_DIR=path (tilelang.tools.lower_trace:
each pass's IR diff; upstream's older TILELANG_PASS_DIFF and TILELANG_PASS_DIFF_OUTPUT too).

Upstream TileLang exposes these as attributes of ``tilelang.env``
(``tilelang.env.TILELANG_CACHE_DIR``): each reads the variable live, and assigning one
(``tilelang.env.TILELANG_CACHE_DIR = path``) overrides the variable in this process until
it is assigned ``None``. This module is that object: its class is swapped for one holding
the attribute descriptors, so the module's own functions keep working as before.
"""

from __future__ import annotations

import json
import os
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


def flag(name: str) -> bool:
    """True when the variable is set to a true-looking value (1, true, yes, on)."""
    return _truthy(os.environ.get(name, ""))


def name_list(name: str) -> frozenset[str] | None:
    """A comma-separated set of names, or None when the variable is unset or empty."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    return frozenset(part.strip() for part in raw.split(",") if part.strip())


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in {"1", "true", "yes", "on"}


PLUGINS_STRICT = "TILELANG_PLUGINS_STRICT"
PLUGINS_ALLOW = "TILELANG_PLUGINS_ALLOW"
PLUGINS_DENY = "TILELANG_PLUGINS_DENY"
NO_PLUGIN_AUTOLOAD = "TILELANG_NO_PLUGIN_AUTOLOAD"
LOUD_TVM_IMPORT = "TILELANG_LOUD_TVM_IMPORT"
CACHE_DIR = "TILELANG_CACHE_DIR"
TMP_DIR = "TILELANG_TMP_DIR"
DISABLE_CACHE = "TILELANG_DISABLE_CACHE"
CACHE_MAX_BYTES = "TILELANG_CACHE_MAX_BYTES"
PRINT_ON_COMPILATION = "TILELANG_PRINT_ON_COMPILATION"
DEFAULT_TARGET = "TILELANG_DEFAULT_TARGET"
DEFAULT_EXECUTION_BACKEND = "TILELANG_EXECUTION_BACKEND"
VERBOSE = "TILELANG_VERBOSE"
JIT_DIAGNOSTICS = "TILELANG_JIT_DIAGNOSTICS"


class EnvVar:
    """One environment variable as an attribute: the value forced in this process (set by
    assignment), else the variable, else the default (a value or a function of nothing).
    ``_forced_value`` keeps upstream's name: its tests save and restore it directly."""

    def __init__(self, key: str, default: str | None | Callable[[], str | None]) -> None:
        self.key = key
        self.default = default
        self._forced_value: Any = None

    def get(self) -> Any:
        if self._forced_value is not None:
            return self._forced_value
        if self.key in os.environ:
            return os.environ[self.key]
        return self.default() if callable(self.default) else self.default

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        return self if instance is None else self.get()

    def __set__(self, instance: Any, value: Any) -> None:
        self._forced_value = value

    def __repr__(self) -> str:
        return f"EnvVar({self.key!r})"


def _default_cache_dir() -> str:
    # imported here: platformdirs is needed only when the variable is unset
    import platformdirs

    return platformdirs.user_cache_dir("tilelang")


class _EnvironmentModule(types.ModuleType):
    """The class of this module: upstream's ``tilelang.env`` attributes as descriptors."""

    TILELANG_CACHE_DIR = EnvVar(CACHE_DIR, _default_cache_dir)
    TILELANG_TMP_DIR = EnvVar(TMP_DIR, lambda: os.path.join(str(_MODULE.TILELANG_CACHE_DIR), "tmp"))
    TILELANG_DISABLE_CACHE = EnvVar(DISABLE_CACHE, "0")
    TILELANG_CACHE_MAX_BYTES = EnvVar(CACHE_MAX_BYTES, None)
    TILELANG_PRINT_ON_COMPILATION = EnvVar(PRINT_ON_COMPILATION, "1")
    TILELANG_DEFAULT_TARGET = EnvVar(DEFAULT_TARGET, "auto")
    TILELANG_DEFAULT_EXECUTION_BACKEND = EnvVar(DEFAULT_EXECUTION_BACKEND, "auto")
    TILELANG_DEFAULT_VERBOSE = EnvVar(VERBOSE, "0")
    TILELANG_JIT_DIAGNOSTICS = EnvVar(JIT_DIAGNOSTICS, "0")


_MODULE = sys.modules[__name__]
_MODULE.__class__ = _EnvironmentModule
#: upstream's ``from tilelang.env import env``: the environment object is this module
env = _MODULE

# switched by enable_cache() / disable_cache(); TILELANG_DISABLE_CACHE=1 wins over it
_cache_enabled = True


@contextmanager
def overridden(**values: Any) -> Iterator[None]:
    """Inside, each named attribute of this module (``TILELANG_...=value``) reads
    ``value``, as if assigned in this process; the previous values come back after."""
    variables = {name: getattr(type(_MODULE), name) for name in values}
    saved = {name: var._forced_value for name, var in variables.items()}
    for name, var in variables.items():
        var._forced_value = values[name]
    try:
        yield
    finally:
        for name, var in variables.items():
            var._forced_value = saved[name]


def enable_cache() -> None:
    """Use the kernel cache again (unless TILELANG_DISABLE_CACHE is set)."""
    global _cache_enabled
    _cache_enabled = True


def disable_cache() -> None:
    """Compile every kernel in this process; read and write no cache entries."""
    global _cache_enabled
    _cache_enabled = False


def is_cache_globally_disabled() -> bool:
    """TILELANG_DISABLE_CACHE (or its forced value) turns the cache off."""
    return _truthy(_MODULE.TILELANG_DISABLE_CACHE)


def is_cache_enabled() -> bool:
    return _cache_enabled and not is_cache_globally_disabled()


def is_print_on_compilation_enabled() -> bool:
    return _truthy(_MODULE.TILELANG_PRINT_ON_COMPILATION)


def is_jit_diagnostics_enabled() -> bool:
    return _truthy(_MODULE.TILELANG_JIT_DIAGNOSTICS)


def get_default_target() -> str | dict[str, Any]:
    """TILELANG_DEFAULT_TARGET: a plain string (kind, alias, "auto"), or a JSON dict."""
    value = _MODULE.TILELANG_DEFAULT_TARGET
    if value is None:
        return "auto"
    if isinstance(value, dict):
        return dict(value)
    text = str(value).strip()
    if not text.startswith("{"):
        return text or "auto"
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(
            f"{DEFAULT_TARGET}={text!r} looks like a dict but is not valid JSON ({err}). "
            'Use JSON syntax like {"kind": "cuda", "arch": "sm_90"}.'
        ) from err
    if not isinstance(parsed, dict):
        raise ValueError(f"{DEFAULT_TARGET} must be a target name or a JSON object, got {text!r}")
    return parsed


def get_default_execution_backend() -> str:
    return str(_MODULE.TILELANG_DEFAULT_EXECUTION_BACKEND or "auto").strip() or "auto"


def get_default_verbose() -> bool:
    return _truthy(_MODULE.TILELANG_DEFAULT_VERBOSE)
