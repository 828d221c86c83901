"""What a plugin can contribute. Hooks only *register*; compiled code calls the registered
objects directly, never through pluggy."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from ..backend import BackendModule, ExecutionBackend, TargetDetector
    from ..backend.routing import KernelRouter

PROJECT = "tilelang"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def tilelang_backend_modules() -> Sequence[BackendModule]:
    """Target-backend manifests this plugin provides."""


@hookspec
def tilelang_execution_backends() -> Sequence[ExecutionBackend]:
    """Execution-backend implementations this plugin provides."""


@hookspec
def tilelang_target_detectors() -> Sequence[TargetDetector]:
    """Detectors that say what target="auto" means on this machine."""


@hookspec
def tilelang_language_extensions() -> Mapping[str, str]:
    """Language extensions: name -> "package.module:attribute", reachable as T.ext.<name>.
    The implementation is imported on first use only."""


@hookspec
def tilelang_kernel_routers() -> Sequence[KernelRouter]:
    """Per-kernel routers (tilelang.backend.routing.KernelRouter): asked once per kernel,
    before its BackendContext is built, whether it should compile on another target backend."""
