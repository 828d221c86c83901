"""The process-wide registry the plugin loader fills. Read it through the functions here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .execution_backend import ExecutionBackend
    from .module import BackendModule
    from .target import TargetDetector


@dataclass
class Registry:
    backends: dict[str, BackendModule] = field(default_factory=dict)
    execution_backends: dict[str, ExecutionBackend] = field(default_factory=dict)
    detectors: dict[str, TargetDetector] = field(default_factory=dict)
    language_extensions: dict[str, str] = field(default_factory=dict)
    # name -> (distribution, version) of whoever registered it
    origins: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)

    def clear(self) -> None:
        self.backends.clear()
        self.execution_backends.clear()
        self.detectors.clear()
        self.language_extensions.clear()
        self.origins.clear()


REGISTRY = Registry()


def registered_backends() -> dict[str, BackendModule]:
    return dict(REGISTRY.backends)


def registered_execution_backends() -> dict[str, ExecutionBackend]:
    return dict(REGISTRY.execution_backends)


def origin(category: str, name: str) -> tuple[str, str]:
    """(distribution, version) that registered a backend; ('<registered by hand>', '') if
    it was registered by a direct call rather than through a plugin."""
    return REGISTRY.origins.get((category, name), ("<registered by hand>", ""))
