"""nvrtc: Build = the target backend's toolchain (``BackendModule.toolchain``) turns the artifact's device
source into a cubin; Load = the CUDA driver loads it and looks up each launch's kernel;
Launch = ``cuLaunchKernel`` with values from the artifact's launch metadata.

The compiler is the target backend's (NVRTC or nvcc, its options and cubin cache): this
package never imports tilelang.cuda, it asks the context's manifest. It consumes device
source plus launch metadata only, so the target backend declares it with
``requires_host_codegen=False, requires_device_compile=False``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tilelang.errors import CompileError
from tilelang.plugin import (
    BackendContext,
    CompiledArtifact,
    ExecutionBackend,
    KernelLauncher,
    UnrunnableLauncher,
    compile_device_source,
    device_mismatch,
)

from . import driver
from .launch_plan import launch_values

CUBIN = "kernel.cubin"


class NVRTCExecutionBackend(ExecutionBackend):
    name = "nvrtc"
    description = ("cubins from the target backend's NVRTC/nvcc toolchain, launched with the "
                   "CUDA driver API on the caller's stream")

    def unavailable_reason(self) -> str | None:
        return driver.unavailable_reason()

    def build(self, artifact: CompiledArtifact, context: BackendContext) -> Mapping[str, bytes]:
        name = artifact.kernel_name
        if not artifact.launches or not artifact.device_source:
            raise CompileError(
                f"kernel {name!r}: nvrtc launches device kernels; target backend "
                f"{artifact.target_backend!r} produced none (no device source or launch metadata)"
            )
        # fail at build, not at load in a later process, on metadata the launcher cannot use
        for launch in artifact.launches:
            launch_values(artifact, launch)
        return {CUBIN: compile_device_source(artifact, context, self.name)}

    def load(self, artifact: CompiledArtifact, directory: Path, context: BackendContext) -> KernelLauncher:
        from .launcher import NVRTCLauncher

        mismatch = device_mismatch(artifact, context)  # a cubin for another GPU: its source still shows
        if mismatch is not None:
            return UnrunnableLauncher(artifact.kernel_name, mismatch)
        cubin = (directory / CUBIN).read_bytes()
        return NVRTCLauncher(artifact, cubin, driver.cuda_driver())
