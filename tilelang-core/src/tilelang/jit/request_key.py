"""The request key: a TVM-free name for "this builder called with these arguments".

A kernel's cache key hashes its IR (``func.script()``), which needs the builder to run
(TVMScript parses the kernel: tens of milliseconds) and TVM to be imported. A hit in a new
process should cost neither, so the JIT also remembers, under a request key, which kernel
key a builder call produced (``tilelang.cache.RequestIndex``). The request key hashes what
the IR is made of:

- the builder's source file (TVMScript parses source text, and statements such as
  ``A: T.Tensor(...)`` in a body leave no trace in bytecode), its qualified name and line;
- the values the builder reads: its defaults, closure cells and the globals its code
  names (nested functions included); a global function or class is hashed by its own file
  and the globals it reads, a module by its file, a value by its type and contents;
- the call's arguments, the JIT options, the ``TILELANG_*`` environment, what
  ``target="auto"`` detects, and the code of the compiler and of every plugin.

Anything else (an argument or a global that is an arbitrary object, a builder without a
source file) makes the request unkeyable: ``request_key`` returns None and the call takes
the ordinary path (build the IR, hash it). A builder that reads state the key cannot see
(a file, the clock, a mutable attribute of an object reached through a module) may get the
kernel of an earlier call; ``TILELANG_JIT_REQUEST_CACHE=0`` turns the index off. The
in-process memo of ``JITFunction`` (keyed by the arguments alone) assumes even more.
"""

from __future__ import annotations

import builtins
import enum
import functools
import hashlib
import os
import platform
import sys
import threading
import types
from collections.abc import Callable, Mapping
from typing import Any

from .._version import __version__

#: set to 0 to always build the IR before looking a kernel up
REQUEST_CACHE_ENV = "TILELANG_JIT_REQUEST_CACHE"
#: environment variables that cannot change what a kernel compiles to
_ENV_IGNORED = frozenset({"TILELANG_CACHE_DIR", "TILELANG_PRINT_ON_COMPILATION"})
_SCALARS = (type(None), bool, int, float, complex, str, bytes)
_MAX_DEPTH = 8


class Unkeyable(Exception):
    """A value the request key cannot hash soundly (internal: the caller falls back)."""


_FILE_HASHES: dict[str, tuple[tuple[int, int], str]] = {}


def _file_hash(path: str) -> str:
    """sha256 of a source file, remembered per process while its size and mtime stay."""
    try:
        info = os.stat(path)
    except OSError as err:
        raise Unkeyable(f"source file {path}: {err}") from None
    stamp = (info.st_size, info.st_mtime_ns)
    known = _FILE_HASHES.get(path)
    if known is not None and known[0] == stamp:
        return known[1]
    with open(path, "rb") as handle:
        digest = hashlib.sha256(handle.read()).hexdigest()
    _FILE_HASHES[path] = (stamp, digest)
    return digest


class _Encoder:
    """Encodes values into text, following functions into the globals they read."""

    def __init__(self) -> None:
        self.seen: set[int] = set()

    def value(self, obj: Any, depth: int = 0) -> str:
        if depth > _MAX_DEPTH:
            raise Unkeyable("value nested too deeply")
        kind = type(obj)
        if kind in _SCALARS or isinstance(obj, str):  # dtype objects are str subclasses
            return f"{kind.__module__}.{kind.__qualname__}:{obj!r}"
        if kind.__module__ == "numpy" and getattr(obj, "shape", None) == () and hasattr(obj, "item"):
            return f"numpy.{kind.__qualname__}:{obj.item()!r}"  # a numpy scalar
        if isinstance(obj, enum.Enum):
            return f"enum {kind.__module__}.{kind.__qualname__}.{obj.name}"
        if kind in (tuple, list, frozenset, set):
            items = [self.value(item, depth + 1) for item in obj]
            return f"{kind.__name__}({', '.join(sorted(items) if kind in (set, frozenset) else items)})"
        if kind is dict:
            items = sorted(f"{self.value(k, depth + 1)}: {self.value(v, depth + 1)}" for k, v in obj.items())
            return "dict{" + ", ".join(items) + "}"
        if isinstance(obj, types.ModuleType):
            return self.module(obj)
        if isinstance(obj, (types.FunctionType, types.MethodType)):
            return self.function(getattr(obj, "__func__", obj), depth)
        if isinstance(obj, types.BuiltinFunctionType):
            return f"builtin {getattr(obj, '__module__', '')}.{obj.__qualname__}"
        if isinstance(obj, type):
            return self.named(obj, "class")
        if isinstance(obj, functools.partial):
            return (f"partial({self.value(obj.func, depth + 1)}, {self.value(obj.args, depth + 1)}, "
                    f"{self.value(obj.keywords, depth + 1)})")
        wrapped = getattr(obj, "__wrapped__", None)  # e.g. a T.macro or another @tilelang.jit
        if isinstance(wrapped, types.FunctionType):
            return f"{self.named(kind, 'wrapper')}({self.function(wrapped, depth)})"
        raise Unkeyable(f"a {kind.__module__}.{kind.__qualname__} object")

    def module(self, module: types.ModuleType) -> str:
        path = getattr(module, "__file__", None)
        if path and path.endswith(".py"):
            return f"module {module.__name__} {_file_hash(path)}"
        version = getattr(module, "__version__", "")
        return f"module {module.__name__} {version!s}"  # built in, or an extension module

    def named(self, obj: Any, what: str) -> str:
        module = sys.modules.get(getattr(obj, "__module__", "") or "")
        source = self.module(module) if module is not None else "?"
        return f"{what} {getattr(obj, '__qualname__', obj)!s} of {source}"

    def function(self, func: types.FunctionType, depth: int) -> str:
        if id(func) in self.seen:
            return f"function {func.__qualname__} (again)"
        self.seen.add(id(func))
        code = func.__code__
        if not os.path.isfile(code.co_filename):
            raise Unkeyable(f"function {func.__qualname__} has no source file")
        parts = [f"function {func.__module__}.{func.__qualname__}:{code.co_firstlineno}",
                 f"file {_file_hash(code.co_filename)}",
                 f"defaults {self.value(func.__defaults__, depth + 1)}",
                 f"kwdefaults {self.value(func.__kwdefaults__, depth + 1)}"]
        for name, cell in zip(code.co_freevars, func.__closure__ or ()):
            try:
                contents = cell.cell_contents
            except ValueError:  # not assigned yet
                parts.append(f"free {name} empty")
                continue
            parts.append(f"free {name} {self.value(contents, depth + 1)}")
        scope = func.__globals__
        for name in sorted(_global_names(code)):
            if name in scope:
                parts.append(f"global {name} {self.value(scope[name], depth + 1)}")
            elif hasattr(builtins, name):
                parts.append(f"builtin {name}")
            # else: an attribute name, or a NameError the builder would raise itself
        return "\n".join(parts)



def _global_names(code: types.CodeType) -> set[str]:
    """Names the code (and the functions defined in it) may read as globals: ``co_names``
    holds attribute names too, which simply find nothing in the globals."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _environment() -> str:
    return ";".join(f"{k}={v}" for k, v in sorted(os.environ.items())
                    if k.startswith("TILELANG_") and k not in _ENV_IGNORED)


class _TVMBlocker:
    """A meta-path finder that refuses ``tvm`` to the thread that installed it, noting
    that something tried: a detector that needs TVM to answer."""

    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self.tried = False

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if (name == "tvm" or name.startswith("tvm.")) and threading.get_ident() == self.thread:
            self.tried = True
            raise ImportError(f"{name}: not imported while computing a request key")


def _detected() -> str:
    """What ``target="auto"`` resolves to, asking the detectors in their order as
    detect_auto_target does, with TVM refused (unless already imported): a detector that
    needs TVM to answer ends the search with its name, and its answer is taken to follow
    from the host (``_host``) and TVM's version, which the key holds (a device detector
    probes the driver, not TVM)."""
    from ..backend.resolution import ordered_detectors

    blocker = _TVMBlocker() if "tvm" not in sys.modules else None
    if blocker is not None:
        sys.meta_path.insert(0, blocker)
    try:
        for detector in ordered_detectors():
            try:
                spec = detector.detect()
            except Exception:  # noqa: BLE001 - as detect_auto_target: ask the next one
                spec = None
            if blocker is not None and blocker.tried:
                return f"detector {detector.name} (needs TVM) on {_host()}"
            if spec is not None:
                return f"detector {detector.name}: {_Encoder().value(spec)}"
    finally:
        if blocker is not None:
            sys.meta_path.remove(blocker)
    raise Unkeyable("no detector answers")  # the ordinary path raises the full error


@functools.cache
def _host() -> str:
    """The host a default target is made for: name, architecture, CPU model and features
    (an llvm target's mcpu follows from them)."""
    cpu = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if not line.strip():
                    break  # the first processor is enough
                if line.startswith(("model name", "flags", "Features", "CPU part", "vendor_id")):
                    cpu += line.strip() + ";"
    except OSError:
        cpu = platform.processor()
    return f"{platform.node()} {platform.machine()} {hashlib.sha256(cpu.encode()).hexdigest()[:16]}"


def _target_request(target: Any) -> str:
    """The target request as text. "auto" becomes what it resolves to here (the default
    target variable, an enclosing TVM target block, else the detectors); an alias (a
    name that is not a TVM kind, such as "cpu") stands for a default target made for this
    host, so the host joins it. None of this imports TVM."""
    from ..backend.target import enclosing_target

    if target is None or (isinstance(target, str) and target == "auto"):
        if enclosing_target() is not None:
            raise Unkeyable("an enclosing tvm.target.Target block")
        from .. import env

        default = env.get_default_target()
        if default == "auto":
            return f"auto: {_detected()}"
        target = default
    if isinstance(target, str):
        return f"{target!r} on {_host()}"
    if isinstance(target, dict):
        return _Encoder().value(target)
    raise Unkeyable(f"target {type(target).__name__}")


def _plugins() -> str:
    """Every registered plugin distribution with the hash of their code (the context, which
    would say which ones a kernel uses, is not built on this path); one hash for all of
    them (``distributions_fingerprint``: a hit pays it)."""
    from ..backend.registry import REGISTRY, origin
    from .fingerprint import _CORE, distributions_fingerprint

    names = {origin("backend", name)[0] for name in REGISTRY.backends}
    names |= {origin("execution", name)[0] for name in REGISTRY.execution_backends}
    names.discard(_CORE)
    return f"{','.join(sorted(names))}:{distributions_fingerprint(frozenset(names))}"


def _tvm_version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("apache-tvm")
    except importlib.metadata.PackageNotFoundError:
        return "?"


def request_key(builder: Callable[..., Any], args: tuple, kwargs: Mapping[str, Any],
                options: Mapping[str, Any]) -> str | None:
    """The request key of ``builder(*args, **kwargs)`` compiled with ``options`` (the JIT's
    out_idx, target, ...), or None when it cannot be keyed soundly (see the module)."""
    if os.environ.get(REQUEST_CACHE_ENV, "1").strip() == "0":
        return None
    from ..cache import cache_key
    from .fingerprint import compiler_fingerprint, shared_scans

    try:
        encoder = _Encoder()
        parts = [
            "request-v1",
            f"builder {encoder.value(builder)}",
            f"args {encoder.value(tuple(args))}",
            f"kwargs {encoder.value(dict(kwargs))}",
            f"target {_target_request(options.get('target', 'auto'))}",
            f"options {encoder.value({k: v for k, v in options.items() if k not in ('target', 'verbose')})}",
        ]
    except Unkeyable:
        return None
    except RecursionError:
        return None
    from .. import env

    with shared_scans():  # core's folders and the editable plugins' around them: listed once
        code = [f"compiler {compiler_fingerprint()}", f"plugins {_plugins()}"]
    parts += [
        f"execution default {env.get_default_execution_backend()}",
        f"env {_environment()}",
        *code,
        f"tilelang {__version__}",
        f"tvm {_tvm_version()}",
        f"python {sys.version}",
    ]
    return cache_key(parts)
