"""Common target plumbing: detection for ``target="auto"`` and normalization to tvm Targets.

Backend-specific parsing (aliases, defaults, canonical attributes) belongs to the backend:
its manifest's ``aliases``/``default_target``/``canonicalize_target``. This module only
turns a request into a tvm ``Target`` and asks registered detectors what "auto" means.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import BackendNotFoundError, ManifestError

TargetSpec = Any  # a kind name, a dict, a JSON string, or a tvm.target.Target


@dataclass(frozen=True)
class TargetDetector:
    """Answers what ``target="auto"`` means on this machine.

    detect() returns a target spec when its backend can run here, else None. Among the
    detectors that answer, the highest priority wins; at equal priority a third party's
    detector is asked before a first party's (a built-in never shadows a vendor's device),
    then name order. The answer names its backend: ``backend`` (default: the detector's
    name) compiles it, when that backend owns the target's kind, without asking which
    other backends own the kind.
    """

    name: str
    priority: int
    detect: Callable[[], TargetSpec | None]
    backend: str = ""

    def __post_init__(self) -> None:
        if not callable(self.detect):
            raise ManifestError(f"TargetDetector({self.name!r}).detect must be callable")
        if not isinstance(self.priority, int) or isinstance(self.priority, bool):
            raise ManifestError(f"TargetDetector({self.name!r}).priority must be an int, got {self.priority!r}")

    @property
    def backend_name(self) -> str:
        return self.backend or self.name


def detect_auto_target(detectors: Iterable[TargetDetector]) -> tuple[TargetSpec, TargetDetector]:
    """Ask detectors in the given order; return (spec, the detector that answered)."""
    asked = []
    for detector in detectors:
        try:
            spec = detector.detect()
        except Exception as err:  # noqa: BLE001 - a broken probe must not hide the others
            asked.append(f"{detector.name} (raised {type(err).__name__}: {err})")
            continue
        if spec is not None:
            return spec, detector
        asked.append(f"{detector.name} (nothing here)")
    raise BackendNotFoundError(
        "target='auto': no installed target backend can run on this machine "
        f"(detectors asked: {', '.join(asked) or 'none'}); "
        "pass an explicit target or install a backend"
    )


def enclosing_target() -> Any:
    """The target of an enclosing ``with tvm.target.Target(...):`` block, or None.

    Upstream scripts choose the target this way (``with Target("c"): tilelang.lower(f)``),
    so ``target="auto"`` takes it before asking the detectors. No block can be open
    unless tvm.target has been imported, so this never imports TVM itself."""
    target_module = sys.modules.get("tvm.target")
    if target_module is None:
        return None
    return target_module.Target.current(allow_none=True)


def to_tvm_target(spec: TargetSpec) -> Any:
    """A tvm Target from a kind name, dict, JSON string or Target."""
    from tvm.target import Target

    if isinstance(spec, Target):
        return spec
    if isinstance(spec, str) and spec.lstrip().startswith("{"):
        spec = json.loads(spec)
    try:
        return Target(spec)
    except Exception as err:  # tvm raises its own error types for bad targets
        raise BackendNotFoundError(f"cannot parse target {spec!r}: {err}") from err


def determine_target(target: TargetSpec = "auto", return_object: bool = False) -> Any:
    """Upstream's helper: the target a compilation with ``target=`` compiles for ("auto" as
    this machine answers it, an enclosing ``with tvm.target.Target(...)`` first; an alias as
    its backend's default; in the owning backend's canonical form), as a ``tvm.target.Target``
    with ``return_object=True``, else as its config dict (which ``tilelang.compile(target=)``
    and ``tvm.target.Target(...)`` take)."""
    from .resolution import owned_target

    device = owned_target(target)[0]
    if return_object:
        return device
    try:
        config = json.loads(str(device))  # a Target prints as its JSON config
    except ValueError:
        return str(device)
    config.pop("host", None)
    return config


def target_to_json(target: Any) -> str:
    """A stable text form of a target (host included) for cache keys and artifacts."""
    return str(target.export()) if hasattr(target, "export") else str(target)


def default_host_target() -> Any:
    """llvm when this TVM has LLVM, else c (compiled with the system C compiler)."""
    import tvm
    from tvm.target import Target

    return Target("llvm" if tvm.runtime.enabled("llvm") else "c")
