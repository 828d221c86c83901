"""Compiling and loading launcher extensions.

An extension is built from its sources (the launcher.pyx template, tl_runtime.h,
tl_cuda.h, the kernel's generated tl_kernel.h and, for CPU kernels, TVM's C source of the
compute function): Cython turns the .pyx into C, the machine's C compiler builds one shared
library. Built extensions are cached by the hash of everything that shapes the binary
(sources, compiler and its version, flags, Python ABI, Cython, tilelang and TVM versions)
in ``<cache root>/cython`` (``tilelang.cache.cache_subdir``: a folder only its owner may
write), next to the kernel cache: another process, or another kernel with the same
launcher, uses it without compiling. Builds of one key take a file lock and publish by
atomic rename, so concurrent builders never see half a file; each extension has a digest
file, checked before its bytes are used (a truncated one is rebuilt with a warning). With
the cache disabled, extensions build in a private temporary folder.

Environment: ``CC`` picks the compiler (default: cc, then gcc).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.metadata
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from collections.abc import Callable, Mapping
from importlib.resources import files
from pathlib import Path
from types import ModuleType

from tilelang.errors import CompileError

#: module names of launcher extensions start with this (the rest is the source hash)
MODULE_PREFIX = "_tl_cython_"
SUFFIX = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
# -fno-strict-aliasing: TVM's C codegen reinterprets float bits through pointer casts
# (bfloat16), and CPython builds its own extensions with it too
# CYTHON_COMPRESS_STRINGS=0: the string table stays plain text, so the module name can be
# written into a translation made once for every kernel (translated_launcher)
CFLAGS = ("-O2", "-fPIC", "-shared", "-std=gnu11", "-fno-strict-aliasing", "-fvisibility=hidden",
          "-Wl,-Bsymbolic", "-DCYTHON_COMPRESS_STRINGS=0")
LIBS = ("-ldl", "-lm")
TEMPLATES = ("launcher.pyx", "tl_runtime.h", "tl_cuda.h")


def extension_cache_dir() -> Path:
    """Where built extensions are cached (``<cache root>/cython``; no I/O)."""
    from tilelang.plugin import cache_path

    return cache_path("cython")


@functools.cache
def template(name: str) -> str:
    return files(__package__).joinpath("templates", name).read_text()


@functools.cache
def templates_digest() -> str:
    """A hash of the templates every launcher is made from: they are not Python files, so
    the compiler fingerprint of the kernel cache does not see them change."""
    digest = hashlib.sha256()
    for name in TEMPLATES:
        digest.update(template(name).encode())
    return digest.hexdigest()


def _compiler_command() -> list[str] | None:
    """$CC (may carry flags), else cc, else gcc; None when none is on PATH."""
    configured = os.environ.get("CC", "").strip()
    candidates = [shlex.split(configured)] if configured else [["cc"], ["gcc"]]
    for command in candidates:
        found = shutil.which(command[0]) if command else None
        if found:
            return [found, *command[1:]]
    return None


@functools.cache
def _compiler_identity(command: tuple[str, ...]) -> str:
    """The compiler's first ``--version`` line (enters the extension hash)."""
    try:
        proc = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=60,
                              check=False)
    except (OSError, subprocess.SubprocessError) as err:
        return f"unknown ({err})"
    return (proc.stdout or proc.stderr).splitlines()[0] if (proc.stdout or proc.stderr) else "unknown"


def python_include() -> Path:
    return Path(sysconfig.get_paths()["include"])


def unavailable_reason() -> str | None:
    """None when launchers can be built here; else why not, and what fixes it."""
    if importlib.util.find_spec("Cython") is None:
        return "Cython cannot be imported; pip install 'Cython>=3.0' (or pip install 'tilelang[cython]')"
    version = importlib.metadata.version("Cython")
    if int(version.split(".")[0]) < 3:
        return f"Cython {version} is too old; pip install 'Cython>=3.0'"
    if _compiler_command() is None:
        return ("no C compiler found (looked for $CC, cc and gcc on PATH); install one "
                "(e.g. apt-get install gcc) or set CC")
    if not (python_include() / "Python.h").is_file():
        return (f"the Python headers are missing ({python_include()}/Python.h); install the "
                "Python development package (e.g. apt-get install python3-dev)")
    return None


def _include_dirs() -> list[str]:
    import tvm.libinfo
    import tvm_ffi.libinfo

    dirs = [str(python_include()), tvm.libinfo.find_include_path(), tvm_ffi.libinfo.find_include_path(),
            tvm_ffi.libinfo.find_dlpack_include_path()]
    return list(dict.fromkeys(dirs))


def _build_key(sources: Mapping[str, str], command: list[str]) -> str:
    import Cython
    import tvm
    from tilelang.plugin import TILELANG_VERSION as __version__

    digest = hashlib.sha256()
    parts = [
        *[f"{name}\0{text}" for name, text in sorted(sources.items())],
        " ".join(command), _compiler_identity(tuple(command)), " ".join(CFLAGS + LIBS),
        sys.version, SUFFIX, f"cython={Cython.__version__}", f"tilelang={__version__}",
        f"tvm={tvm.__version__}",
    ]
    for part in parts:
        data = part.encode()
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


def _run(command: list[str], what: str, kernel: str, cwd: Path) -> None:
    proc = subprocess.run(command, capture_output=True, text=True, cwd=cwd, check=False)
    if proc.returncode != 0:
        raise CompileError(f"kernel {kernel!r}: {what} failed building its cython launcher:\n"
                           f"$ {shlex.join(command)}\n{proc.stderr}{proc.stdout}")


def build_extension(sources: Mapping[str, str], kernel: str) -> tuple[str, bytes]:
    """Build (or find in the cache) the extension made of ``sources`` (file name -> text;
    ``launcher.pyx`` is the module). Returns (its file name, its bytes)."""
    command = _compiler_command()
    if command is None:
        raise CompileError(f"kernel {kernel!r}: {unavailable_reason()}")
    name = MODULE_PREFIX + _build_key(sources, command)[:32]
    from tilelang.plugin import cache_subdir, read_file, remove_stale, write_file

    directory = cache_subdir("cython")
    if directory is None:  # cache disabled or unwritable: nothing shared is read or written
        with tempfile.TemporaryDirectory(prefix="tilelang-cython-") as tmp:
            return f"{name}{SUFFIX}", _compile(sources, name, command, kernel, Path(tmp))
    final = directory / f"{name}{SUFFIX}"
    data = read_file(final, repair=False)
    if data is not None:
        return final.name, data
    from filelock import FileLock

    with FileLock(str(directory / f"{name}.lock"), timeout=600, mode=0o600):
        data = read_file(final, repair=True)  # another process may have built it meanwhile
        if data is not None:
            return final.name, data
        remove_stale(directory)  # build folders of killed builders
        with tempfile.TemporaryDirectory(prefix=f".{name}-", dir=directory) as tmp:
            data = _compile(sources, name, command, kernel, Path(tmp))
        try:
            write_file(final, data)  # atomic, digest first
        except OSError as err:  # a full disk: this build is still good
            from tilelang.plugin import warn_unavailable

            warn_unavailable(directory, err)
    return final.name, data


#: the cache folder of launcher.pyx's translation (beside ``cython``, which holds extensions only)
TRANSLATIONS = "cython-translations"
#: the module name launcher.pyx is translated under once; as long as every real one
#: (MODULE_PREFIX + 32 hex digits), and made of letters no real one holds
PLACEHOLDER = MODULE_PREFIX + "T" * 32


def translated_launcher(pyx: str, kernel: str) -> str:
    """Cython's C for ``pyx`` under the PLACEHOLDER module name. Every kernel's launcher.pyx
    is the same text (what differs is in the tl_kernel.h it includes, which Cython does not
    read), so the translation (half a cold cython build) runs once per template and Cython
    version, cached in the ``cython-translations`` folder (digest-checked like the extensions)."""
    import Cython
    from tilelang.plugin import cache_subdir, read_file, write_file

    key = hashlib.sha256(f"{pyx}\0cython={Cython.__version__}\0{sys.version}".encode()).hexdigest()[:32]
    directory = cache_subdir(TRANSLATIONS)
    path = None if directory is None else directory / f"translated-{key}.c"
    cached = None if path is None else read_file(path, repair=True)
    if cached is not None:
        return cached.decode()
    with tempfile.TemporaryDirectory(prefix="tilelang-cython-") as tmp:
        (Path(tmp) / f"{PLACEHOLDER}.pyx").write_text(pyx)
        _run([sys.executable, "-m", "cython", "-3", "-o", f"{PLACEHOLDER}.c", f"{PLACEHOLDER}.pyx"],
             "Cython", kernel, Path(tmp))
        text = (Path(tmp) / f"{PLACEHOLDER}.c").read_text()
    if path is not None:
        try:
            write_file(path, text.encode())
        except OSError:
            pass  # translated again next time
    return text


def _compile(sources: Mapping[str, str], name: str, command: list[str], kernel: str, work: Path) -> bytes:
    """Cython (its translation, made once) + the C compiler in ``work``; the extension's bytes."""
    if len(name) != len(PLACEHOLDER):
        raise CompileError(f"kernel {kernel!r}: launcher module name {name!r} is not {len(PLACEHOLDER)} "
                           "characters long")
    for file_name, text in sources.items():
        if file_name == "launcher.pyx":
            # the same length, so the string table's recorded lengths stay right
            (work / f"{name}.c").write_text(translated_launcher(text, kernel).replace(PLACEHOLDER, name))
        else:
            (work / file_name).write_text(text)
    built = work / f"{name}{SUFFIX}"
    _run([*command, *CFLAGS, *[f"-I{d}" for d in [str(work), *_include_dirs()]],
          "-o", str(built), f"{name}.c", *LIBS], "the C compiler", kernel, work)
    return built.read_bytes()


_LOADED: dict[str, ModuleType] = {}
_LOAD_LOCK = threading.Lock()


def _package_library(package: str, folder: str, name: str, env_var: str | None = None) -> bool:
    """Load ``lib<name>.so`` of an installed package RTLD_GLOBAL without importing the
    package: from ``$env_var``, else ``<package>/<folder>``. The package's own import later
    opens the same file, which the dynamic loader shares rather than loads twice. False
    when it is not there (another layout, another platform's suffix)."""
    import ctypes

    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return False
    folders = [Path(os.environ[env_var])] if env_var and os.environ.get(env_var) else []
    folders.append(Path(next(iter(spec.submodule_search_locations))) / folder)
    for candidate in folders:
        path = candidate / f"lib{name}.so"
        if path.is_file():
            ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
            return True
    return False


def _import_tvm() -> bool:
    import tvm  # noqa: F401 - another layout: the package loads its libraries its own way

    return True


def _runtime_library_steps() -> list[Callable[[], object]]:
    """What a launcher may link against, in the order launchers need it, each loaded as
    ``import tvm`` would load it but without importing TVM's packages (1-2 s): libtvm_ffi
    (a host kernel's launcher raises its compute function's errors through it), then
    libtvm_runtime (a compute function may call TVM's runtime: workspaces, the parallel
    thread pool). Where a library is not found by path, ``import tvm`` loads it."""
    if "tvm" in sys.modules:
        return []
    steps: list[Callable[[], object]] = []
    if "tvm_ffi" not in sys.modules:
        steps.append(lambda: _package_library("tvm_ffi", "lib", "tvm_ffi") or _import_tvm())
    steps.append(lambda: "tvm" in sys.modules or _package_library("tvm", "lib", "tvm_runtime", "TVM_LIBRARY_PATH")
                 or _import_tvm())
    return steps


def load_extension(path: Path) -> ModuleType:
    """Import a launcher extension from ``path``, once per process: its name is the hash
    of its sources, so a module of that name already loaded (from another cache entry) is
    the same code, and CPython cannot initialize one Cython module twice anyway."""
    name = path.name.split(".")[0]
    with _LOAD_LOCK:
        module = _LOADED.get(name)
        if module is None:
            module = _LOADED[name] = _import_linked(path, name)
    return module


def _import_linked(path: Path, name: str) -> ModuleType:
    """The extension imported once the runtime libraries it names are loaded, and only
    those: a CUDA launcher names none, a host kernel's names libtvm_ffi and, if its compute
    function calls TVM's runtime, libtvm_runtime (1-3 ms of a cache hit otherwise). The
    dynamic loader says which: with immediate binding (CPython's default, RTLD_NOW) an
    extension naming a symbol nothing loaded provides fails its dlopen (0.1 ms) and is
    imported again after the next library. Where binding is lazy (``sys.setdlopenflags``)
    a missing symbol would surface at its first call instead, so every library comes first."""
    steps = _runtime_library_steps()
    getflags = getattr(sys, "getdlopenflags", None)
    if getflags is None or not getflags() & getattr(os, "RTLD_NOW", 0):
        for step in steps:
            step()
        steps = []
    while True:
        try:
            return _import_extension(path, name)
        except ImportError as err:
            if not steps or "symbol" not in str(err):  # "undefined symbol: TVMFFI..." (glibc)
                raise
            steps.pop(0)()


def _import_extension(path: Path, name: str) -> ModuleType:
    loader = importlib.machinery.ExtensionFileLoader(name, str(path))
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module
