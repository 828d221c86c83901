"""TVM's runtime libraries, loaded for a tvm_ffi kernel library without importing ``tvm``.

A library that TVM exported embeds its device module as bytes, which tvm_ffi deserializes
while loading it through the global ``ffi.Module.load_from_bytes.<kind>`` (``kind``: the
device module's, e.g. "cuda"). Those loaders live in TVM's runtime sidecar libraries
(``libtvm_runtime_<kind>`` beside ``libtvm_runtime``: apache-tvm 0.27's wheel layout, see
``tvm/backend/cuda/__init__.py``). ``import tvm`` loads them among everything else —
libtvm_compiler (260 MB), tvm.relax, every backend's Python: 1-5 s — where a cache hit
needs two libraries. So a hit loads libtvm_runtime (RTLD_GLOBAL: the host code calls its C
API) and the sidecars of the kinds the kernel embeds (RTLD_LOCAL, as ``import tvm`` loads
them: they only register functions), from the files ``import tvm`` takes, so that a later
``import tvm`` shares them instead of registering TVM's functions twice. Where that fails
(another layout, a sidecar that will not load), ``import tvm`` does it its own way.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import os
import sys
from collections.abc import Iterable
from pathlib import Path


def loader_name(kind: str) -> str:
    """The global function that deserializes an embedded module of ``kind``."""
    return f"ffi.Module.load_from_bytes.{kind}"


def _search_paths() -> list[Path]:
    """Where ``import tvm`` looks for its libraries (tvm/libinfo.py: TVM_LIBRARY_PATH,
    then the package's ``lib``), found without importing the package."""
    paths = [Path(os.environ["TVM_LIBRARY_PATH"])] if os.environ.get("TVM_LIBRARY_PATH") else []
    spec = importlib.util.find_spec("tvm")
    if spec is not None and spec.submodule_search_locations:
        paths.append(Path(next(iter(spec.submodule_search_locations))) / "lib")
    return paths


def _library_file(directories: Iterable[Path], name: str) -> Path | None:
    """``lib<name>.so`` in the first of ``directories`` that has it (Linux; elsewhere None)."""
    if not sys.platform.startswith("linux"):
        return None
    return next((d / f"lib{name}.so" for d in directories if (d / f"lib{name}.so").is_file()), None)


def _load(package_dirs: list[Path], name: str, mode: int) -> ctypes.CDLL | None:
    """A TVM library from ``package_dirs`` (found here, so that a hit need not import
    tvm_ffi), else where tvm_ffi's loader finds it; None where neither does."""
    path = _library_file(package_dirs, name)
    try:
        if path is not None:
            return ctypes.CDLL(str(path), mode)
        from tvm_ffi import libinfo

        mode_name = "RTLD_GLOBAL" if mode == ctypes.RTLD_GLOBAL else "RTLD_LOCAL"
        return libinfo.load_lib_ctypes("tvm", name, mode_name, extra_lib_paths=package_dirs)
    except (OSError, RuntimeError):
        return None


@functools.cache
def _runtime_library() -> ctypes.CDLL | None:
    """libtvm_runtime, RTLD_GLOBAL; None when it is not where ``import tvm`` would take it."""
    from . import direct  # ctypes structures: loaded on a hit, not at import tilelang

    if direct.ffi_library() is None:  # its dependency libtvm_ffi: loaded first, from tvm_ffi's file
        import tvm_ffi  # noqa: F401
    return _load(_search_paths(), "tvm_runtime", ctypes.RTLD_GLOBAL)


def load_tvm_runtime_library() -> None:
    """Make TVM's runtime C API available to a kernel's host code (the thread pool of
    parallel blocks, workspaces); ``import tvm`` only where the library is not found."""
    if "tvm" in sys.modules:
        return  # its package loaded the library already
    if _runtime_library() is None:
        import tvm  # noqa: F401 - another layout: the package loads it its own way


def _missing_loaders(kinds: Iterable[str]) -> list[str]:
    from . import direct

    lib = direct.ffi_library()
    if lib is not None:
        return [kind for kind in kinds if not direct.has_global(lib, loader_name(kind))]
    import tvm_ffi

    return [kind for kind in kinds if tvm_ffi.get_global_func(loader_name(kind), allow_missing=True) is None]


def _load_sidecars(kinds: list[str]) -> None:
    """TVM's sidecar of each kind, from the directory its runtime library came from (as
    tvm/backend/cuda/__init__.py does); stops at the first one that does not load."""
    runtime = _runtime_library()
    if runtime is None:
        return
    directory = Path(runtime._name).resolve().parent
    for kind in kinds:
        # None: not there, or its own dependencies (libcuda) are not
        if _load([directory], f"tvm_runtime_{kind}", ctypes.RTLD_LOCAL) is None:
            return


def load_module_loaders(kinds: Iterable[str]) -> None:
    """Register the loaders of the embedded module ``kinds`` (and TVM's runtime library);
    ``import tvm`` when its runtime libraries cannot provide them."""
    load_tvm_runtime_library()
    missing = _missing_loaders(kinds)
    if not missing:
        return
    if "tvm" not in sys.modules:
        _load_sidecars(missing)
        missing = _missing_loaders(missing)
        if not missing:
            return
    import tvm  # noqa: F401 - its backends' autoload registers the loaders it has


__all__ = ["load_module_loaders", "load_tvm_runtime_library", "loader_name"]
