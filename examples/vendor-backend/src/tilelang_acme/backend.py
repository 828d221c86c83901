"""The one place Acme's target backend manifest is assembled, and its plugin hooks.

Acme's device runs LLVM code, so the manifest owns TVM's ``llvm`` kind, which core's ``cpu``
backend owns too. Coexistence (docs/writing-a-backend.md): ``target="acme"`` names this
backend by its alias, and the detector answers ``target="auto"`` when the device is present;
``priority=-1`` leaves a bare ``target="llvm"`` to the CPU, as users of TileLang expect.
"""

from __future__ import annotations

from tilelang.plugin import (
    CPU_DEVICE_CODEGEN,
    LLVM_HOST_CODEGEN,
    BackendModule,
    ExecutionBackendSpec,
    TargetDetector,
    hookimpl,
)

from . import device
from .passes import SCRATCHPAD_CONFIG

TILELANG_PLUGIN_API = "1.10"  # 1.10: device_model

BACKEND = BackendModule(
    name="acme",
    target_kinds=("llvm",),
    pipelines={"llvm": "tilelang_acme.pipeline:ACME_PIPELINE"},  # imported on first use
    device_codegens={"llvm": CPU_DEVICE_CODEGEN},
    host_codegens={"llvm": LLVM_HOST_CODEGEN},
    # auto preference: the launch log first (Acme's profiler reads it), then plain tvm_ffi
    execution_backends=(
        ExecutionBackendSpec("acme_log", requires_device_compile=False),
        ExecutionBackendSpec("tvm_ffi", requires_device_compile=False),
    ),
    aliases=("acme",),
    default_target=device.default_target,
    device_model=device.describe,
    priority=-1,
    description="Acme's accelerator (simulated: ACME_DEVICE=1): TVM's LLVM codegen with a scratchpad check",
    pass_configs={SCRATCHPAD_CONFIG: "bytes of scratchpad that shared tiles may use (default 48 KiB)"},
)


@hookimpl
def tilelang_backend_modules() -> list[BackendModule]:
    return [BACKEND]


@hookimpl
def tilelang_target_detectors() -> list[TargetDetector]:
    # above the CPU's 0: with the device present, kernels go to it by default
    return [TargetDetector("acme", priority=10, detect=device.detect)]
