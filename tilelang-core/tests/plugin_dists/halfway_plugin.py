"""A plugin whose contributions are only partly valid: a well-formed target backend and an
execution backend with an invalid name. The loader must register neither (no
half-registered plugin)."""

from __future__ import annotations

from typing import Any

from tilelang.plugin import (
    BackendModule,
    DeviceCodegen,
    ExecutionBackend,
    ExecutionBackendSpec,
    PassPipeline,
    hookimpl,
)

TILELANG_PLUGIN_API = "1.1"


def _no_passes(context: Any) -> list[Any]:
    return []


def _no_source(mod: Any, target: Any) -> str:
    return ""


class BadlyNamedExecutionBackend(ExecutionBackend):
    name = "Half-Way"

    def build(self, artifact: Any, context: Any) -> dict[str, bytes]:
        raise NotImplementedError

    def load(self, artifact: Any, directory: Any, context: Any) -> Any:
        raise NotImplementedError


@hookimpl
def tilelang_backend_modules() -> list[BackendModule]:
    return [
        BackendModule(
            name="halfway",
            target_kinds=("ext_dev",),
            pipelines={"ext_dev": PassPipeline("halfway", _no_passes, _no_passes, _no_passes)},
            device_codegens={"ext_dev": DeviceCodegen(source_only=_no_source)},
            execution_backends=(ExecutionBackendSpec("tvm_ffi"),),
        )
    ]


@hookimpl
def tilelang_execution_backends() -> list[ExecutionBackend]:
    return [BadlyNamedExecutionBackend()]
