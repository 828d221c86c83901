"""BackendContext: one compilation's resolved, immutable state.

Lowering, codegen, the cache and the JIT all receive the same object; nothing downstream
resolves a backend again (see :mod:`.resolution` for how one is made).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import refs
from .device_codegen import DeviceOutput
from .execution_backend import ExecutionBackend, ExecutionBackendSpec
from .manifest import BackendModule
from .registry import origin
from .target import target_to_json

if TYPE_CHECKING:
    from .routing import Route

#: the spec of a codegen-only context: sources, no host module, nothing compiled
CODEGEN_ONLY = ExecutionBackendSpec("codegen_only", requires_host_codegen=False,
                                    requires_device_compile=False)


@dataclass(frozen=True)
class BackendContext:
    """Resolved, immutable state for one compilation."""

    module: BackendModule
    target: Any  # tvm Target with its host attached
    target_host: Any
    execution_backend: ExecutionBackend | None  # None: code generation only (tilelang.lower)
    execution_spec: ExecutionBackendSpec
    # "explicit", "explicit (enclosing tvm.target.Target)", "alias <name>" or "auto (<how>)"
    target_source: str = "explicit"
    # the per-kernel routing decision (tilelang.backend.routing), None when nothing routed
    route: Route | None = None

    def lower(self, mod: Any) -> Any:
        return self.module.pipeline(self.target.kind.name).lower(mod, self)

    def finalize_host(self, mod: Any) -> Any:
        return self.module.pipeline(self.target.kind.name).finalize_host_module(mod, self)

    def finalize_device(self, mod: Any) -> Any:
        return self.module.pipeline(self.target.kind.name).finalize_device_module(mod, self)

    def codegen_device(self, mod: Any, compile_device: bool | None = None) -> DeviceOutput:
        if compile_device is None:
            compile_device = self.execution_spec.requires_device_compile
        codegen = self.module.device_codegen(self.target.kind.name)
        return codegen.generate(mod, self.target, compile_device)

    def preprocess_host_codegen(self, mod: Any) -> Any:
        for hook in self.module.host_codegen_hooks:
            mod = refs.resolve(hook)(mod, self)
        return mod

    def codegen_host(self, mod: Any) -> Any:
        return self.module.host_codegen(self.target_host.kind.name).build(mod, self.target_host)

    def fingerprint(self) -> str:
        """Everything about this context that changes generated code, as text."""
        dist, version = origin("backend", self.module.name)
        exec_name = self.execution_spec.name
        exec_dist, exec_version = origin("execution", exec_name)
        exec_impl = self.execution_backend.version if self.execution_backend else ""
        parts = [
            f"backend={self.module.name}@{dist}=={version}",
            f"target={target_to_json(self.target)}",
            f"host={target_to_json(self.target_host)}",
            f"exec={exec_name}@{exec_dist}=={exec_version}:{exec_impl}",
        ]
        if self.route is not None:  # absent when nothing routed: earlier keys stay valid
            parts.append(f"route={self.route.describe()}")
        return "|".join(parts)

    def describe(self) -> str:
        return (
            f"target backend {self.module.name!r} ({self.target.kind.name}, {self.target_source}), "
            f"execution backend {self.execution_spec.name!r}"
            + (f"; {self.route.describe()}" if self.route is not None else "")
        )
