"""The context of a kernel loaded through the request index, resolved only when needed.

A BackendContext holds TVM targets, and routing reads the kernel's IR: building one costs
the TVM import and a parse of the kernel, which a cache hit should not pay. What loading a
cached kernel needs — the target backend's manifest, the execution backend and its spec —
comes from the registry by the names the request record kept; the rest (targets, routing,
lowering) resolves the real context on first use, as a compile would have.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..backend.context import BackendContext
from ..backend.execution_backend import ExecutionBackend, ExecutionBackendSpec
from ..backend.manifest import BackendModule
from ..backend.registry import REGISTRY


@dataclass(frozen=True)
class ContextFacts:
    """What a request record keeps about the context its kernel was compiled in."""

    backend: str  # the target backend's name
    execution: str  # the execution backend's name
    description: str  # BackendContext.describe()

    @classmethod
    def of(cls, context: BackendContext) -> ContextFacts:
        return cls(context.module.name, context.execution_spec.name, context.describe())

    def record(self, kernel_key: str) -> dict[str, str]:
        return {"kernel": kernel_key, "backend": self.backend, "execution": self.execution,
                "description": self.description}

    @classmethod
    def from_record(cls, record: Mapping[str, str]) -> ContextFacts | None:
        """None for a record without the fields (written by another version)."""
        try:
            return cls(record["backend"], record["execution"], record["description"])
        except KeyError:
            return None


class DeferredContext:
    """Answers what execution backends read while loading (``module``,
    ``execution_backend``, ``execution_spec``, ``describe()``) from the registry; any other
    attribute (``target``, ``route``, ``lower`` ...) is the real context's, resolved once
    through ``resolve``. It forwards rather than copies so that it stays in step with
    BackendContext."""

    def __init__(self, facts: ContextFacts, module: BackendModule, execution_backend: ExecutionBackend,
                 execution_spec: ExecutionBackendSpec, resolve: Callable[[], BackendContext]) -> None:
        self.facts = facts
        self.module = module
        self.execution_backend = execution_backend
        self.execution_spec = execution_spec
        self._resolve = resolve
        self._real: BackendContext | None = None

    @classmethod
    def from_facts(cls, facts: ContextFacts, resolve: Callable[[], BackendContext]) -> DeferredContext | None:
        """None when the registry no longer has the backends the record names (the request
        key covers the installed plugins, so this is a plugin refused in this process)."""
        from ..backend.resolution import execution_specs

        module = REGISTRY.backends.get(facts.backend)
        impl = REGISTRY.execution_backends.get(facts.execution)
        if module is None or impl is None:
            return None
        spec = next((s for s in execution_specs(module) if s.name == facts.execution), None)
        if spec is None:
            return None
        return cls(facts, module, impl, spec, resolve)

    def resolve(self) -> BackendContext:
        if self._real is None:
            self._real = self._resolve()
        return self._real

    def describe(self) -> str:
        return self.facts.description

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.resolve(), name)
