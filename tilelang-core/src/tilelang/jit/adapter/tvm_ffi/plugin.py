"""Registers the tvm_ffi execution backend through the ``tilelang.plugins`` entry points."""

from __future__ import annotations

from ....backend import ExecutionBackend
from ....plugins import hookimpl

TILELANG_PLUGIN_API = "1.1"


@hookimpl
def tilelang_execution_backends() -> list[ExecutionBackend]:
    from .backend import TVMFFIExecutionBackend

    return [TVMFFIExecutionBackend()]
