"""A target backend named "dup". Two distributions install this module under different
module names; both claim the name, so neither may be used."""

from __future__ import annotations

from tilelang.plugin import (
    BackendModule,
    DeviceCodegen,
    ExecutionBackendSpec,
    PassPipeline,
    hookimpl,
)

TILELANG_PLUGIN_API = "1.1"


def _no_passes(context: object) -> list[object]:
    return []


def _no_source(mod: object, target: object) -> str:
    return ""


@hookimpl
def tilelang_backend_modules() -> list[BackendModule]:
    return [
        BackendModule(
            name="dup",
            target_kinds=("ext_dev",),
            pipelines={"ext_dev": PassPipeline("dup", _no_passes, _no_passes, _no_passes)},
            device_codegens={"ext_dev": DeviceCodegen(source_only=_no_source)},
            execution_backends=(ExecutionBackendSpec("tvm_ffi"),),
        )
    ]
