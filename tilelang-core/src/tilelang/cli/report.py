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
      "checked": true | false,                   # false: TVM-dependent probes skipped
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
      "status": "available" | "unavailable" | "unchecked",
      "reason": null | "why it cannot run here (or, unchecked: why it was not checked)",
      "description": "...",
      "entry_point": "cpu" | null,             # what TILELANG_PLUGINS_ALLOW/DENY take
      "accepts_external_execution_backends": true,  # target backends only
      "used_by": ["cpu"],                      # execution backends only: target backends
                                               # that use it (listed or served), sorted
      "serves": [{"target_backends": ["cpu"], "target_kinds": []}]  # execution only
    }

    "missing": [{"name": "cuda", "install": "pip install 'tilelang[cuda]'"}]
                                               # first-party backends not installed

"unchecked": the default listing runs no probe that imports TVM (importing it takes
seconds); ``--probe`` runs every probe.

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
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import tilelang
from tilelang.backend import BackendModule, ExecutionBackend
from tilelang.backend.availability import NeedsTVM, probe, without_tvm
from tilelang.backend.hints import EXECUTION_EXTRAS, TARGET_EXTRAS
from tilelang.backend.registry import REGISTRY, entry_point, origin
from tilelang.backend.resolution import (
    execution_specs,
    ordered_detectors,
    resolve_target,
    select_module,
)
from tilelang.backend.target import detect_auto_target
from tilelang.plugins import PluginRecord, plugin_records
from tilelang.plugins.loader import LOADED

AVAILABLE, UNAVAILABLE, UNCHECKED = "available", "unavailable", "unchecked"
#: the reason shown for a probe skipped because it imports TVM
NOT_CHECKED = "not checked: its check imports TVM (`tilelang backends list --probe` runs it)"


class _Unchecked(Exception):
    """A probe needed TVM while the report was collected without it."""


def checked(check: Callable[[], str | None] | None) -> str | None:
    """probe(), except that a check that needs TVM (refused by without_tvm) raises _Unchecked."""
    try:
        return probe(check)
    except NeedsTVM as err:
        raise _Unchecked from err


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
    unchecked: bool = False
    entry_point: str | None = None
    external_execution_backends: tuple[str, ...] = ()  # targets: served from outside
    accepts_external: bool = False
    serves: tuple[dict[str, list[str]], ...] = ()

    @property
    def status(self) -> str:
        if self.unchecked:
            return UNCHECKED
        return AVAILABLE if self.reason is None else UNAVAILABLE

    def status_text(self) -> str:
        """The one-cell form: "available" or "unavailable: <reason>"."""
        return self.status if self.reason is None else f"{self.status}: {self.reason}"

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
            "entry_point": self.entry_point,
        }
        if self.category == "execution":
            data["used_by"] = list(self.used_by)
            data["serves"] = [dict(group) for group in self.serves]
        else:
            data["accepts_external_execution_backends"] = self.accepts_external
        return data


@dataclass(frozen=True)
class AutoTarget:
    """What ``target="auto"`` resolves to on this machine, or why it resolves to nothing."""

    target: Any = None
    resolved: str | None = None
    detector: str | None = None
    backend: str | None = None
    error: str | None = None
    unchecked: bool = False

    def describe(self) -> str:
        if self.unchecked:
            return (f'target="auto": no detector before {self.detector!r} (target backend '
                    f"{self.backend!r}) found a device; {self.detector!r} needs TVM to answer "
                    "(`tilelang backends list --probe` asks it)")
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
    missing: tuple[tuple[str, str], ...] = ()  # (name, install hint) of first-party backends
    checked: bool = True

    def problem_plugins(self) -> list[PluginRecord]:
        """Entry points that contributed nothing: failed, disabled, conflict, incompatible."""
        return [r for r in self.plugins if r.status != LOADED]

    def to_json(self) -> dict[str, Any]:
        return {
            "tilelang_version": self.tilelang_version,
            "checked": self.checked,
            "auto_target": self.auto_target.to_json(),
            "target_backends": [e.to_json() for e in self.target_backends],
            "execution_backends": [e.to_json() for e in self.execution_backends],
            "plugins": [plugin_to_json(r) for r in self.plugins],
            "missing": [{"name": name, "install": hint} for name, hint in self.missing],
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
    execution backends can run what it compiles. Raises _Unchecked (see checked())."""
    why = checked(module.unavailable_reason)
    if why is not None:
        return why
    reasons: dict[str, list[str]] = {}  # reason -> execution backends, to say each once
    for spec in execution_specs(module):
        impl = REGISTRY.execution_backends.get(spec.name)
        if impl is None:
            reasons.setdefault("not installed", []).append(spec.name)
            continue
        why = checked(impl.unavailable_reason) or checked(spec.is_available)
        if why is None:
            return None
        reasons.setdefault(why, []).append(spec.name)
    return "generates code, but no execution backend can run it here (" + "; ".join(
        f"{', '.join(names)}: {why}" for why, names in reasons.items()) + ")"


def _guarded(check: Callable[[], str | None]) -> tuple[str | None, bool]:
    """(reason, unchecked)."""
    try:
        return check(), False
    except _Unchecked:
        return NOT_CHECKED, True


def target_entry(module: BackendModule) -> BackendEntry:
    dist, version = origin("backend", module.name)
    reason, unchecked = _guarded(lambda: target_unavailable_reason(module))
    specs = execution_specs(module)
    return BackendEntry(
        category="target",
        name=module.name,
        distribution=dist,
        version=version,
        description=module.description,
        reason=reason,
        unchecked=unchecked,
        target_kinds=module.target_kinds,
        execution_backends=tuple(spec.name for spec in specs),
        external_execution_backends=tuple(s.name for s in specs[len(module.execution_backends):]),
        accepts_external=module.accepts_external_execution_backends,
        entry_point=entry_point("backend", module.name),
    )


def execution_entry(backend: ExecutionBackend, name: str) -> BackendEntry:
    dist, version = origin("execution", name)
    used_by = tuple(sorted(
        m.name for m in REGISTRY.backends.values() if any(s.name == name for s in execution_specs(m))
    ))
    reason, unchecked = _guarded(lambda: checked(backend.unavailable_reason))
    serves = tuple(
        {"target_backends": list(s.target_backends), "target_kinds": list(s.target_kinds)}
        for s in backend.serves
    )
    return BackendEntry(
        category="execution",
        name=name,
        distribution=dist,
        version=version,
        description=backend.description,
        reason=reason,
        unchecked=unchecked,
        used_by=used_by,
        entry_point=entry_point("execution", name),
        serves=serves,
    )


def resolve_auto_target() -> AutoTarget:
    """Ask the detectors, then find the owning backend exactly as compilation would
    (the same resolution functions as ``create_backend_context``)."""
    detectors = ordered_detectors()
    asked: list[str] = []
    try:
        spec, found = detect_auto_target(_noting(detectors, asked))
    except NeedsTVM:
        detector = next(d for d in detectors if d.name == asked[-1])
        return AutoTarget(detector=detector.name, backend=detector.backend_name, unchecked=True)
    except Exception as err:  # noqa: BLE001 - a detector is a probe too
        return AutoTarget(error=f"{type(err).__name__}: {err}")
    detector = found.name
    try:
        target, _, _ = resolve_target(spec)
        named = REGISTRY.backends.get(found.backend_name)
        backend = (named if named is not None and named.matches(target) else select_module(target)).name
    except NeedsTVM:
        return AutoTarget(target=spec, detector=detector, backend=found.backend_name, unchecked=True)
    except Exception as err:  # noqa: BLE001
        return AutoTarget(target=spec, detector=detector, error=f"{type(err).__name__}: {err}")
    return AutoTarget(spec, str(target), detector, backend)


def _noting(detectors: list[Any], asked: list[str]) -> Any:
    """Yield the detectors, noting each one's name before it is asked."""
    for detector in detectors:
        asked.append(detector.name)
        yield detector


def missing_first_party() -> tuple[tuple[str, str], ...]:
    """First-party backends with a pip extra that are neither installed nor refused."""
    names_by_extra: dict[str, list[str]] = {}
    for name, extra in sorted({**TARGET_EXTRAS, **EXECUTION_EXTRAS}.items()):
        names_by_extra.setdefault(extra, []).append(name)
    known = set(REGISTRY.backends) | set(REGISTRY.execution_backends) | set(REGISTRY.refused)
    return tuple(
        (names[-1], f"pip install '{extra}'")  # a backend name sorts after its kind ("hip" < "rocm")
        for extra, names in sorted(names_by_extra.items()) if not known & set(names)
    )


def collect(*, probe_tvm: bool = False) -> Report:
    """One consistent snapshot of the registry, the plugin records and the auto target.

    probe_tvm=False runs every probe with TVM's import refused: a probe that needs TVM
    is shown as "unchecked" instead of costing seconds (TVM is not imported)."""
    if probe_tvm:
        return _collect(True)
    with without_tvm():
        return _collect(False)


def _collect(probe_tvm: bool) -> Report:
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
        missing=missing_first_party(),
        checked=probe_tvm or "tvm" in sys.modules,
    )
