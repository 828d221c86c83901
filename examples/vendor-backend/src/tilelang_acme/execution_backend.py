"""``acme_log``: an execution backend that runs kernels through core's ``tvm_ffi`` and logs
every launch (kernel name and argument shapes) to the ``tilelang_acme.launches`` logger —
what Acme's profiler reads. It serves Acme's backend (listed in its manifest) and, through
``serves``, core's ``cpu``, which accepts execution backends from other distributions."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from tilelang.plugin import (
    BackendContext,
    CompiledArtifact,
    ExecutionBackend,
    ExecutionBackendSpec,
    KernelLauncher,
    hookimpl,
    registered_execution_backends,
)

TILELANG_PLUGIN_API = "1.1"

log = logging.getLogger("tilelang_acme.launches")


class LoggingLauncher(KernelLauncher):
    def __init__(self, inner: KernelLauncher, kernel: str, target_backend: str) -> None:
        self.inner, self.kernel, self.target_backend = inner, kernel, target_backend

    def __call__(self, *args: Any, stream: Any = None) -> Any:
        shapes = [tuple(a.shape) if hasattr(a, "shape") else a for a in args]
        log.info("launch %s on %s %s", self.kernel, self.target_backend, shapes)
        return self.inner(*args, stream=stream)


class AcmeLogExecutionBackend(ExecutionBackend):
    name = "acme_log"
    description = "tvm_ffi with a log line per launch (Acme's profiler reads them)"
    serves = (ExecutionBackendSpec("acme_log", target_backends=("cpu",), requires_device_compile=False),)

    def unavailable_reason(self) -> str | None:
        if "tvm_ffi" not in registered_execution_backends():
            return "it runs kernels through the tvm_ffi execution backend, which is not loaded"
        return None

    @staticmethod
    def _tvm_ffi() -> ExecutionBackend:
        return registered_execution_backends()["tvm_ffi"]

    def build(self, artifact: CompiledArtifact, context: BackendContext) -> Any:
        return self._tvm_ffi().build(artifact, context)

    def load(self, artifact: CompiledArtifact, directory: Path, context: BackendContext) -> KernelLauncher:
        inner = self._tvm_ffi().load(artifact, directory, context)
        return LoggingLauncher(inner, artifact.kernel_name, context.module.name)


@hookimpl
def tilelang_execution_backends() -> list[ExecutionBackend]:
    return [AcmeLogExecutionBackend()]
