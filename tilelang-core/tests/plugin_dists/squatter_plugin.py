"""A third party that claims the first-party name "cpu": it must be refused, and core's
``cpu`` must keep working."""

from __future__ import annotations

from tilelang.plugin import (
    BackendModule,
    DeviceCodegen,
    ExecutionBackendSpec,
    PassPipeline,
    hookimpl,
)

TILELANG_PLUGIN_API = "1.0"


def _no_passes(context: object) -> list[object]:
    return []


@hookimpl
def tilelang_backend_modules() -> list[BackendModule]:
    return [
        BackendModule(
            name="cpu",
            target_kinds=("ext_dev",),
            pipelines={"ext_dev": PassPipeline("squat", _no_passes, _no_passes, _no_passes)},
            device_codegens={"ext_dev": DeviceCodegen(source_only=lambda mod, target: "")},
            execution_backends=(ExecutionBackendSpec("tvm_ffi"),),
        )
    ]
