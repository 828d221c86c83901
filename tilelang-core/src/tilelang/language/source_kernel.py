"""``T.CUDASourceCodeKernel``: a kernel written in CUDA C++, launched like a ``T.Kernel``.

Upstream's spelling::

    T.CUDASourceCodeKernel(T.ceildiv(N, 128), threads=128,
                           source_code_or_path=CUDA_SOURCE, entry_name="external_copy")

``source_code_or_path`` is the source itself or the path of a file holding it;
``entry_name`` names the source's ``extern "C" __global__`` function that is launched on
the grid and block given here. Its parameters are, as upstream passes them, the function's
tensors (data pointers) and then the symbols of their shapes and strides, each group
sorted by name: ``main(A, B)`` over ``T.dynamic("N")`` calls ``entry(A, B, N)``. Scalar
parameters of the function are not passed (upstream passes none).

The statement is the whole kernel: the source replaces what TileLang would generate for
its launch frame. A backend that compiles CUDA source lowers it (tilelang-cuda); the
others refuse it by name (engine/semantic_check.py).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

from tvm import tirx
from tvm.script.ir_builder import tirx as _ib

from ..errors import LanguageError
from .kernel import _ACTIVE, Kernel
from .ops import SOURCE_KERNEL

_WHAT = "T.CUDASourceCodeKernel"
_SOURCE_MARKERS = ("\n", "__global__", 'extern "C"', "#include")
_SOURCE_SUFFIXES = (".cu", ".cuh", ".cuda", ".cpp", ".cc", ".c", ".h", ".hpp")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
# `__global__ void f(`, `__global__ void __launch_bounds__(128) f(`, `__global__ __launch_bounds__(...) void f(`
_GLOBAL = re.compile(r"__global__\s+(?:void\s+)?(?:__launch_bounds__\s*\([^)]*\)\s*)?(?:void\s+)?(\w+)\s*\(")
_EXTERN_C = re.compile(r'extern\s+"C"')
_EXTERN_C_BLOCK = re.compile(r'extern\s+"C"\s*\{')


def load_source(source_code_or_path: Any) -> str:
    """The CUDA source: a file's text where the argument names an existing file, else the
    argument itself (as upstream reads it)."""
    try:
        source = os.fspath(source_code_or_path)
    except TypeError:
        source = None
    if not isinstance(source, str) or not source.strip():
        raise LanguageError(f"{_WHAT}: source_code_or_path must be CUDA source text or the path of a file "
                            f"holding it, got {source_code_or_path!r}")
    expanded = os.path.expanduser(source)
    if "\n" not in source and os.path.isfile(expanded):
        with open(expanded, encoding="utf-8") as f:
            return f.read()
    if any(marker in source for marker in _SOURCE_MARKERS):
        return source
    if os.sep in source or (os.altsep and os.altsep in source) or source.endswith(_SOURCE_SUFFIXES):
        raise LanguageError(f"{_WHAT}: no CUDA source file {source!r} (source_code_or_path is the source "
                            "text or an existing file's path)")
    return source


def _closing(text: str, at: int, open_: str, close: str) -> int:
    """The index of the ``close`` that matches the ``open_`` at ``at`` (-1: none)."""
    depth = 0
    for i in range(at, len(text)):
        if text[i] == open_:
            depth += 1
        elif text[i] == close:
            depth -= 1
            if depth == 0:
                return i
    return -1


def _in_extern_c_block(code: str, at: int) -> bool:
    for block in _EXTERN_C_BLOCK.finditer(code, 0, at):
        end = _closing(code, block.end() - 1, "{", "}")
        if end == -1 or end > at:
            return True
    return False


def global_functions(source: str) -> dict[str, tuple[bool, list[str]]]:
    """The ``__global__`` functions of ``source``: name -> (whether its symbol is C's,
    ``extern "C"``; its parameter declarations), in the order the source declares them."""
    code = _COMMENT.sub(" ", source)
    found: dict[str, tuple[bool, list[str]]] = {}
    for match in _GLOBAL.finditer(code):
        start = max(code.rfind(";", 0, match.start()), code.rfind("}", 0, match.start()),
                    code.rfind("{", 0, match.start()))
        extern_c = bool(_EXTERN_C.search(code, start + 1, match.start())) or _in_extern_c_block(code, match.start())
        open_at = match.end() - 1
        close_at = _closing(code, open_at, "(", ")")
        inside = code[open_at + 1:close_at] if close_at != -1 else ""
        params, depth, current = [], 0, ""
        for ch in inside:
            if ch in "(<[":
                depth += 1
            elif ch in ")>]":
                depth -= 1
            if ch == "," and depth == 0:
                params.append(current.strip())
                current = ""
            else:
                current += ch
        params.append(current.strip())
        params = [p for p in params if p and p != "void"]
        if match.group(1) not in found:
            found[match.group(1)] = (extern_c, params)
    return found


def CUDASourceCodeKernel(*blocks: Any, threads: int | Sequence[int] | None = None,
                         source_code_or_path: Any = None, entry_name: str = "main_kernel",
                         cluster_dims: int | Sequence[int] | None = None, prelude: str | None = None) -> None:
    """Launch ``entry_name`` of the CUDA source on ``blocks`` x ``threads`` (see the module
    docstring). ``prelude``: text put before the source (includes, helpers)."""
    if _ACTIVE:
        raise LanguageError(f"{_WHAT} is a kernel of its own; call it in the function's body, not inside a "
                            "T.Kernel frame")
    source = load_source(source_code_or_path)
    if prelude is not None:
        source = f"{prelude}\n{source}"
    if not isinstance(entry_name, str) or not entry_name.strip():
        raise LanguageError(f"{_WHAT}: entry_name must name the source's __global__ function, got {entry_name!r}")
    functions = global_functions(source)
    if not functions:
        raise LanguageError(f"{_WHAT}: the source declares no __global__ function; write the kernel as "
                            f'`extern "C" __global__ void {entry_name}(...)`')
    if entry_name not in functions:
        raise LanguageError(f"{_WHAT}: the source has no __global__ function {entry_name!r}. Available entries: "
                            f"{', '.join(functions)}")
    if not functions[entry_name][0]:
        raise LanguageError(f"{_WHAT}: __global__ function {entry_name!r} is not declared extern \"C\"; its symbol "
                            f'would be C++\'s mangled name, which the launch cannot find: write `extern "C" '
                            f'__global__ void {entry_name}(...)`')
    if cluster_dims is not None:
        from .clusters import ClusterKernel

        frame: Kernel = ClusterKernel(*blocks, threads=128 if threads is None else threads,
                                      cluster_dims=cluster_dims)
    else:
        frame = Kernel(*blocks, threads=128 if threads is None else threads)
    with frame:
        _ib.evaluate(tirx.call_intrin("int32", SOURCE_KERNEL, tirx.StringImm(source), tirx.StringImm(entry_name)))
