"""BackendModule (the manifest), BackendContext (one compilation's resolved state),
registration and context resolution.

Resolution follows the seed's three steps, once per compilation:
1. normalize the device target and the host target;
2. select exactly one BackendModule by target kind and, when needed, ``supports_target``;
3. resolve one available execution backend from the request or the module's auto order.
Nothing downstream resolves a backend again: lowering, codegen, cache and JIT all receive
the same frozen context.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .. import env
from ..errors import (
    BackendNotFoundError,
    BackendUnavailableError,
    ManifestError,
)
from . import refs
from .device_codegen import DeviceCodegen, DeviceOutput, HostCodegen, tvm_build_function
from .execution_backend import ExecutionBackend, ExecutionBackendSpec
from .hints import EXECUTION_EXTRAS, TARGET_EXTRAS, install_hint
from .pass_pipeline import PassPipeline
from .registry import REGISTRY, origin
from .target import (
    TargetSpec,
    default_host_target,
    detect_auto_target,
    enclosing_target,
    target_to_json,
    to_tvm_target,
)

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def _frozen(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class BackendModule:
    """The compiler-facing manifest of a target backend. Validated on construction.

    Components may be given as objects or as ``"package.module:attribute"`` references,
    which are imported on first use so that registering a manifest stays cheap.
    """

    name: str
    target_kinds: tuple[str, ...]
    pipelines: Mapping[str, PassPipeline | str]
    device_codegens: Mapping[str, DeviceCodegen | str]
    execution_backends: tuple[ExecutionBackendSpec, ...]
    supports_target: Callable[[Any], bool] | None = None
    host_codegens: Mapping[str, HostCodegen | str] = field(default_factory=dict)
    host_codegen_hooks: tuple[Callable[[Any, BackendContext], Any] | str, ...] = ()
    callbacks: Mapping[str, Callable[..., Any] | str] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    default_target: Callable[[], TargetSpec] | None = None
    canonicalize_target: Callable[[Any], Any] | None = None
    unavailable_reason: Callable[[], str | None] | None = None
    description: str = ""
    # the pass configs (tilelang.compile(pass_configs=...)) this backend's pipeline reads:
    # key -> what it does; see tilelang.backend.pass_configs for how requests are checked
    pass_configs: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        where = f"BackendModule({self.name!r})"
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ManifestError(f"{where}: name must be lower_snake_case")
        kinds = tuple(self.target_kinds)
        object.__setattr__(self, "target_kinds", kinds)
        if not kinds or not all(isinstance(k, str) and k for k in kinds):
            raise ManifestError(f"{where}: target_kinds must be a non-empty tuple of kind names")
        for attr in ("pipelines", "device_codegens", "host_codegens", "callbacks", "pass_configs"):
            object.__setattr__(self, attr, _frozen(getattr(self, attr)))
        for attr, kind_type in (("pipelines", PassPipeline), ("device_codegens", DeviceCodegen)):
            table = getattr(self, attr)
            missing = [k for k in kinds if k not in table]
            extra = [k for k in table if k not in kinds]
            if missing:
                raise ManifestError(f"{where}: {attr} has no entry for owned kind(s) {missing}")
            if extra:
                raise ManifestError(f"{where}: {attr} has entries for kinds it does not own: {extra}")
            for kind, value in table.items():
                _check_component(value, kind_type, f"{where}.{attr}[{kind!r}]")
        for kind, value in self.host_codegens.items():
            _check_component(value, HostCodegen, f"{where}.host_codegens[{kind!r}]")
        object.__setattr__(self, "host_codegen_hooks", tuple(self.host_codegen_hooks))
        for i, hook in enumerate(self.host_codegen_hooks):
            _check_callable(hook, f"{where}.host_codegen_hooks[{i}]")
        for key, value in self.callbacks.items():
            _check_callable(value, f"{where}.callbacks[{key!r}]")
        for key, value in self.pass_configs.items():
            if not isinstance(key, str) or "." not in key or not isinstance(value, str):
                raise ManifestError(
                    f"{where}.pass_configs[{key!r}]: keys are namespaced names ('tl.<name>') "
                    f"and values describe them in words, got {value!r}"
                )
        specs = tuple(self.execution_backends)
        object.__setattr__(self, "execution_backends", specs)
        if not specs or not all(isinstance(s, ExecutionBackendSpec) for s in specs):
            raise ManifestError(
                f"{where}: execution_backends must be a non-empty tuple of ExecutionBackendSpec"
            )
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise ManifestError(f"{where}: execution_backends lists a name twice: {names}")
        object.__setattr__(self, "aliases", tuple(self.aliases))
        for attr in ("supports_target", "default_target", "canonicalize_target", "unavailable_reason"):
            value = getattr(self, attr)
            if value is not None and not callable(value):
                raise ManifestError(f"{where}: {attr} must be callable or None")
        if self.aliases and self.default_target is None:
            raise ManifestError(f"{where}: aliases {self.aliases} need a default_target")

    # -- component access (resolves lazy references) ------------------------------------
    def pipeline(self, kind: str) -> PassPipeline:
        return refs.resolve(self.pipelines[kind])

    def device_codegen(self, kind: str) -> DeviceCodegen:
        return refs.resolve(self.device_codegens[kind])

    def host_codegen(self, kind: str) -> HostCodegen:
        if kind in self.host_codegens:
            return refs.resolve(self.host_codegens[kind])
        return HostCodegen(build=tvm_build_function(kind))

    def callback(self, name: str) -> Callable[..., Any]:
        if name not in self.callbacks:
            raise KeyError(f"backend {self.name!r} has no callback {name!r}; it has {sorted(self.callbacks)}")
        return refs.resolve(self.callbacks[name])

    def spec(self, execution_backend: str) -> ExecutionBackendSpec | None:
        return next((s for s in self.execution_backends if s.name == execution_backend), None)

    def matches(self, target: Any) -> bool:
        if target.kind.name not in self.target_kinds:
            return False
        return self.supports_target is None or bool(self.supports_target(target))


def probe(check: Callable[[], str | None] | None) -> str | None:
    """Run an availability check; a check that raises counts as 'unavailable', with why."""
    if check is None:
        return None
    try:
        return check()
    except Exception as err:  # noqa: BLE001 - reported to the user as the reason
        return f"availability check raised {type(err).__name__}: {err}"


def _check_component(value: Any, kind_type: type, where: str) -> None:
    if isinstance(value, str):
        refs.check_ref(value, where)
    elif not isinstance(value, kind_type):
        raise ManifestError(f"{where} must be a {kind_type.__name__} or a reference, got {value!r}")


def _check_callable(value: Any, where: str) -> None:
    if isinstance(value, str):
        refs.check_ref(value, where)
    elif not callable(value):
        raise ManifestError(f"{where} must be callable or a reference, got {value!r}")


def register_backend(module: BackendModule, *, distribution: str = "", version: str = "") -> BackendModule:
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
    return module


def register_execution_backend(
    backend: ExecutionBackend, *, distribution: str = "", version: str = ""
) -> ExecutionBackend:
    from .execution_backend import validate_execution_backend

    validate_execution_backend(backend, "register_execution_backend")
    if backend.name in REGISTRY.execution_backends:
        other = origin("execution", backend.name)[0]
        raise ManifestError(f"execution backend {backend.name!r} is already registered (by {other})")
    REGISTRY.execution_backends[backend.name] = backend
    if distribution:
        REGISTRY.origins[("execution", backend.name)] = (distribution, version)
        backend._tilelang_dist_version = version  # type: ignore[attr-defined]
    return backend


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
        return "|".join(
            [
                f"backend={self.module.name}@{dist}=={version}",
                f"target={target_to_json(self.target)}",
                f"host={target_to_json(self.target_host)}",
                f"exec={exec_name}@{exec_dist}=={exec_version}:{exec_impl}",
            ]
        )

    def describe(self) -> str:
        return (
            f"target backend {self.module.name!r} ({self.target.kind.name}, {self.target_source}), "
            f"execution backend {self.execution_spec.name!r}"
        )


def _resolve_target(target: TargetSpec) -> tuple[Any, str]:
    """Step 1a: a request -> tvm Target and how it was chosen."""
    from tvm.target import Target

    source = "explicit"
    if target is None or (isinstance(target, str) and target == "auto"):
        target, source = _auto_target()
    if isinstance(target, str) and not isinstance(target, Target):
        owners = [m for m in REGISTRY.backends.values() if target in m.aliases]
        if len(owners) == 1:
            source = f"alias {target!r}" if source == "explicit" else source
            target = owners[0].default_target()  # type: ignore[misc]
    return to_tvm_target(target), source


def _auto_target() -> tuple[TargetSpec, str]:
    """What "auto" means, most specific first: an enclosing ``with tvm.target.Target(...)``
    block (taken as given, like an explicit target), TILELANG_DEFAULT_TARGET, then the
    registered detectors."""
    current = enclosing_target()
    if current is not None:
        return current, "explicit (enclosing tvm.target.Target)"
    default = env.get_default_target()
    if default != "auto":
        return default, f"auto ({env.DEFAULT_TARGET})"
    target, detector = detect_auto_target(REGISTRY.detectors)
    return target, f"auto ({detector})"


def _select_module(target: Any) -> BackendModule:
    """Step 2: exactly one manifest owns the target."""
    kind = target.kind.name
    candidates = [m for m in sorted(REGISTRY.backends.values(), key=lambda m: m.name) if m.matches(target)]
    if len(candidates) == 1:
        return candidates[0]
    installed = ", ".join(
        f"{m.name} ({'/'.join(m.target_kinds)})" for m in sorted(REGISTRY.backends.values(), key=lambda m: m.name)
    ) or "none"
    if not candidates:
        raise BackendNotFoundError(
            f"no installed target backend handles target kind {kind!r} (target {target}). "
            f"Installed target backends: {installed}. To fix: {install_hint(kind, TARGET_EXTRAS)}"
        )
    names = ", ".join(f"{m.name} (from {origin('backend', m.name)[0]})" for m in candidates)
    raise BackendNotFoundError(
        f"target {target} is claimed by several target backends: {names}; their "
        "supports_target predicates must make them unambiguous"
    )


def _select_execution(module: BackendModule, target: Any, request: str) -> tuple[ExecutionBackend, ExecutionBackendSpec]:
    """Step 3: one available execution backend."""
    declared = ", ".join(s.name for s in module.execution_backends)
    if request != "auto":
        spec = module.spec(request)
        if spec is None:
            raise BackendNotFoundError(
                f"target backend {module.name!r} cannot use execution backend {request!r}; "
                f"it declares: {declared}"
            )
        candidates = [spec]
    else:
        candidates = list(module.execution_backends)
    reasons = []
    for spec in candidates:
        impl = REGISTRY.execution_backends.get(spec.name)
        if impl is None:
            reasons.append(f"{spec.name}: {_why_missing(spec.name)}")
            continue
        why = probe(impl.unavailable_reason) or probe(spec.is_available)
        if why is None and spec.supports_target is not None and not spec.supports_target(target):
            served = [k for k in module.target_kinds if k != target.kind.name
                      and spec.supports_target(to_tvm_target({"kind": k}))]
            why = f"does not support target kind {target.kind.name!r}" + (
                f"; it serves {', '.join(repr(k) for k in served)}: pass target={served[0]!r}" if served else "")
        if why is not None:
            reasons.append(f"{spec.name}: {why}")
            continue
        return impl, spec
    error = BackendNotFoundError if all("not installed" in r for r in reasons) else BackendUnavailableError
    raise error(
        f"no usable execution backend for target backend {module.name!r} "
        f"(requested {request!r}; declared in order: {declared}): " + "; ".join(reasons)
    )


def _why_missing(name: str) -> str:
    """Why an execution backend is not registered: installed but refused, or not installed."""
    from ..plugins.loader import plugin_records

    for record in plugin_records():
        if record.status != "loaded" and (name in record.execution_backends or record.name == name):
            return f"not installed ({record.status}: {record.error})"
    return f"not installed ({install_hint(name, EXECUTION_EXTRAS)})"


#: the spec of a codegen-only context: sources, no host module, nothing compiled
CODEGEN_ONLY = ExecutionBackendSpec("codegen_only", requires_host_codegen=False,
                                    requires_device_compile=False)


def create_backend_context(
    target: TargetSpec = "auto", target_host: TargetSpec = None, execution_backend: str | None = "auto"
) -> BackendContext:
    """Resolve target, host target, target backend and execution backend, once.

    execution_backend=None resolves no execution backend: the context can lower and
    generate source (``tilelang.lower``) on machines where nothing can run the kernel."""
    from tvm_ffi import DLDeviceType

    if execution_backend == "auto":
        execution_backend = env.get_default_execution_backend()
    device, source = _resolve_target(target)
    module = _select_module(device)
    if module.canonicalize_target is not None:
        device = module.canonicalize_target(device)
    if not source.startswith("explicit") and execution_backend not in (None, "auto"):
        device, source = _kind_for_execution(module, device, source, execution_backend)
    why = probe(module.unavailable_reason)
    if why is not None:
        raise BackendUnavailableError(f"target backend {module.name!r} cannot compile here: {why}")
    if target_host is not None:
        host = to_tvm_target(target_host)
    elif device.host is not None:
        host = device.host
    elif device.get_target_device_type() == DLDeviceType.kDLCPU:
        host = device.without_host() if hasattr(device, "without_host") else device
    else:
        host = default_host_target()
    device = device.with_host(host)
    if execution_backend is None:
        return BackendContext(module, device, host, None, CODEGEN_ONLY, source)
    impl, spec = _select_execution(module, device, execution_backend)
    return BackendContext(module, device, host, impl, spec, source)


def _kind_for_execution(module: BackendModule, device: Any, source: str, request: str) -> tuple[Any, str]:
    """A target the backend chose (an alias, "auto") may take another of the backend's
    kinds when the requested execution backend serves only that one: ``target="cpu",
    execution_backend="cython"`` compiles for the kind cython calls. A target given
    explicitly is kept, and an unsupported pair is reported by step 3."""
    spec = module.spec(request)
    if spec is None or spec.supports_target is None or spec.supports_target(device):
        return device, source
    for kind in module.target_kinds:
        if kind == device.kind.name:
            continue
        candidate = to_tvm_target({"kind": kind})
        if module.canonicalize_target is not None:
            candidate = module.canonicalize_target(candidate)
        if spec.supports_target(candidate):
            return candidate, f"{source}, kind {kind!r} for execution backend {request!r}"
    return device, source
