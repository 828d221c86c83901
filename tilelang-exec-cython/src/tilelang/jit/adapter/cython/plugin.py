"""Registers the cython execution backend through the ``tilelang.plugins`` entry points.

Imported by ``import tilelang``: it must not import Cython, torch or a compiler. The
backend module is light too; Cython and the compiler run when a kernel is built.
"""

from __future__ import annotations

from tilelang.plugin import ExecutionBackend, hookimpl

TILELANG_PLUGIN_API = "1.5"  # 1.5: device_mismatch, UnrunnableLauncher


@hookimpl
def tilelang_execution_backends() -> list[ExecutionBackend]:
    from .backend import CythonExecutionBackend

    return [CythonExecutionBackend()]
