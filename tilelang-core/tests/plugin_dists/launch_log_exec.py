"""A third-party execution backend that serves core's ``cpu`` target backend without being
listed in its manifest: it declares so in ``serves``, and ``cpu`` accepts outside execution
backends. It builds and loads through core's ``tvm_ffi`` backend and logs each launch to
the file named by LAUNCH_LOG (one line per call)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tilelang.plugin import (
    ExecutionBackend,
    ExecutionBackendSpec,
    KernelLauncher,
    hookimpl,
    registered_execution_backends,
)

TILELANG_PLUGIN_API = "1.1"


class LoggingLauncher(KernelLauncher):
    def __init__(self, inner: KernelLauncher, name: str) -> None:
        self.inner, self.name = inner, name

    def __call__(self, *args: Any, stream: Any = None) -> Any:
        with open(os.environ["LAUNCH_LOG"], "a") as log:
            log.write(f"launch {self.name}\n")
        return self.inner(*args, stream=stream)


class LaunchLogExecutionBackend(ExecutionBackend):
    name = "launch_log"
    description = "tvm_ffi with a line per launch (a third party's)"
    serves = (ExecutionBackendSpec("launch_log", target_backends=("cpu", "acme"), requires_device_compile=False),)

    def unavailable_reason(self) -> str | None:
        if "tvm_ffi" not in registered_execution_backends():
            return "it runs kernels through the tvm_ffi execution backend, which is not loaded"
        return None

    @staticmethod
    def _tvm_ffi() -> ExecutionBackend:
        return registered_execution_backends()["tvm_ffi"]

    def build(self, artifact: Any, context: Any) -> Any:
        return self._tvm_ffi().build(artifact, context)

    def load(self, artifact: Any, directory: Path, context: Any) -> KernelLauncher:
        return LoggingLauncher(self._tvm_ffi().load(artifact, directory, context), artifact.kernel_name)


@hookimpl
def tilelang_execution_backends() -> list[ExecutionBackend]:
    return [LaunchLogExecutionBackend()]
