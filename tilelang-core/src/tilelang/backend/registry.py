"""The process-wide registry the plugin loader fills. Read it through the functions here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .execution_backend import ExecutionBackend
    from .manifest import BackendModule
    from .routing import KernelRouter
    from .target import TargetDetector


@dataclass
class Registry:
    backends: dict[str, BackendModule] = field(default_factory=dict)
    execution_backends: dict[str, ExecutionBackend] = field(default_factory=dict)
    detectors: dict[str, TargetDetector] = field(default_factory=dict)
    language_extensions: dict[str, str] = field(default_factory=dict)
    kernel_routers: dict[str, KernelRouter] = field(default_factory=dict)
    # (category, name) -> (distribution, version) of whoever registered it
    origins: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    # (category, name) -> the entry-point name that contributed it (what ALLOW/DENY take)
    entry_points: dict[tuple[str, str], str] = field(default_factory=dict)
    # a name (backend, alias, execution backend, entry point) or "kind:<kind>" of a plugin
    # that was not used -> why; the loader writes it so that a later "not found" error can
    # say that the name was refused, without core's resolution importing the loader
    refused: dict[str, list[str]] = field(default_factory=dict)

    def clear(self) -> None:
        self.backends.clear()
        self.execution_backends.clear()
        self.detectors.clear()
        self.language_extensions.clear()
        self.kernel_routers.clear()
        self.origins.clear()
        self.entry_points.clear()
        self.refused.clear()


REGISTRY = Registry()


def registered_backends() -> dict[str, BackendModule]:
    return dict(REGISTRY.backends)


def registered_execution_backends() -> dict[str, ExecutionBackend]:
    return dict(REGISTRY.execution_backends)


def origin(category: str, name: str) -> tuple[str, str]:
    """(distribution, version) that registered a backend; ('<registered by hand>', '') if
    it was registered by a direct call rather than through a plugin."""
    return REGISTRY.origins.get((category, name), ("<registered by hand>", ""))


def entry_point(category: str, name: str) -> str | None:
    """The entry-point name a backend came through; None when registered by hand."""
    return REGISTRY.entry_points.get((category, name))


def refusals(name: str) -> list[str]:
    """Why plugins that claimed ``name`` (or ``"kind:<kind>"``) were not used; [] if none."""
    return list(REGISTRY.refused.get(name, ()))


def with_refusals(message: str, name: str) -> str:
    """An error message about ``name``, plus why plugins that claimed it are not used."""
    reasons = refusals(name)
    if not reasons:
        return message
    return (f"{message}. Note: {name.removeprefix('kind:')!r} was claimed by a plugin that is "
            "not used: " + "; ".join(reasons))
