"""Registers the nvrtc execution backend through the ``tilelang.plugins`` entry points.

Imported by ``import tilelang``: it must not import cuda-bindings or torch. The backend
module itself is light too; the SDKs load when a kernel is built or loaded.
"""

from __future__ import annotations

from tilelang.plugin import ExecutionBackend, hookimpl

TILELANG_PLUGIN_API = "1.5"  # 1.5: device_mismatch, UnrunnableLauncher


@hookimpl
def tilelang_execution_backends() -> list[ExecutionBackend]:
    from .backend import NVRTCExecutionBackend

    return [NVRTCExecutionBackend()]
