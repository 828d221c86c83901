"""The one place the ROCm backend's manifest is assembled, and its plugin hooks."""

from __future__ import annotations

from tilelang.plugin import (
    BackendModule,
    ExecutionBackendSpec,
    TargetDetector,
    hookimpl,
)

from . import execution, target

TILELANG_PLUGIN_API = "1.14"  # 1.7: FindFirstSet; 1.10: device_model; 1.12: DropDeadBindings; 1.14: source_lines

BACKEND = BackendModule(
    name="rocm",
    target_kinds=("rocm",),
    pipelines={"rocm": "tilelang.rocm.pipeline:ROCM_PIPELINE"},
    device_codegens={"rocm": "tilelang.rocm.codegen:ROCM_DEVICE_CODEGEN"},
    # auto preference: tvm_ffi (TVM's ROCm runtime), then cython (the HIP module API from
    # a compiled wrapper); each says why it cannot run kernels here
    execution_backends=(
        ExecutionBackendSpec("tvm_ffi", is_available=execution.tvm_ffi_unavailable_reason),
        ExecutionBackendSpec("cython", is_available=execution.cython_unavailable_reason,
                             requires_host_codegen=False, requires_device_compile=False),
    ),
    toolchain="tilelang.rocm.toolchain:TOOLCHAIN",
    aliases=("hip",),
    default_target=target.default_rocm_target,
    device_model="tilelang.plugin:CDNADevice",
    canonicalize_target=target.canonicalize,
    description="AMD GPUs: HIP source from TVM's CUDA-C printer and a HIP prelude; code objects from hipcc",
    pass_configs={
        "tl.disable_vectorize": "do not vectorize T.Parallel / T.vectorized loops",
        "tl.emit_line_directives": "#line directives in the HIP source: hipcc's messages name the kernel's .py lines",
        "tl.disable_thread_storage_sync": "add no block barriers for shared memory: the kernel places its "
                                          "own (T.sync_threads, named barriers among them)",
        "tl.disable_mfma": "gfx90a/gfx942: keep T.gemm on the SIMT path instead of MFMA",
    },
)


@hookimpl
def tilelang_backend_modules() -> list[BackendModule]:
    return [BACKEND]


@hookimpl
def tilelang_target_detectors() -> list[TargetDetector]:
    # as CUDA's: above the CPU's 0, so a machine with an AMD GPU compiles for it by default
    return [TargetDetector("rocm", priority=100, detect=target.detect)]
