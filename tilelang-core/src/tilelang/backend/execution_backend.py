"""Execution backends: the shared Build -> Load -> Launch implementations.

A target backend *declares* which execution backends can consume its output, in auto
preference order, with :class:`ExecutionBackendSpec`. An execution backend *implements*
:class:`ExecutionBackend` and is contributed by a plugin; it owns cache orchestration,
wrapper creation, artifact loading, argument and stream binding, launch and lifetime.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ManifestError

if TYPE_CHECKING:
    from ..engine.artifact import CompiledArtifact
    from .context import BackendContext

NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class ExecutionBackendSpec:
    """A target backend's compatibility declaration for one execution backend.

    name: the execution backend's registered name.
    is_available: target-side availability, None when available, else the reason
        (e.g. the target backend's own toolchain is missing); the execution backend's own
        availability is asked separately.
    supports_target: predicate on the normalized target; None means every target.
    requires_host_codegen: the execution backend loads host code produced by codegen_host.
    requires_device_compile: device code must be compiled eagerly (binary, not source).
    operand_kinds: kinds of launch-metadata operand, beyond data pointers and scalars, that
        the execution backend supplies when it launches kernels itself (e.g. "tensormap":
        it encodes TMA tensor maps from their recipe); a pipeline may emit such operands
        only for an execution backend that lists them (or runs the host code).
    target_backends / target_kinds: for a spec an execution backend offers itself (its
        ``serves``), the target backends and/or target kinds it serves; empty in a spec a
        target backend lists. A spec with kinds serves targets of those kinds only.
    """

    name: str
    is_available: Callable[[], str | None] | None = None
    supports_target: Callable[[Any], bool] | None = None
    requires_host_codegen: bool = True
    requires_device_compile: bool = True
    operand_kinds: tuple[str, ...] = ()
    target_backends: tuple[str, ...] = ()
    target_kinds: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not NAME.match(self.name):
            raise ManifestError(
                f"ExecutionBackendSpec name {self.name!r} must be lower_snake_case"
            )
        for field in ("is_available", "supports_target"):
            value = getattr(self, field)
            if value is not None and not callable(value):
                raise ManifestError(f"ExecutionBackendSpec({self.name!r}).{field} must be callable")
        for field in ("target_backends", "target_kinds", "operand_kinds"):
            value = getattr(self, field)
            if isinstance(value, str) or not all(isinstance(v, str) and v for v in value):
                raise ManifestError(
                    f"ExecutionBackendSpec({self.name!r}).{field} must be a tuple of names, got {value!r}"
                )
            object.__setattr__(self, field, tuple(value))

    def supports(self, target: Any) -> bool:
        """Whether this spec can run kernels for ``target`` (kinds, then the predicate)."""
        if self.target_kinds and target.kind.name not in self.target_kinds:
            return False
        return self.supports_target is None or bool(self.supports_target(target))

    def serves_backend(self, name: str, kinds: tuple[str, ...]) -> bool:
        """Whether an offered spec names a target backend (by name, or by one of its kinds)."""
        if not (self.target_backends or self.target_kinds):
            return False
        if self.target_backends and name not in self.target_backends:
            return False
        return not self.target_kinds or any(k in self.target_kinds for k in kinds)


class KernelLauncher(ABC):
    """A loaded kernel, ready to launch. Returned by :meth:`ExecutionBackend.load`."""

    @abstractmethod
    def __call__(self, *args: Any, stream: Any = None) -> Any:
        """Validate and bind ``args``, allocate outputs, launch; return the outputs."""


class UnrunnableLauncher(KernelLauncher):
    """What ``load`` returns for a kernel built for another device than this process's
    (``tilelang.backend.toolchain.device_mismatch``): the kernel compiles and shows its
    source; a launch raises LaunchError with the reason and the fix."""

    def __init__(self, kernel_name: str, reason: str) -> None:
        self.kernel_name, self.reason = kernel_name, reason

    def __call__(self, *args: Any, stream: Any = None) -> Any:
        from ..errors import LaunchError

        raise LaunchError(f"kernel {self.kernel_name!r} cannot run on this device: {self.reason}")


class ExecutionBackend(ABC):
    """The interface an execution backend implements.

    Contract:
    - ``build`` turns a compiled artifact into the files the backend needs at load time
      (a shared library, a cubin, a wrapper); the bytes are stored by the kernel cache
      under the artifact's key, so they must not embed absolute paths of this process.
    - ``load`` receives the artifact and the directory holding those files (fresh from
      ``build`` or from the cache in another process) and returns a launcher.
    - Argument validation happens in the launcher, before any launch, and raises
      :class:`tilelang.errors.ArgumentError`.
    """

    #: registered name, e.g. "tvm_ffi"
    name: str = ""
    #: description shown by `tilelang backends list`
    description: str = ""
    #: the target backends this execution backend offers to serve although they do not
    #: list it: one spec (named like this backend) per group, stating ``target_backends``
    #: and/or ``target_kinds``; used only by manifests with
    #: ``accepts_external_execution_backends=True``
    serves: tuple[ExecutionBackendSpec, ...] = ()

    @property
    def version(self) -> str:
        """Version that enters cache keys; defaults to the providing distribution's."""
        return getattr(self, "_tilelang_dist_version", "0")

    def unavailable_reason(self) -> str | None:
        """None when this backend can run here, else a sentence saying why not."""
        return None

    @abstractmethod
    def build(self, artifact: CompiledArtifact, context: BackendContext) -> Mapping[str, bytes]:
        """Build step: produce the files that ``load`` needs, as name -> bytes."""

    @abstractmethod
    def load(
        self, artifact: CompiledArtifact, directory: Path, context: BackendContext
    ) -> KernelLauncher:
        """Load step: load the built files from ``directory`` and return a launcher."""


def validate_execution_backend(obj: object, where: str) -> ExecutionBackend:
    if not isinstance(obj, ExecutionBackend):
        raise ManifestError(f"{where}: {obj!r} is not a tilelang.backend.ExecutionBackend")
    if not isinstance(obj.name, str) or not NAME.match(obj.name):
        raise ManifestError(f"{where}: execution backend name {obj.name!r} must be lower_snake_case")
    serves = obj.serves
    if isinstance(serves, ExecutionBackendSpec) or not isinstance(serves, (tuple, list)):
        raise ManifestError(f"{where}: {obj.name!r}.serves must be a tuple of ExecutionBackendSpec")
    for spec in serves:
        if not isinstance(spec, ExecutionBackendSpec):
            raise ManifestError(f"{where}: {obj.name!r}.serves holds {spec!r}, not an ExecutionBackendSpec")
        if spec.name != obj.name:
            raise ManifestError(
                f"{where}: {obj.name!r}.serves holds a spec named {spec.name!r}; "
                f"name it {obj.name!r}, after the execution backend that offers it"
            )
        if not (spec.target_backends or spec.target_kinds):
            raise ManifestError(
                f"{where}: {obj.name!r}.serves holds a spec that names no target_backends and "
                "no target_kinds; say which target backends or kinds it serves"
            )
    return obj
