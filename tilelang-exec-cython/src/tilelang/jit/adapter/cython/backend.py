"""cython: Build = generate the kernel's launcher (a Cython module over generated C that
checks arguments, allocates outputs and launches) and compile it with the machine's C
compiler; Load = import that extension; Launch = one call into it.

What gets launched depends on the target's device type, never on its kind's name:
- host kernels (CPU, the ``c`` kind): the CPU manifest declares this backend with
  ``direct_call=True``, so the artifact's host source is the bare compute function
  (plain C, no TVM runtime) and its launch metadata records the call; that C source is
  compiled into the same extension and called directly;
- CUDA kernels: the target backend's toolchain (``BackendModule.toolchain``) turns the device source
  into a cubin, stored next to the extension and loaded with the driver API, and each
  launch of the metadata becomes a ``cuLaunchKernel`` on the caller's current stream.
This package never imports a target backend: it asks the context's manifest.
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

from . import toolchain
from .codegen import KernelSource, kernel_header

CUBIN = "kernel.cubin"
HOST_DEVICE = 1  # DLPack kDLCPU
CUDA_DEVICE = 2  # DLPack kDLCUDA


def _device_type(context: BackendContext) -> int:
    return int(context.target.get_target_device_type())


def extension_sources(artifact: CompiledArtifact, device_type: int) -> dict[str, str]:
    """Every source file of the kernel's extension (file name -> text)."""
    name = artifact.kernel_name
    host_call = device_type == HOST_DEVICE
    if host_call and not artifact.host_source:
        raise CompileError(f"kernel {name!r}: cython compiles the compute function's C source into "
                           f"its launcher; target backend {artifact.target_backend!r} produced none "
                           "(only the c target kind emits C)")
    if not host_call and device_type != CUDA_DEVICE:
        raise CompileError(f"kernel {name!r}: cython launches host (C) or CUDA kernels, not device "
                           f"type {device_type} of target backend {artifact.target_backend!r}")
    sources = {file: toolchain.template(file) for file in toolchain.TEMPLATES}
    sources["tl_kernel.h"] = kernel_header(artifact, KernelSource(device_type, host_call))
    if host_call:
        sources["tl_kernel_host.c"] = artifact.host_source
    return sources


class CythonExecutionBackend(ExecutionBackend):
    name = "cython"
    description = ("a generated Cython/C launcher per kernel, compiled with the machine's C "
                   "compiler: argument checks, outputs and the launch in C")

    @property
    def version(self) -> str:
        """Enters kernel cache keys: the distribution's version, the launcher templates
        (an edited template must not reuse launchers built from the old one) and the Python
        ABI the cached extension was built for."""
        return f"{super().version}+{toolchain.templates_digest()[:16]}{toolchain.SUFFIX}"

    def unavailable_reason(self) -> str | None:
        return toolchain.unavailable_reason()

    def build(self, artifact: CompiledArtifact, context: BackendContext) -> Mapping[str, bytes]:
        from tilelang.plugin import ArgumentBinder

        device_type = _device_type(context)
        ArgumentBinder(artifact, device_type)  # the signature errors every backend reports
        sources = extension_sources(artifact, device_type)  # fails early on unusable metadata
        files: dict[str, bytes] = {}
        if device_type == CUDA_DEVICE:
            files[CUBIN] = compile_device_source(artifact, context, self.name)
        library, data = toolchain.build_extension(sources, artifact.kernel_name)
        files[library] = data
        return files

    def load(self, artifact: CompiledArtifact, directory: Path, context: BackendContext) -> KernelLauncher:
        from .launcher import make_launcher

        device_type = artifact.device_type or _device_type(context)
        if device_type == CUDA_DEVICE and context is not None:  # a cubin for another GPU: its source
            mismatch = device_mismatch(artifact, context)  # still shows, a launch says why
            if mismatch is not None:
                return UnrunnableLauncher(artifact.kernel_name, mismatch)
        found = sorted(directory.glob(f"{toolchain.MODULE_PREFIX}*{toolchain.SUFFIX}"))
        if len(found) != 1:
            raise CompileError(f"kernel {artifact.kernel_name!r}: {directory} should hold one cython "
                               f"launcher, found {[p.name for p in found]}")
        cubin = (directory / CUBIN).read_bytes() if device_type == CUDA_DEVICE else None
        module = toolchain.load_extension(found[0])
        return make_launcher(module, artifact, device_type, cubin)

