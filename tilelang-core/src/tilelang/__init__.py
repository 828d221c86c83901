"""TileLang: a tile-level kernel language whose backends are plugins.

``import tilelang`` stays light: it loads the plugin manifests (no TVM, no SDK). TVM is
imported when a kernel is built (the first ``T.<name>`` read) and on the first compilation.
"""

# Plugin distributions add subpackages (tilelang.cuda, tilelang.jit.adapter.nvrtc, ...)
# from their own source trees; extending __path__ lets editable installs of several
# distributions share this package.
from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)

from . import env, tvm_compat, tvm_import
from ._version import __version__
from .backend.pass_configs import PassConfigKey
from .env import disable_cache, enable_cache, is_cache_enabled
from .errors import (
    ArgumentError,
    BackendNotFoundError,
    BackendUnavailableError,
    CompileError,
    InputSupplyError,
    LanguageError,
    LaunchError,
    ManifestError,
    PluginError,
    TileLangError,
)
from .jit import JITKernel, compile, jit, lower
from .jit.par_compile import par_compile
from .math import cdiv, next_power_of_2  # upstream exports them at top level
from .plugins import load_plugins

__all__ = [
    "ArgumentError",
    "BackendNotFoundError",
    "BackendUnavailableError",
    "CompileError",
    "InputSupplyError",
    "JITKernel",
    "LanguageError",
    "LaunchError",
    "ManifestError",
    "PassConfigKey",
    "PluginError",
    "TileLangError",
    "__version__",
    "cdiv",
    "compile",
    "disable_cache",
    "enable_cache",
    "is_cache_enabled",
    "jit",
    "load_plugins",
    "lower",
    "next_power_of_2",
    "par_compile",
    "set_log_level",
]


def set_log_level(level: int | str) -> None:
    """Upstream's ``tilelang.set_log_level("WARNING")``: the level of every ``tilelang.*``
    logger (a name of the logging module's levels, any case, or its number)."""
    import logging

    if isinstance(level, str):
        named = logging.getLevelName(level.upper())
        if not isinstance(named, int):
            raise ArgumentError(f"tilelang.set_log_level({level!r}): not a log level; use DEBUG, INFO, "
                                "WARNING, ERROR or CRITICAL (or a number)")
        level = named
    logging.getLogger(__name__).setLevel(level)


def __getattr__(name: str):
    # `from tilelang import tvm` (upstream's spelling) imports TVM on first use only, so
    # that `import tilelang` stays TVM-free
    if name == "tvm":
        import tvm

        from .tvm_compat import (
            install,  # upstream's TVM names TVM 0.27 lacks (tirx.PrimExpr)
        )

        install()
        return tvm
    if name == "DataType":  # upstream re-exports TVM's dtype class
        from tvm import DataType

        return DataType
    # the profiler and autotuner load on first use too (they bring torch and rich)
    if name in _LAZY:
        import importlib

        module = importlib.import_module(_LAZY[name][0], __name__)
        return getattr(module, _LAZY[name][1]) if _LAZY[name][1] else module
    raise AttributeError(f"module 'tilelang' has no attribute {name!r}")


_LAZY = {
    "autotune": (".autotuner", "autotune"),
    "AutoTuner": (".autotuner", "AutoTuner"),
    "TensorSupplyType": (".profiler", "TensorSupplyType"),
    "autotuner": (".autotuner", None),
    "profiler": (".profiler", None),
    "transform": (".transform", None),  # upstream's `tl.transform.<Pass>()` (it imports TVM)
}

tvm_compat.install_on_import()  # upstream scripts read tirx.PrimExpr before any T.<name>
tvm_import.install_on_import()  # `import tvm` without its 0.8 s of caught C++ errors

# Loaded once, at the end of `import tilelang`, in sorted order (see tilelang.plugins).
if not env.flag(env.NO_PLUGIN_AUTOLOAD):
    load_plugins()
