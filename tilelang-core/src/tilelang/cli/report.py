"""What ``tilelang backends`` reports, collected once into plain data.

Collection is separate from rendering so that the table, ``show`` and ``--json`` cannot
disagree, and so that every availability probe runs in exactly one guarded place: a probe
that raises makes its backend "unavailable", it never crashes the CLI.

JSON printed by ``tilelang backends list --json`` (stable: keys may be added, never renamed
or removed)::

    {
      "tilelang_version": "0.1.0",
      "auto_target": {
        "target": {"kind": "llvm", "mcpu": "znver5"} | "cuda" | null,  # the detector's spec
        "resolved": "llvm -keys=cpu -mcpu=znver5" | null,  # that spec as a tvm Target
        "detector": "cpu" | null,                          # the detector that answered
        "backend": "cpu" | null,                           # the target backend that owns it
        "error": null | "why target='auto' resolves to nothing usable"
      },
      "target_backends": [<backend>, ...],       # sorted by name
      "execution_backends": [<backend>, ...],    # sorted by name
      "plugins": [<plugin>, ...]                 # every entry point, in load order
    }

    <backend> = {
      "name": "cpu",
      "distribution": "tilelang-core" | "<registered by hand>",
      "version": "0.1.0" | "",
      "target_kinds": ["llvm", "c"],           # [] for execution backends
      "execution_backends": ["tvm_ffi"],       # auto-preference order; [] for execution backends
      "status": "available" | "unavailable",
      "reason": null | "why it cannot run here",
      "description": "...",
      "used_by": ["cpu"]                       # execution backends only: target backends
    }                                          # that declare it, sorted

    <plugin> = {
      "name": "cpu",                           # entry-point name
      "distribution": "tilelang-core", "version": "0.1.0",
      "value": "tilelang.cpu.backend",         # the entry point's module
      "status": "loaded" | "failed" | "disabled" | "conflict" | "incompatible",
      "error": null | "full message (may span lines)",
      "backends": [...], "execution_backends": [...],
      "detectors": [...], "language_extensions": [...]
    }
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import tilelang
from tilelang.backend import BackendModule, ExecutionBackend
from tilelang.backend.module import probe
from tilelang.backend.registry import REGISTRY, origin
from tilelang.backend.target import detect_auto_target
from tilelang.plugins import PluginRecord, plugin_records
from tilelang.plugins.loader import LOADED

AVAILABLE, UNAVAILABLE = "available", "unavailable"


@dataclass(frozen=True)
class BackendEntry:
    """One target or execution backend as the report shows it."""

    category: str  # "target" or "execution"
    name: str
    distribution: str
    version: str
    description: str
    reason: str | None
    target_kinds: tuple[str, ...] = ()
    execution_backends: tuple[str, ...] = ()
    used_by: tuple[str, ...] = ()

    @property
    def status(self) -> str:
        return AVAILABLE if self.reason is None else UNAVAILABLE

    def status_text(self) -> str:
        """The one-cell form: "available" or "unavailable: <reason>"."""
        return AVAILABLE if self.reason is None else f"{UNAVAILABLE}: {self.reason}"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "target_kinds": list(self.target_kinds),
            "execution_backends": list(self.execution_backends),
            "status": self.status,
            "reason": self.reason,
            "description": self.description,
        }
        if self.category == "execution":
            data["used_by"] = list(self.used_by)
        return data


@dataclass(frozen=True)
class AutoTarget:
    """What ``target="auto"`` resolves to on this machine, or why it resolves to nothing."""

    target: Any = None
    resolved: str | None = None
    detector: str | None = None
    backend: str | None = None
    error: str | None = None

    def describe(self) -> str:
        if self.detector is None:
            return f'target="auto" resolves to nothing here: {self.error}'
        text = f'target="auto" resolves to {self.resolved or self.target} (detector {self.detector!r}'
        if self.backend is not None:
            return text + f", target backend {self.backend!r})"
        return text + f"); no target backend takes it: {self.error}"

    def to_json(self) -> dict[str, Any]:
        # A detector may return a tvm Target or a dict holding odd values: keep JSON valid.
        target = json.loads(json.dumps(self.target, default=str))
        return {
            "target": target,
            "resolved": self.resolved,
            "detector": self.detector,
            "backend": self.backend,
            "error": self.error,
        }


@dataclass(frozen=True)
class Report:
    """Everything ``tilelang backends`` knows, collected from the registry and the loader."""

    tilelang_version: str
    auto_target: AutoTarget
    target_backends: tuple[BackendEntry, ...]
    execution_backends: tuple[BackendEntry, ...]
    plugins: tuple[PluginRecord, ...] = field(default_factory=tuple)

    def problem_plugins(self) -> list[PluginRecord]:
        """Entry points that contributed nothing: failed, disabled, conflict, incompatible."""
        return [r for r in self.plugins if r.status != LOADED]

    def to_json(self) -> dict[str, Any]:
        return {
            "tilelang_version": self.tilelang_version,
            "auto_target": self.auto_target.to_json(),
            "target_backends": [e.to_json() for e in self.target_backends],
            "execution_backends": [e.to_json() for e in self.execution_backends],
            "plugins": [plugin_to_json(r) for r in self.plugins],
        }


def plugin_to_json(record: PluginRecord) -> dict[str, Any]:
    return {
        "name": record.name,
        "distribution": record.distribution,
        "version": record.version,
        "value": record.value,
        "status": record.status,
        "error": record.error,
        "backends": list(record.backends),
        "execution_backends": list(record.execution_backends),
        "detectors": list(record.detectors),
        "language_extensions": list(record.language_extensions),
    }


def first_line(text: str | None) -> str:
    """A plugin error's headline; the rest (often a traceback) belongs to ``show``."""
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""


def target_unavailable_reason(module: BackendModule) -> str | None:
    """A target backend is usable when it can compile here and at least one of its
    execution backends can run what it compiles."""
    why = probe(module.unavailable_reason)
    if why is not None:
        return why
    reasons = []
    for spec in module.execution_backends:
        impl = REGISTRY.execution_backends.get(spec.name)
        if impl is None:
            reasons.append(f"{spec.name}: not installed")
            continue
        why = probe(impl.unavailable_reason) or probe(spec.is_available)
        if why is None:
            return None
        reasons.append(f"{spec.name}: {why}")
    return "generates code, but no execution backend can run it here (" + "; ".join(reasons) + ")"


def target_entry(module: BackendModule) -> BackendEntry:
    dist, version = origin("backend", module.name)
    return BackendEntry(
        category="target",
        name=module.name,
        distribution=dist,
        version=version,
        description=module.description,
        reason=target_unavailable_reason(module),
        target_kinds=module.target_kinds,
        execution_backends=tuple(spec.name for spec in module.execution_backends),
    )


def execution_entry(backend: ExecutionBackend, name: str) -> BackendEntry:
    dist, version = origin("execution", name)
    used_by = tuple(
        sorted(m.name for m in REGISTRY.backends.values() if m.spec(name) is not None)
    )
    return BackendEntry(
        category="execution",
        name=name,
        distribution=dist,
        version=version,
        description=backend.description,
        reason=probe(backend.unavailable_reason),
        used_by=used_by,
    )


def resolve_auto_target() -> AutoTarget:
    """Ask the detectors, then find the owning backend exactly as compilation would.

    The private resolution helpers are the ones ``create_backend_context`` uses, so the
    answer shown here cannot drift from what ``tilelang.compile(target="auto")`` does.
    """
    from tilelang.backend.module import _resolve_target, _select_module

    try:
        spec, detector = detect_auto_target(REGISTRY.detectors)
    except Exception as err:  # noqa: BLE001 - a detector is a probe too
        return AutoTarget(error=f"{type(err).__name__}: {err}")
    try:
        target, _ = _resolve_target(spec)
    except Exception as err:  # noqa: BLE001
        return AutoTarget(target=spec, detector=detector, error=f"{type(err).__name__}: {err}")
    try:
        backend = _select_module(target).name
    except Exception as err:  # noqa: BLE001
        return AutoTarget(spec, str(target), detector, error=f"{type(err).__name__}: {err}")
    return AutoTarget(spec, str(target), detector, backend)


def collect() -> Report:
    """One consistent snapshot of the registry, the plugin records and the auto target."""
    targets = tuple(target_entry(m) for _, m in sorted(REGISTRY.backends.items()))
    executions = tuple(
        execution_entry(b, name) for name, b in sorted(REGISTRY.execution_backends.items())
    )
    return Report(
        tilelang_version=tilelang.__version__,
        auto_target=resolve_auto_target(),
        target_backends=targets,
        execution_backends=executions,
        plugins=tuple(plugin_records()),
    )
