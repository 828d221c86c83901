"""CheckExternCalls: every function a CPU kernel calls by name must exist on this machine.

``T.call_extern("float32", "__shfl_sync", ...)`` (a CUDA intrinsic, e.g. through the CUDA
dialect's T.shfl_sync) or a misspelled extern compiled for the CPU and failed only when run:
tvm_ffi loads libraries lazily, so the first call killed the process ("symbol lookup error:
undefined symbol"), and cython's extension failed to import. The CPU links kernels against
the C library, libm and the TVM runtime, which this process has loaded, so a name that does
not resolve here will not resolve in the kernel either: a LanguageError at compile time,
naming the call, the backend and the kernel's source line.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import re
from typing import Any

import tvm_ffi
from tvm import tirx

from ...backend.pass_pipeline import prim_func_pass
from ...errors import LanguageError
from ...language.bounds import source_location
from ...language.misc import IMPORT_SOURCE_ATTR

_EXTERN_OPS = ("tirx.call_extern", "tirx.call_pure_extern")


@functools.cache
def _libraries() -> tuple[Any, ...]:
    """The process's global symbols, and libm / libc by name (their symbols may be local)."""
    found = [ctypes.CDLL(None)]
    for name in ("m", "c"):
        path = ctypes.util.find_library(name)
        if path:
            try:
                found.append(ctypes.CDLL(path))
            except OSError:
                continue
    return tuple(found)


@functools.cache
def links_on_this_machine(symbol: str) -> bool:
    """Whether a kernel library calling ``symbol`` would find it when loaded here."""
    for library in _libraries():
        try:
            getattr(library, symbol)
            return True
        except AttributeError:
            continue
    return False


def imported_sources(body: Any) -> list[str]:
    """The code ``T.import_source`` put in the kernel (TVM's ``pragma_import_c``)."""
    found: list[str] = []
    tvm_ffi.structural_walk(body, (tirx.AttrStmt, lambda a: found.append(str(a.value.value))
                                   if a.attr_key == IMPORT_SOURCE_ATTR else None))
    return found


def _run(func: Any, mod: Any, ctx: Any, c_source: bool) -> Any:
    from tvm.ir import Call, StringImm

    kernel = str(func.attrs.get("global_symbol", "main")) if func.attrs is not None else "main"
    missing: list[tuple[str, Any]] = []
    sources = imported_sources(func.body)

    def defined_in_sources(name: str) -> bool:
        return any(re.search(rf"\b{re.escape(name)}\s*\(", source) for source in sources)

    def on_stmt(stmt: Any) -> None:
        def on_call(call: Any) -> None:
            if str(getattr(call.op, "name", "")) in _EXTERN_OPS and call.args and isinstance(call.args[0], StringImm):
                name = str(call.args[0].value)
                if not links_on_this_machine(name) and not (c_source and defined_in_sources(name)):
                    missing.append((name, stmt.span))

        for part in (getattr(stmt, "value", None), getattr(stmt, "condition", None)):
            if part is not None and not isinstance(part, (int, str)):
                tvm_ffi.structural_walk(part, [(Call, on_call)])

    tvm_ffi.structural_walk(func.body, [((tirx.BufferStore, tirx.Evaluate, tirx.IfThenElse, tirx.LetStmt,
                                          tirx.Bind), on_stmt)])
    if missing:
        name, span = missing[0]
        if sources and not c_source:
            raise LanguageError(
                f"kernel {kernel!r}: T.call_extern of {name!r}, which only the code of T.import_source "
                "defines: the llvm target cannot compile that code (TVM's LLVM codegen drops it); compile "
                "with target='c' to build it with the kernel's C source" + source_location(span))
        raise LanguageError(
            f"kernel {kernel!r}: T.call_extern of {name!r}, which target backend 'cpu' cannot call: "
            "no such function in the C library, libm or the TVM runtime (an intrinsic of another "
            "backend, such as a CUDA warp shuffle, or a misspelled name); use a function the CPU "
            "has, or compile the kernel for the backend that provides it" + source_location(span)
        )
    return func


def CheckExternCalls(c_source: bool) -> Any:
    """``c_source``: the kernel becomes C source (the c target), which includes what
    T.import_source adds, so the functions that code defines may be called."""
    return prim_func_pass(lambda func, mod, ctx: _run(func, mod, ctx, c_source), "tl.cpu.CheckExternCalls")
