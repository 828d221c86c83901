"""Context resolution: a request -> one BackendContext, once per compilation.

The seed's three steps:
1. normalize the device target and the host target;
2. select exactly one BackendModule: the one an alias or a detector names, else the one
   whose target kinds and ``supports_target`` accept the target, highest ``priority``
   first (a tie is an error that names both and how to choose);
3. resolve one available execution backend from the request or the module's auto order
   (its own specs, then those that outside execution backends offer when it accepts them).
"""

from __future__ import annotations

from typing import Any

from .. import env
from ..errors import BackendNotFoundError, BackendUnavailableError
from .availability import probe
from .context import CODEGEN_ONLY, BackendContext
from .execution_backend import ExecutionBackend, ExecutionBackendSpec
from .hints import EXECUTION_EXTRAS, TARGET_EXTRAS, install_hint
from .manifest import BackendModule
from .names import is_first_party
from .registry import REGISTRY, entry_point, origin, refusals, with_refusals
from .routing import route_kernel
from .target import (
    TargetDetector,
    TargetSpec,
    default_host_target,
    detect_auto_target,
    enclosing_target,
    to_tvm_target,
)


def execution_specs(module: BackendModule) -> tuple[ExecutionBackendSpec, ...]:
    """The module's execution backends in auto order: its own, then (when it accepts them)
    the specs registered execution backends offer it, in name order."""
    own = module.execution_backends
    if not module.accepts_external_execution_backends:
        return own
    listed = {spec.name for spec in own}
    offered = []
    for name, impl in sorted(REGISTRY.execution_backends.items()):
        if name in listed:
            continue
        spec = next((s for s in impl.serves if s.serves_backend(module.name, module.target_kinds)), None)
        if spec is not None:
            offered.append(spec)
    return own + tuple(offered)


def ordered_detectors() -> list[TargetDetector]:
    """Detectors in the order "auto" asks them (see TargetDetector)."""
    def key(detector: TargetDetector) -> tuple[int, bool, str]:
        dist = origin("detector", detector.name)[0]
        return (-detector.priority, is_first_party(dist), detector.name)

    return sorted(REGISTRY.detectors.values(), key=key)


def resolve_target(target: TargetSpec) -> tuple[Any, str, BackendModule | None]:
    """Step 1a: a request -> (tvm Target, how it was chosen, the backend it names or None).

    An alias names its backend, and so does the detector that answered "auto": neither is
    dispatched again by kind, so a vendor's ``target="acme"`` on core's ``llvm`` kind
    compiles with acme whatever else owns ``llvm``."""
    source, named = "explicit", ""
    if target is None or (isinstance(target, str) and target == "auto"):
        target, source, named = _auto_target()
    module = None
    if isinstance(target, str) and not target.lstrip().startswith("{"):
        owners = [m for _, m in sorted(REGISTRY.backends.items()) if target in m.aliases]
        if len(owners) > 1:
            raise BackendNotFoundError(
                f"target alias {target!r} is declared by several target backends: "
                + ", ".join(f"{m.name} (from {origin('backend', m.name)[0]})" for m in owners)
                + "; leave one out with TILELANG_PLUGINS_DENY=<entry point>"
            )
        if owners:
            module = owners[0]
            source = f"alias {target!r}" if source == "explicit" else source
            target = module.default_target()  # type: ignore[misc]
    device = _to_target(target)
    if module is None and named:
        candidate = REGISTRY.backends.get(named)
        if candidate is not None and candidate.matches(device):
            module = candidate
    return device, source, module


def owned_target(target: TargetSpec) -> tuple[Any, str, BackendModule]:
    """Steps 1 and 2: (the tvm Target in its owning backend's canonical form, how it was
    chosen, that backend) -- what a compilation, ``determine_target`` and the carver's
    ``get_arch`` start from."""
    device, source, module = resolve_target(target)
    if module is None:
        module = select_module(device)
    if module.canonicalize_target is not None:
        device = module.canonicalize_target(device)
    return device, source, module


def _to_target(spec: TargetSpec) -> Any:
    try:
        return to_tvm_target(spec)
    except BackendNotFoundError as err:
        if not isinstance(spec, str) or not refusals(spec):
            raise
        raise BackendNotFoundError(with_refusals(str(err), spec)) from err


def _auto_target() -> tuple[TargetSpec, str, str]:
    """What "auto" means, most specific first: an enclosing ``with tvm.target.Target(...)``
    block (taken as given, like an explicit target), TILELANG_DEFAULT_TARGET, then the
    registered detectors. Returns (spec, source, the backend a detector named or "")."""
    current = enclosing_target()
    if current is not None:
        return current, "explicit (enclosing tvm.target.Target)", ""
    default = env.get_default_target()
    if default != "auto":
        return default, f"auto ({env.DEFAULT_TARGET})", ""
    target, detector = detect_auto_target(ordered_detectors())
    return target, f"auto ({detector.name})", detector.backend_name


def select_module(target: Any) -> BackendModule:
    """Step 2: the manifest that owns the target: kinds and predicates, then priority."""
    kind = target.kind.name
    ordered = [m for _, m in sorted(REGISTRY.backends.items())]
    candidates = [m for m in ordered if m.matches(target)]
    if not candidates:
        installed = ", ".join(f"{m.name} ({'/'.join(m.target_kinds)})" for m in ordered) or "none"
        raise BackendNotFoundError(with_refusals(
            f"no installed target backend handles target kind {kind!r} (target {target}). "
            f"Installed target backends: {installed}. To fix: {install_hint(kind, TARGET_EXTRAS)}",
            f"kind:{kind}",
        ))
    top = max(m.priority for m in candidates)
    best = [m for m in candidates if m.priority == top]
    if len(best) == 1:
        return best[0]
    names = ", ".join(
        f"{m.name} (from {origin('backend', m.name)[0]}, entry point "
        f"{entry_point('backend', m.name) or 'none: registered by hand'})" for m in best
    )
    aliases = [f"target={m.aliases[0]!r}" for m in best if m.aliases]
    raise BackendNotFoundError(
        f"target {target} is claimed by several target backends of priority {top}: {names}. "
        "Choose one: "
        + (f"name it by its alias ({' or '.join(aliases)}), or " if aliases else "")
        + "leave the others out with TILELANG_PLUGINS_DENY=<entry point> (or list the ones "
        "to keep in TILELANG_PLUGINS_ALLOW); a backend's author tells them apart with a "
        "supports_target predicate or a higher priority in its manifest"
    )


def _not_listed(module: BackendModule, request: str, specs: tuple[ExecutionBackendSpec, ...]) -> str:
    """Why ``module`` cannot use execution backend ``request``, for the error message."""
    own = ", ".join(s.name for s in module.execution_backends)
    outside = [s.name for s in specs[len(module.execution_backends):]]
    message = f"target backend {module.name!r} cannot use execution backend {request!r}; it declares: {own}"
    if outside:
        message += f" (and is served from other distributions by: {', '.join(outside)})"
    impl = REGISTRY.execution_backends.get(request)
    if impl is not None:
        offers = any(s.serves_backend(module.name, module.target_kinds) for s in impl.serves)
        if offers and not module.accepts_external_execution_backends:
            message += (
                f". {request!r} (from {origin('execution', request)[0]}) offers to serve it, but "
                f"{module.name!r} does not accept execution backends from other distributions "
                "(its manifest's accepts_external_execution_backends is False)"
            )
        elif not offers:
            served = "; ".join(
                f"target backends {list(s.target_backends) or 'any'}, kinds {list(s.target_kinds) or 'any'}"
                for s in impl.serves
            ) or "nothing outside the target backends that list it"
            message += f". {request!r} (from {origin('execution', request)[0]}) serves: {served}"
    return with_refusals(message, request)


def execution_spec_named(module: BackendModule, name: str) -> ExecutionBackendSpec:
    """The spec of execution backend ``name`` among those ``module`` can use (its own, then
    those served from other distributions), whether or not it can run here; else
    BackendNotFoundError saying which it can use."""
    specs = execution_specs(module)
    spec = next((s for s in specs if s.name == name), None)
    if spec is None:
        raise BackendNotFoundError(_not_listed(module, name, specs))
    return spec


def _select_execution(module: BackendModule, target: Any, request: str) -> tuple[ExecutionBackend, ExecutionBackendSpec]:
    """Step 3: one available execution backend."""
    specs = execution_specs(module)
    declared = ", ".join(s.name for s in specs)
    if request != "auto":
        candidates = [execution_spec_named(module, request)]
    else:
        candidates = list(specs)
    reasons = []
    for spec in candidates:
        impl = REGISTRY.execution_backends.get(spec.name)
        if impl is None:
            reasons.append(f"{spec.name}: {_why_missing(spec.name)}")
            continue
        why = probe(impl.unavailable_reason) or probe(spec.is_available)
        if why is None and not spec.supports(target):
            served = [k for k in module.target_kinds if k != target.kind.name
                      and spec.supports(to_tvm_target({"kind": k}))]
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
    reasons = refusals(name)
    if reasons:
        return f"not installed ({'; '.join(reasons)})"
    return f"not installed ({install_hint(name, EXECUTION_EXTRAS)})"


def create_backend_context(
    target: TargetSpec = "auto", target_host: TargetSpec = None, execution_backend: str | None = "auto",
    *, kernel: Any = None, kernel_name: str = "main",
) -> BackendContext:
    """Resolve target, host target, target backend and execution backend, once.

    execution_backend=None resolves no execution backend: the context can lower and
    generate source (``tilelang.lower``) on machines where nothing can run the kernel.
    ``kernel`` (a PrimFunc): route it first (tilelang.backend.routing), so that the context
    is built for the target backend the routing chose."""
    from tvm_ffi import DLDeviceType

    if execution_backend == "auto":
        execution_backend = env.get_default_execution_backend()
    device, source, module = owned_target(target)
    route = None
    if kernel is not None:
        route = route_kernel(kernel, kernel_name, device, module, source, execution_backend, execution_specs)
        if route is not None and route.moved:
            module = REGISTRY.backends[route.backend]
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
        return BackendContext(module, device, host, None, CODEGEN_ONLY, source, route)
    impl, spec = _select_execution(module, device, execution_backend)
    return BackendContext(module, device, host, impl, spec, source, route)


def _kind_for_execution(module: BackendModule, device: Any, source: str, request: str) -> tuple[Any, str]:
    """A target the backend chose (an alias, "auto") may take another of the backend's
    kinds when the requested execution backend serves only that one: ``target="cpu",
    execution_backend="cython"`` compiles for the kind cython calls. A target given
    explicitly is kept, and an unsupported pair is reported by step 3."""
    spec = next((s for s in execution_specs(module) if s.name == request), None)
    if spec is None or spec.supports(device):
        return device, source
    for kind in module.target_kinds:
        if kind == device.kind.name:
            continue
        candidate = to_tvm_target({"kind": kind})
        if module.canonicalize_target is not None:
            candidate = module.canonicalize_target(candidate)
        if spec.supports(candidate):
            return candidate, f"{source}, kind {kind!r} for execution backend {request!r}"
    return device, source
