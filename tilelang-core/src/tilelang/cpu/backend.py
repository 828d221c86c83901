"""The one place the CPU backend's manifest is assembled, and its plugin hooks.

Core's built-ins register through the same ``tilelang.plugins`` entry points as any other
distribution (see tilelang-core's pyproject.toml): no private path.
"""

from __future__ import annotations

from ..backend import BackendModule, ExecutionBackendSpec, TargetDetector
from ..plugins import hookimpl
from . import target, threads
from .pipeline import CPUExecutionBackendSpec

TILELANG_PLUGIN_API = "1.10"  # 1.10: device_model

_KINDS = ("llvm", "c")

BACKEND = BackendModule(
    name="cpu",
    target_kinds=_KINDS,
    pipelines={kind: "tilelang.cpu.pipeline:CPU_PIPELINE" for kind in _KINDS},
    device_codegens={kind: "tilelang.cpu.codegen:CPU_DEVICE_CODEGEN" for kind in _KINDS},
    host_codegens={
        "llvm": "tilelang.cpu.codegen:LLVM_HOST_CODEGEN",
        "c": "tilelang.cpu.codegen:C_HOST_CODEGEN",
    },
    # auto preference: tvm_ffi (TVM's packed entry), then cython (the bare C compute
    # function in a compiled wrapper; C source, so only the c kind)
    execution_backends=(
        ExecutionBackendSpec("tvm_ffi", requires_device_compile=False),
        CPUExecutionBackendSpec("cython", supports_target=target.is_c_target,
                                requires_device_compile=False, direct_call=True),
    ),
    # execution backends from other distributions may serve the CPU (their specs say so)
    accepts_external_execution_backends=True,
    # T.ws roles run as agents in program order, barriers are phase counters (warp_roles.py)
    language_features=("explicit_warp_specialization",),
    aliases=("cpu",),
    default_target=target.default_cpu_target,
    device_model="tilelang.plugin:CPUDevice",
    canonicalize_target=target.canonicalize,
    unavailable_reason=target.unavailable_reason,
    description="CPU kernels through TVM's LLVM (or C) codegen; blocks run on the thread pool",
    pass_configs={
        "tl.disable_vectorize": "do not vectorize T.Parallel / T.vectorized loops",
        "tl.emit_line_directives": "target 'c': #line directives in the C source, so that the C compiler's "
                                   "messages name the kernel's .py lines (LLVM's codegen writes no source)",
        "tl.disable_parallel": "run kernel blocks serially instead of on the thread pool",
        "tl.bounds_check": "check every tensor access at run time: an out-of-bounds index "
                           "raises (naming the access and its source line) instead of reading "
                           "or writing past the tensor; tirx.instrument_bound_checkers does the same",
    },
)


# before any kernel runs: TVM sizes its thread pool once, at the first parallel launch
threads.configure_thread_pool()


@hookimpl
def tilelang_backend_modules() -> list[BackendModule]:
    return [BACKEND]


@hookimpl
def tilelang_target_detectors() -> list[TargetDetector]:
    return [TargetDetector("cpu", priority=0, detect=target.detect)]
