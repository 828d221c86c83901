"""DeviceToolchain: a target backend's compiler from device source to a loadable binary.

The target backend owns its toolchain (NVRTC/nvcc for CUDA, hipcc for ROCm: options,
caches, which compiler is present) and declares it in its manifest
(``BackendModule.toolchain``). Execution backends from other distributions reach it only
through the functions here, which also wrap every toolchain failure the same way:

- ``compile_device_source``: execution backends that load device binaries themselves
  (nvrtc, cython) turn an artifact's device source into one;
- ``prepare_device_runtime``: an execution backend that loads TVM modules with device
  source embedded (tvm_ffi) lets the toolchain hook TVM's runtime first (CUDA: TVM compiles
  embedded source at load time through a global callback);
- ``device_mismatch``: why a kernel compiled for the artifact's target cannot run on the
  device this process has (a cubin for sm_75 on an sm_90 GPU), asked before loading it:
  TVM's runtime stops the process on such a module instead of raising.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import CompileError, ManifestError, TileLangError
from . import refs

if TYPE_CHECKING:
    from ..engine.artifact import CompiledArtifact
    from .context import BackendContext
    from .manifest import BackendModule

#: (device source, normalized target, kernel name) -> the binary (cubin, code object)
CompileFn = Callable[[str, Any, str], bytes]


@dataclass(frozen=True)
class DeviceToolchain:
    """name: how messages call it ("NVRTC/nvcc"); compile: see ``CompileFn``;
    unavailable_reason: None when it can compile here, else why not and the fix;
    prepare_runtime: hooks TVM's runtime before a module with embedded source is loaded;
    cannot_run_here: given a target as ``CompiledArtifact.target`` writes it (text: a
    kernel loaded from the cache has no TVM target), None when code compiled for it runs
    on this process's device (or there is none to ask), else why not and the fix (1.5).
    Callables may be ``"package.module:attribute"`` references, imported on first use."""

    name: str
    compile: CompileFn | str
    unavailable_reason: Callable[[], str | None] | str | None = None
    prepare_runtime: Callable[[], None] | str | None = None
    cannot_run_here: Callable[[Any], str | None] | str | None = None

    def __post_init__(self) -> None:
        where = f"DeviceToolchain({self.name!r})"
        if not isinstance(self.name, str) or not self.name:
            raise ManifestError(f"{where}: name must be a non-empty string (it is shown in errors)")
        for attr in ("compile", "unavailable_reason", "prepare_runtime", "cannot_run_here"):
            value = getattr(self, attr)
            if value is None and attr != "compile":
                continue
            if isinstance(value, str):
                refs.check_ref(value, f"{where}.{attr}")
            elif not callable(value):
                raise ManifestError(f"{where}.{attr} must be callable or a 'package.module:attribute' "
                                    f"reference, got {value!r}")


def declared_toolchain(module: BackendModule) -> DeviceToolchain | None:
    toolchain = refs.resolve(getattr(module, "toolchain", None))
    if toolchain is not None and not isinstance(toolchain, DeviceToolchain):
        raise ManifestError(f"target backend {module.name!r}: its toolchain reference gave {toolchain!r}, "
                            "not a tilelang.plugin.DeviceToolchain")
    return toolchain


def _failure(err: Exception, toolchain: DeviceToolchain, module: BackendModule, what: str) -> CompileError:
    return CompileError(f"{what}: the {toolchain.name} toolchain of target backend {module.name!r} failed: "
                        f"{type(err).__name__}: {err}")


def compile_device_source(artifact: CompiledArtifact, context: BackendContext, consumer: str) -> bytes:
    """The artifact's device source compiled by the context's target backend, for execution
    backend ``consumer``; every failure is a CompileError naming kernel, backends and cause."""
    name, module = artifact.kernel_name, context.module
    what = f"kernel {name!r} (execution backend {consumer!r})"
    if not artifact.device_source:
        raise CompileError(f"{what}: target backend {module.name!r} produced no device source to compile")
    toolchain = declared_toolchain(module)
    if toolchain is None:
        raise CompileError(
            f"{what}: {consumer!r} compiles device source with the target backend's toolchain, and "
            f"target backend {module.name!r} declares none (BackendModule.toolchain); use one of its "
            f"other execution backends: {', '.join(s.name for s in module.execution_backends)}"
        )
    try:
        binary = refs.resolve(toolchain.compile)(artifact.device_source, context.target, name)
    except TileLangError:
        raise
    except Exception as err:  # the toolchain's own failure, attached verbatim
        raise _failure(err, toolchain, module, what) from err
    if not isinstance(binary, (bytes, bytearray, memoryview)):
        raise CompileError(f"{what}: the {toolchain.name} toolchain of target backend {module.name!r} "
                           f"returned {type(binary).__name__}, not the binary's bytes")
    return bytes(binary)


def prepare_device_runtime(context: BackendContext) -> None:
    """Let the target backend's toolchain hook TVM's runtime (nothing when it has no hook)."""
    toolchain = declared_toolchain(context.module)
    if toolchain is None or toolchain.prepare_runtime is None:
        return
    try:
        refs.resolve(toolchain.prepare_runtime)()
    except TileLangError:
        raise
    except Exception as err:
        raise _failure(err, toolchain, context.module, "preparing TVM's runtime") from err


def device_mismatch(artifact: CompiledArtifact, context: BackendContext) -> str | None:
    """Why the artifact's code cannot run on this process's device, or None (it can, the
    backend cannot tell, or it declares no such check). Reads ``context.module`` alone, so
    a cache hit's deferred context stays unresolved."""
    toolchain = declared_toolchain(context.module)
    if toolchain is None or toolchain.cannot_run_here is None:
        return None
    try:
        return refs.resolve(toolchain.cannot_run_here)(artifact.target)
    except TileLangError:
        raise
    except Exception as err:
        raise _failure(err, toolchain, context.module, "asking whether the kernel runs on this device") from err


def toolchain_unavailable_reason(module: BackendModule) -> str | None:
    """None when the backend's toolchain can compile here (or it declares none), else why not."""
    toolchain = declared_toolchain(module)
    if toolchain is None or toolchain.unavailable_reason is None:
        return None
    return refs.resolve(toolchain.unavailable_reason)()


__all__ = ["DeviceToolchain", "compile_device_source", "prepare_device_runtime", "toolchain_unavailable_reason"]
