"""The "acme" vendor target backend: what a third party writes against the public API.

It imports only the plugin API (``tilelang.plugin``, where the CPU's
``LowerKernelLaunchToLoops`` is exported too) and ``tilelang.errors``. It owns TVM
target kind ``llvm``, which core's ``cpu`` backend owns too: ``target="acme"`` names it
by its alias, and its detector (priority 10, above the CPU's) answers ``target="auto"``
when its "device" is present — here, when ACME_DEVICE=1 is set.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from tilelang.errors import CompileError
from tilelang.plugin import (
    BackendModule,
    DeviceCodegen,
    ExecutionBackendSpec,
    HostCodegen,
    PassPipeline,
    TargetDetector,
    hookimpl,
    tvm_build_function,
)

TILELANG_PLUGIN_API = "1.1"


def lowering_passes(context: Any) -> Sequence[Any]:
    from tilelang.plugin import LowerKernelLaunchToLoops
    from tvm import s_tir, tirx

    return [
        LowerKernelLaunchToLoops(),
        s_tir.transform.UnifyThreadBinding(),
        tirx.transform.StmtSimplify(),
        tirx.transform.FlattenBuffer(),
        tirx.transform.NarrowDataType(32),
        tirx.transform.VectorizeLoop(True),
        tirx.transform.StmtSimplify(),
        tirx.transform.VerifyMemory(),
        tirx.transform.AnnotateEntryFunc(),
        tirx.transform.SplitHostDevice(),
        tirx.transform.MakePackedAPI(),
    ]


def finalize_host_passes(context: Any) -> Sequence[Any]:
    from tvm import tirx

    return [tirx.transform.LowerTVMBuiltin(), tirx.transform.LowerIntrin()]


def finalize_device_passes(context: Any) -> Sequence[Any]:
    return []


def no_device_code(mod: Any, target: Any) -> Any:
    raise CompileError(f"acme target {target}: kernels run as host code; got device functions")


BACKEND = BackendModule(
    name="acme",
    target_kinds=("llvm",),
    pipelines={"llvm": PassPipeline("acme", lowering_passes, finalize_host_passes, finalize_device_passes)},
    device_codegens={"llvm": DeviceCodegen(source_only=no_device_code)},
    host_codegens={"llvm": HostCodegen(build=tvm_build_function("llvm"))},
    execution_backends=(ExecutionBackendSpec("tvm_ffi", requires_device_compile=False),),
    aliases=("acme",),
    default_target=lambda: {"kind": "llvm"},
    description="Acme's accelerator (a CPU in disguise)",
)


@hookimpl
def tilelang_backend_modules() -> list[BackendModule]:
    return [BACKEND]


def detect_acme_device() -> dict[str, str] | None:
    return {"kind": "llvm"} if os.environ.get("ACME_DEVICE") == "1" else None


@hookimpl
def tilelang_target_detectors() -> list[TargetDetector]:
    return [TargetDetector("acme", priority=10, detect=detect_acme_device)]
