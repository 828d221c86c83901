"""Publishing manifests and execution backends to the registry (the plugin loader's last
step; tests and scripts may call it by hand)."""

from __future__ import annotations

from ..errors import ManifestError
from .execution_backend import ExecutionBackend, validate_execution_backend
from .manifest import BackendModule
from .registry import REGISTRY, origin


def register_backend(
    module: BackendModule, *, distribution: str = "", version: str = "", entry_point: str = ""
) -> BackendModule:
    """Validate and publish a manifest. A second manifest with the same name is an error."""
    if not isinstance(module, BackendModule):
        raise ManifestError(f"register_backend expects a BackendModule, got {module!r}")
    if module.name in REGISTRY.backends:
        other = origin("backend", module.name)[0]
        raise ManifestError(
            f"target backend {module.name!r} is already registered (by {other}); "
            "backend names must be unique"
        )
    REGISTRY.backends[module.name] = module
    if distribution:
        REGISTRY.origins[("backend", module.name)] = (distribution, version)
    if entry_point:
        REGISTRY.entry_points[("backend", module.name)] = entry_point
    return module


def register_execution_backend(
    backend: ExecutionBackend, *, distribution: str = "", version: str = "", entry_point: str = ""
) -> ExecutionBackend:
    validate_execution_backend(backend, "register_execution_backend")
    if backend.name in REGISTRY.execution_backends:
        other = origin("execution", backend.name)[0]
        raise ManifestError(f"execution backend {backend.name!r} is already registered (by {other})")
    REGISTRY.execution_backends[backend.name] = backend
    if distribution:
        REGISTRY.origins[("execution", backend.name)] = (distribution, version)
        backend._tilelang_dist_version = version  # type: ignore[attr-defined]
    if entry_point:
        REGISTRY.entry_points[("execution", backend.name)] = entry_point
    return backend
